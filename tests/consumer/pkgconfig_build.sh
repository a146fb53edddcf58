#!/usr/bin/env bash
# Builds consumer.c against an installed pccl with nothing but the C compiler and `pkg-config pccl`
# (no CMake), then runs it. The program finds libpccl through an rpath taken from pccl.pc's libdir.
#   tests/consumer/pkgconfig_build.sh PREFIX OUTDIR
# Environment: CC (default cc); PCCL_CONSUMER_FLAGS: extra compile and link flags (tests/packaging.sh
# passes the sanitizer of the tree that built libpccl). Exit 0: built, ran, printed "consumer ok".
set -euo pipefail
usage() { echo "usage: $0 PREFIX OUTDIR   (builds and runs consumer.c against the pccl installed in PREFIX)"; }
case "${1:-}" in
  -h | --help) usage; exit 0 ;;
  -*) echo "pkgconfig_build: unknown option $1" >&2; usage >&2; exit 2 ;;
esac
if [ $# -ne 2 ]; then
  usage >&2
  exit 2
fi
prefix=$(cd "$1" && pwd -P)
out=$2
here=$(cd "$(dirname "$0")" && pwd)
cc=${CC:-cc}
read -r -a extra <<< "${PCCL_CONSUMER_FLAGS:-}"

pcdirs=()
for d in "$prefix"/lib*/pkgconfig "$prefix"/lib/*/pkgconfig; do
  [ -f "$d/pccl.pc" ] && pcdirs+=("$d")
done
if [ ${#pcdirs[@]} -ne 1 ]; then
  echo "pkgconfig_build: expected one pccl.pc under $prefix, found ${#pcdirs[@]}" >&2
  exit 1
fi
export PKG_CONFIG_PATH="${pcdirs[0]}${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"

pkg-config --exists --print-errors 'pccl >= 0.1'
cflags=$(pkg-config --cflags pccl)
libs=$(pkg-config --libs pccl)
libdir=$(pkg-config --variable=libdir pccl)
includedir=$(pkg-config --variable=includedir pccl)
echo "pkg-config pccl $(pkg-config --modversion pccl): cflags '$cflags', libs '$libs'"
# pccl.pc must point into this prefix wherever it was installed (it is relocatable: ${pcfiledir}).
for dir in "$libdir" "$includedir"; do
  real=$(cd "$dir" 2>/dev/null && pwd -P) || { echo "pkgconfig_build: $dir does not exist" >&2; exit 1; }
  case "$real" in
    "$prefix"/*) ;;
    *) echo "pkgconfig_build: pccl.pc points at $real, outside $prefix" >&2; exit 1 ;;
  esac
done
[ -f "$includedir/pccl/pccl.h" ] || { echo "pkgconfig_build: no pccl/pccl.h in $includedir" >&2; exit 1; }

mkdir -p "$out"
# Word splitting of the pkg-config output is intended (it is a list of flags).
# shellcheck disable=SC2086
"$cc" -std=c99 -Wall -Wextra -Wpedantic -Werror "${extra[@]}" $cflags "$here/consumer.c" -o "$out/consumer_pkgconfig" \
  $libs -lpthread -Wl,-rpath,"$libdir"
# No LD_LIBRARY_PATH: the rpath from pccl.pc's libdir must be enough.
if ! output=$(env -u LD_LIBRARY_PATH "$out/consumer_pkgconfig"); then
  echo "$output"
  echo "pkgconfig_build: consumer_pkgconfig failed" >&2
  exit 1
fi
echo "$output"
case "$output" in
  *"consumer ok"*) ;;
  *) echo "pkgconfig_build: consumer did not print 'consumer ok'" >&2; exit 1 ;;
esac
