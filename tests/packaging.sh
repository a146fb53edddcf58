#!/usr/bin/env bash
# The installed tree as a user gets it: `cmake --install` of a finished build into a fresh prefix, which
# is then moved elsewhere (the tree must be relocatable), checked file by file, and used by programs
# outside the pccl tree: tests/consumer built with find_package(pccl) and with pkg-config pccl, run
# against it; the installed pccl-master (and pccl-bench) run too. The temporary prefix is removed at
# the end, whatever happens. Registered with ctest (tests/CMakeLists.txt).
#   tests/packaging.sh --build DIR --source DIR [--bench] [--sanitize LIST] [--cc CC] [--cxx CXX]
#                      [--cmake CMAKE]
#   --bench       pccl-bench was built: it must be installed, and run from the installed tree
#   --sanitize    the sanitizers libpccl was built with (PCCL_SANITIZE): the consumers need them too
#   --sanitize-link  further link flags for the consumers (clang's shared sanitizer runtime and its rpath)
set -euo pipefail
usage() {
  echo "usage: $0 --build DIR --source DIR [--bench] [--sanitize LIST [--sanitize-link FLAGS]] [--cc CC] [--cxx CXX]" \
    "[--cmake CMAKE]"
}

build= source= bench=0 sanitize= sanitize_link= cc=${CC:-cc} cxx=${CXX:-c++} cmake=cmake
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --source) source=$2; shift 2 ;;
    --bench) bench=1; shift ;;
    --sanitize) sanitize=$2; shift 2 ;;
    --sanitize-link) sanitize_link=$2; shift 2 ;;
    --cc) cc=$2; shift 2 ;;
    --cxx) cxx=$2; shift 2 ;;
    --cmake) cmake=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "packaging: unknown argument $1" >&2; usage >&2; exit 2 ;;
  esac
done
if [ -z "$build" ] || [ -z "$source" ]; then
  usage >&2
  exit 2
fi
build=$(cd "$build" && pwd -P)
source=$(cd "$source" && pwd -P)
flags=
if [ -n "$sanitize" ]; then
  flags="-fsanitize=$sanitize -fno-omit-frame-pointer"
fi
link_flags="$flags${sanitize_link:+ $sanitize_link}"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/pccl-packaging.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
errors=0
fail() {
  echo "packaging: FAIL: $*" >&2
  errors=$((errors + 1))
}
step() { echo "== $*"; }

# ---- install, then move the tree: nothing may remember where it was installed ------------------
step "cmake --install $build --prefix <tmp>/stage"
if ! env -u DESTDIR "$cmake" --install "$build" --prefix "$tmp/stage" > "$tmp/install.log" 2>&1; then
  cat "$tmp/install.log" >&2
  echo "packaging: FAIL: cmake --install failed" >&2
  exit 1
fi
mv "$tmp/stage" "$tmp/prefix"
prefix="$tmp/prefix"

# ---- the tree ---------------------------------------------------------------------------------
step "installed tree"
for h in pccl.h version.h export.h communicator.hpp master.hpp status.hpp types.hpp; do
  [ -f "$prefix/include/pccl/$h" ] || fail "include/pccl/$h is not installed"
done
[ -e "$prefix/include/pccl/version.h.in" ] && fail "include/pccl/version.h.in is installed (a template)"

# The version from the installed version.h names the library files.
ver() { sed -n "s/^#define PCCL_VERSION_$1 \([0-9][0-9]*\)$/\1/p" "$prefix/include/pccl/version.h"; }
major=$(ver MAJOR) minor=$(ver MINOR) patch=$(ver PATCH)
if [ -z "$major" ] || [ -z "$minor" ] || [ -z "$patch" ]; then
  echo "packaging: FAIL: cannot read PCCL_VERSION_MAJOR/MINOR/PATCH from the installed version.h" >&2
  exit 1
fi
soname="libpccl.so.$major.$minor"
real="libpccl.so.$major.$minor.$patch"

