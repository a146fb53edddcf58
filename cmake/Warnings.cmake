# Sanitizers apply to every C and C++ target, so executables carry the runtime the library needs
# (not to HIP/CUDA device code: those modules are built without them).
if(PCCL_SANITIZE)
  add_compile_options($<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=${PCCL_SANITIZE}>
                      $<$<COMPILE_LANGUAGE:C,CXX>:-fno-omit-frame-pointer>)
  add_link_options($<$<LINK_LANGUAGE:C,CXX>:-fsanitize=${PCCL_SANITIZE}>)
  # GCC's manual: "sanitizers tend to increase the rate of false positive warnings, most notably those
  # around -Wmaybe-uninitialized". Seen with GCC 12 at -O2 + ASan inside libstdc++'s <regex>. That
  # warning stays on in the unsanitized builds.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    add_compile_options($<$<COMPILE_LANGUAGE:C,CXX>:-Wno-maybe-uninitialized>)
  endif()
endif()

# pccl_apply_warnings(target): strict warnings (errors with PCCL_WERROR) on our own targets.
function(pccl_apply_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
    -Wcast-align -Wunused -Wformat=2 -Wimplicit-fallthrough)
  if(PCCL_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
