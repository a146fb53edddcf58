# Sanitizers apply to every C and C++ target, so executables carry the runtime the library needs
# (not to HIP/CUDA device code: those modules are built without them).
if(PCCL_SANITIZE)
  add_compile_options($<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=${PCCL_SANITIZE}>
                      $<$<COMPILE_LANGUAGE:C,CXX>:-fno-omit-frame-pointer>)
  add_link_options($<$<LINK_LANGUAGE:C,CXX>:-fsanitize=${PCCL_SANITIZE}>)
  # Executables not position-independent: ASan+UBSan describe every global and check site in data that
  # a PIE relocates at each start (2 million relocations in a test program), which took half of each
  # start (0.35 s -> 0.17 s), and the test suite starts several hundred. Linking is faster too.
  add_link_options($<$<STREQUAL:$<TARGET_PROPERTY:TYPE>,EXECUTABLE>:-no-pie>)
  # GCC's manual: "sanitizers tend to increase the rate of false positive warnings, most notably those
  # around -Wmaybe-uninitialized". Seen with GCC 12 at -O2 + ASan inside libstdc++'s <regex>. That
  # warning stays on in the unsanitized builds. -Wtsan: GCC says its TSan does not instrument
  # std::atomic_thread_fence, which asio uses; a fact about the tool, not about our code.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    add_compile_options($<$<COMPILE_LANGUAGE:C,CXX>:-Wno-maybe-uninitialized>)
    if(PCCL_SANITIZE MATCHES "thread")
      add_compile_options($<$<COMPILE_LANGUAGE:C,CXX>:-Wno-tsan>)
    endif()
  endif()
  # clang links its sanitizer runtime statically, whole, into executables only: libpccl.so would keep
  # undefined references (--no-undefined fails) and the runtime's operator new would clash with the
  # one test_wire replaces (tests/wire_alloc_watch.cpp). Its shared runtime, as gcc always uses, found
  # through an rpath, does neither (ASan+UBSan; clang 14's shared TSan runtime crashes at start: use gcc
  # for TSan).
  # Programs outside the tree that link a sanitized libpccl need PCCL_SANITIZE_LINK_EXTRA too
  # (tests/packaging.sh).
  set(PCCL_SANITIZE_LINK_EXTRA "")
  if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang" AND NOT PCCL_FUZZ)
    execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-runtime-dir OUTPUT_VARIABLE _pccl_san_dir
                    OUTPUT_STRIP_TRAILING_WHITESPACE)
    add_link_options($<$<LINK_LANGUAGE:C,CXX>:-shared-libsan> "LINKER:-rpath,${_pccl_san_dir}")
    set(PCCL_SANITIZE_LINK_EXTRA "-shared-libsan -Wl,-rpath,${_pccl_san_dir}")
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