libs=("$prefix"/lib*/libpccl.so "$prefix"/lib/*/libpccl.so)
libdir=
for l in "${libs[@]}"; do
  if [ -e "$l" ] || [ -L "$l" ]; then
    [ -n "$libdir" ] && fail "libpccl.so installed twice ($libdir, $(dirname "$l"))"
    libdir=$(dirname "$l")
  fi
done
if [ -z "$libdir" ]; then
  echo "packaging: FAIL: no lib*/libpccl.so under the prefix" >&2
  find "$prefix" >&2
  exit 1
fi
echo "library directory: ${libdir#"$prefix"/}"
[ "$(readlink "$libdir/libpccl.so")" = "$soname" ] || fail "libpccl.so -> $(readlink "$libdir/libpccl.so"), expected $soname"
[ "$(readlink "$libdir/$soname")" = "$real" ] || fail "$soname -> $(readlink "$libdir/$soname"), expected $real"
if [ -f "$libdir/$real" ] && [ ! -L "$libdir/$real" ]; then
  dyn=$(readelf -d "$libdir/$real")
  grep -q "Library soname: \[$soname\]" <<< "$dyn" || fail "SONAME of $real is not $soname: $(grep SONAME <<< "$dyn")"
  if grep -E "R(UN)?PATH" <<< "$dyn" | grep -qF "$build"; then
    fail "the installed libpccl keeps an RPATH into the build tree: $(grep -E 'R(UN)?PATH' <<< "$dyn")"
  fi
else
  fail "$real is not a regular file"
fi
# The GPU host backend module is for the tests only.
if find "$prefix" -name 'libpccl-gpu-*' | grep -q .; then
  fail "a GPU backend module is installed: $(find "$prefix" -name 'libpccl-gpu-*')"
fi

[ -x "$prefix/bin/pccl-master" ] || fail "bin/pccl-master is not installed"
if [ "$bench" = 1 ]; then
  [ -x "$prefix/bin/pccl-bench" ] || fail "bin/pccl-bench is not installed"
fi
cmakedir="$libdir/cmake/pccl"
for f in pcclConfig.cmake pcclConfigVersion.cmake pcclTargets.cmake; do
  [ -f "$cmakedir/$f" ] || fail "${cmakedir#"$prefix"/}/$f is not installed"
done
if [ -f "$cmakedir/pcclTargets.cmake" ]; then
  grep -q "cxx_std_17" "$cmakedir/pcclTargets.cmake" || fail "pccl::pccl does not carry cxx_std_17"
fi
[ -f "$libdir/pkgconfig/pccl.pc" ] || fail "${libdir#"$prefix"/}/pkgconfig/pccl.pc is not installed"
# Relocatable: no installed text file names the staging prefix or the build tree.
# (Binaries may name the build tree in their debug info; they must not name the staging prefix.)
leaks=$({ grep -rlF -e "$tmp/stage" -e "$build" "$cmakedir" "$libdir/pkgconfig" "$prefix/include"
          grep -rlF -e "$tmp/stage" "$prefix/bin" "$libdir"; } 2>/dev/null | sort -u || true)
[ -z "$leaks" ] || fail "installed files remember the install or build location: $leaks"
if [ "$errors" -gt 0 ]; then
  echo "packaging: $errors problem(s) in the installed tree" >&2
  exit 1
fi

# ---- the installed programs -------------------------------------------------------------------
step "installed programs"
if ! out=$(env -u LD_LIBRARY_PATH "$prefix/bin/pccl-master" --version 2>&1) ||
   ! grep -qF "$major.$minor.$patch" <<< "$out"; then
  fail "pccl-master --version: $out"
fi
env -u LD_LIBRARY_PATH "$prefix/bin/pccl-master" --help > /dev/null || fail "pccl-master --help exits non-zero"
if [ "$bench" = 1 ]; then
  # Finds the installed libpccl through its $ORIGIN rpath, without LD_LIBRARY_PATH.
  env -u LD_LIBRARY_PATH "$prefix/bin/pccl-bench" --help > "$tmp/bench-help.log" 2>&1 ||
    fail "the installed pccl-bench does not start: $(head -c 400 "$tmp/bench-help.log")"
fi

# ---- find_package(pccl) -----------------------------------------------------------------------
step "find_package(pccl) consumer (tests/consumer)"
generator=()
command -v ninja > /dev/null && generator=(-G Ninja)
if ! "$cmake" -S "$source/tests/consumer" -B "$tmp/consumer" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
    -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
    -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$link_flags" \
    > "$tmp/consumer-configure.log" 2>&1; then
  cat "$tmp/consumer-configure.log" >&2
  echo "packaging: FAIL: configuring tests/consumer against the installed tree" >&2
  exit 1
fi
found=$(sed -n 's/^pccl_DIR:PATH=//p' "$tmp/consumer/CMakeCache.txt")
[ "$(cd "$found" && pwd -P)" = "$(cd "$cmakedir" && pwd -P)" ] ||
  { echo "packaging: FAIL: find_package(pccl) found $found, not $cmakedir" >&2; exit 1; }
if ! "$cmake" --build "$tmp/consumer" > "$tmp/consumer-build.log" 2>&1; then
  cat "$tmp/consumer-build.log" >&2
  echo "packaging: FAIL: building tests/consumer against the installed tree" >&2
  exit 1
fi
for program in consumer_c consumer_cpp; do
  if out=$(env -u LD_LIBRARY_PATH "$tmp/consumer/$program" 2>"$tmp/$program.err") && grep -q "consumer ok" <<< "$out"; then
    echo "$program: $out"
  else
    cat "$tmp/$program.err" >&2
    fail "$program (find_package) did not print 'consumer ok': $out"
  fi
done
# The consumer must run against the installed library, not the build tree's.
if command -v ldd > /dev/null; then
  resolved=$(env -u LD_LIBRARY_PATH ldd "$tmp/consumer/consumer_c" | sed -n 's/.*libpccl\.so[^ ]* => \([^ ]*\).*/\1/p')
  case "$(cd "$(dirname "$resolved")" 2>/dev/null && pwd -P)" in
    "$(cd "$prefix" && pwd -P)"/*) ;;
    *) fail "consumer_c loads libpccl from '$resolved', not from the installed tree" ;;
  esac
fi

# ---- pkg-config pccl --------------------------------------------------------------------------
step "pkg-config consumer (tests/consumer/pkgconfig_build.sh)"
CC="$cc" PCCL_CONSUMER_FLAGS="$link_flags" bash "$source/tests/consumer/pkgconfig_build.sh" "$prefix" "$tmp/pkgconfig" ||
  fail "the pkg-config build of consumer.c"

if [ "$errors" -gt 0 ]; then
  echo "packaging: $errors failure(s)" >&2
  exit 1
fi
echo "packaging: installed tree, find_package(pccl) and pkg-config consumers all pass"
