# pccl_apply_warnings(target): strict warnings (errors with PCCL_WERROR) and sanitizers on our own targets.
function(pccl_apply_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
    -Wcast-align -Wunused -Wformat=2 -Wimplicit-fallthrough)
  if(PCCL_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
  if(PCCL_SANITIZE)
    target_compile_options(${target} PRIVATE -fsanitize=${PCCL_SANITIZE} -fno-omit-frame-pointer)
    target_link_options(${target} PRIVATE -fsanitize=${PCCL_SANITIZE})
  endif()
endfunction()
