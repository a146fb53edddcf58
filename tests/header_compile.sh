#!/usr/bin/env bash
# The public headers compile on their own, warning-free: pccl.h as C99 and as C++17 (a file that
# includes nothing else), its initializer macros in both languages (one variable of each), and each
# C++ API header alone as C++17. Syntax only; nothing is linked.
#   tests/header_compile.sh CC CXX INCLUDE_DIR GENERATED_INCLUDE_DIR
# (GENERATED_INCLUDE_DIR holds the build's pccl/version.h.)
set -euo pipefail
usage() { echo "usage: $0 CC CXX INCLUDE_DIR GENERATED_INCLUDE_DIR   (the public headers compile alone, warning-free)"; }
case "${1:-}" in
  -h | --help) usage; exit 0 ;;
  -*) echo "header_compile: unknown option $1" >&2; usage >&2; exit 2 ;;
esac
if [ $# -ne 4 ]; then
  usage >&2
  exit 2
fi
cc=$1 cxx=$2
includes=(-I "$3" -I "$4")
warn=(-Wall -Wextra -Wpedantic -Werror)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pccl-headers.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
status=0

check() {  # check WHAT COMPILER ARGS... : runs the compiler, reports the outcome
  local what=$1
  shift
  if "$@" -fsyntax-only > "$tmp/out.log" 2>&1; then
    echo "ok: $what"
  else
    echo "FAIL: $what" >&2
    echo "  $*" >&2
    sed 's/^/  /' "$tmp/out.log" >&2
    status=1
  fi
}

echo '#include <pccl/pccl.h>' > "$tmp/alone.c"
cp "$tmp/alone.c" "$tmp/alone.cpp"

cat > "$tmp/init.c" <<'EOF'
#include <pccl/pccl.h>
/* One of each initializer, as a program declares them; used so that no variable is unused. */
int pccl_header_check(void);
int pccl_header_check(void) {
  pcclCommConfig_t comm = PCCL_COMM_CONFIG_INIT;
  pcclMasterConfig_t master = PCCL_MASTER_CONFIG_INIT;
  pcclReduceOptions_t reduce = PCCL_REDUCE_OPTIONS_INIT;
  pcclSharedState_t state = PCCL_SHARED_STATE_INIT;
  pcclCommStats_t stats = PCCL_COMM_STATS_INIT;
  static const pcclCommConfig_t static_storage = PCCL_COMM_CONFIG_INIT; /* a constant initializer */
  return (int)(comm.struct_size + master.struct_size + reduce.struct_size + state.struct_size +
               stats.struct_size + static_storage.config_version) +
         PCCL_VERSION_CODE + PCCL_VERSION_MAJOR + PCCL_VERSION_MINOR + PCCL_VERSION_PATCH +
         (int)sizeof(PCCL_VERSION_STRING) + PCCL_ATTR_RANK;
}
EOF
cp "$tmp/init.c" "$tmp/init.cpp"

c99=("$cc" -std=c99 "${warn[@]}" -Wstrict-prototypes -Wmissing-prototypes "${includes[@]}")
cxx17=("$cxx" -std=c++17 "${warn[@]}" "${includes[@]}")
check "pccl.h alone as C99" "${c99[@]}" "$tmp/alone.c"
check "pccl.h alone as C++17" "${cxx17[@]}" "$tmp/alone.cpp"
check "initializer macros as C99" "${c99[@]}" "$tmp/init.c"
check "initializer macros as C++17" "${cxx17[@]}" -Wmissing-field-initializers "$tmp/init.cpp"
for h in communicator.hpp master.hpp status.hpp types.hpp; do
  echo "#include <pccl/$h>" > "$tmp/$h.cpp"
  check "pccl/$h alone as C++17" "${cxx17[@]}" "$tmp/$h.cpp"
done
exit "$status"
