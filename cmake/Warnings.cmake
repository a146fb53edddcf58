# Sanitizers apply to every target (C and C++), so executables carry the runtime the library needs.
if(PCCL_SANITIZE)
  add_compile_options(-fsanitize=${PCCL_SANITIZE} -fno-omit-frame-pointer)
  add_link_options(-fsanitize=${PCCL_SANITIZE})
endif()

# pccl_apply_warnings(target): strict warnings (errors with PCCL_WERROR) on our own targets.
function(pccl_apply_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
    -Wcast-align -Wunused -Wformat=2 -Wimplicit-fallthrough)
  if(PCCL_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
