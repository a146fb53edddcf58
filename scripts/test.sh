#!/usr/bin/env bash
# The README's test command (CI runs it: .ci/run). Installs dependencies and then:
#  1. builds in build/ (scripts/build.sh: gcc, Release (-O3), warnings as errors, with the DiLoCo
#     example) what the release-only tests run: the library, pccl-master, pccl-bench, the emulator,
#     the examples, the GPU modules (target pccl-release-suite; not the unit and cluster test programs,
#     which run in the sanitizer trees);
#  2. compiles the GPU backend modules and runs their kernel test where a GPU is present (scripts/gpu.sh);
#  3. runs every fuzz harness for a bounded time (scripts/fuzz.sh: clang + libFuzzer, warnings as errors);
#  4. runs the tests labelled release:* and sweep:* in build/ (the all-reduce sweeps whole; pccl-bench,
#     the WAN emulator, the GPU emulation, DiLoCo, the Python package, whose ctypes cannot load a
#     sanitizer build into python3, packaging, docs, the scripts' --help), and the whole suite under
#     ASan+UBSan (gcc -O1) and under TSan (gcc at RelWithDebInfo's -O2) (scripts/sanitize.sh).
# Every tree with warnings as errors: gcc compiles each change at -O3 and at -O2, clang compiles the
# library (build-fuzz/). PCCL_SANITIZE=0 runs the whole suite in build/ instead (no sanitizers, no -O2
# build). Each ctest phase ends with its slowest tests and the tightest share of a timeout
# (scripts/test_times.py). docs/testing.md has the phases, their times and the labels.
#   scripts/test.sh --quick [LABEL]: the contributors' inner loop: builds build/ (everything) and runs the
#   tests labelled LABEL (a ctest -L regex, default ^unit:) there, nothing else.
set -euo pipefail

usage() {
  cat <<'USAGE'
usage: scripts/test.sh [-DVAR=VALUE | -UVAR]...
       scripts/test.sh --quick [LABEL] [-DVAR=VALUE | -UVAR]...
  The test command: build (Release, warnings as errors), GPU modules, fuzzing, then the release-only
  tests in the release build and the whole suite under ASan+UBSan and TSan. Arguments go to the
  configure step of build/ (scripts/build.sh). --quick: build build/ and run only the tests whose label
  matches LABEL (default ^unit:; labels: docs/testing.md), e.g. --quick collective or --quick cluster:master.
  Environment: PCCL_DILOCO=0 (no DiLoCo example, no libtorch), PCCL_SANITIZE=0 (the whole suite once
  in build/ instead of the sanitizer builds), PCCL_FUZZ=0, PCCL_FUZZ_SECONDS (default 10),
  PCCL_GPU_BUILDS=0, PCCL_JOBS (parallel compiles, default 2), PCCL_TEST_JOBS (parallel tests, default
  2), PCCL_BUILD_DIR (default build), PCCL_TEST_HOGS=N (N busy loops beside it all: the load check).
USAGE
}
quick=0
label='^unit:'
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    -h | --help) usage; exit 0 ;;
    --quick)
      quick=1
      if [ $# -gt 1 ] && [[ "$2" != -* ]]; then label=$2; shift; fi ;;
    -D?* | -U?*) args+=("$1") ;;
    *) echo "test.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
  shift
done
set -- "${args[@]+"${args[@]}"}"
cd "$(dirname "$0")/.."
# The DiLoCo example's smoke test (examples/diloco, libtorch) is part of the suite; PCCL_DILOCO=0 leaves
# it out (and libtorch uninstalled). The Python package's ctests (python/, docs/python.md) run with
# /usr/bin/python3 and need numpy; torch for its tensor tests and the torch example (without them,
# configure skips those ctests). --quick installs neither.
extra=()
if [ "$quick" = 0 ]; then
  if [ "${PCCL_DILOCO:-1}" != "0" ]; then
    bash scripts/deps.sh libtorch-dev libopenblas0-pthread
    extra=(-DPCCL_BUILD_DILOCO=ON)
  fi
  bash scripts/deps.sh python3-numpy python3-torch
fi
phase() {  # phase NAME COMMAND...: runs COMMAND, reports its wall time, returns its status
  local name=$1 start rc=0
  shift
  start=$(date +%s)
  "$@" || rc=$?
  echo "pccl: test.sh phase '$name' took $(($(date +%s) - start)) s"
  return "$rc"
}
# PCCL_TEST_HOGS=N: N busy loops run beside the whole command (how docs/testing.md checks that every
# test stays within half its timeout on a busy machine); ended with the script.
hogs=()
stop_hogs() { [ ${#hogs[@]} -eq 0 ] || kill "${hogs[@]}" 2> /dev/null || true; }
trap stop_hogs EXIT
for ((i = 0; i < ${PCCL_TEST_HOGS:-0}; ++i)); do
  sh -c 'while :; do :; done' &
  hogs+=($!)
done
# A compiler cache for every tree this command configures (build/, the GPU, fuzz and sanitizer trees,
# the pip test's build): a second run, from this clone or a fresh one, compiles only what changed.
# Paths under the checkout are hashed relative to it (CCACHE_BASEDIR) and the build directory is not
# hashed (CCACHE_NOHASHDIR: debug info of a cached object may name another clone's build tree).
# PCCL_CCACHE=0 compiles without it; a tree configured before keeps its setting.
bash scripts/deps.sh  # the build dependencies, ccache among them, before it is looked for
if [ "${PCCL_CCACHE:-1}" != 0 ] && command -v ccache > /dev/null; then
  export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache
  export CMAKE_CUDA_COMPILER_LAUNCHER=ccache CMAKE_HIP_COMPILER_LAUNCHER=ccache
  export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true
  ccache --zero-stats > /dev/null 2>&1 || true
fi
BUILD_DIR=${PCCL_BUILD_DIR:-build}
# Two tests at a time on two cores: the suites are CPU-bound (four at a time measured slower, and
# stretched CPU-heavy tests to 71 % of their timeouts; docs/testing.md).
TEST_JOBS=${PCCL_TEST_JOBS:-2}
suite() {  # suite LABEL_REGEX|all: the ctest run in build/, then where its time went
  local select=() rc=0
  [ "$1" = all ] || select=(-L "$1")
  ctest --test-dir "$BUILD_DIR" --output-on-failure --test-output-truncation middle -j "$TEST_JOBS" --timeout 300 "${select[@]}" \
    --output-junit ctest-junit.xml || rc=$?
  /usr/bin/python3 scripts/test_times.py "$BUILD_DIR" --timeout 300 || true
  return "$rc"
}
if [ "$quick" = 1 ]; then
  phase build env PCCL_WERROR=ON bash scripts/build.sh "$@"
  phase "quick suite ($label)" suite "$label"
  exit 0
fi
if [ "${PCCL_SANITIZE:-1}" = "0" ]; then
  phase build env PCCL_WERROR=ON bash scripts/build.sh "${extra[@]}" "$@"
else
  phase build env PCCL_WERROR=ON PCCL_BUILD_TARGET=pccl-release-suite bash scripts/build.sh "${extra[@]}" "$@"
fi
phase gpu bash scripts/gpu.sh
phase fuzz bash scripts/fuzz.sh "${PCCL_FUZZ_SECONDS:-10}"
if [ "${PCCL_SANITIZE:-1}" = "0" ]; then
  phase suite suite all
else
  # The ASan tree compiles at the lowest priority beside the release-only tests (on the cores they leave
  # idle); sanitize.sh then finds it built.
  setsid -w bash scripts/sanitize.sh --low-priority --build-only address &
  asan_build=$!
  if ! phase "release-only suite" suite '^(release|sweep):'; then
    kill -- -"$asan_build" 2> /dev/null || true
    exit 1
  fi
  # Only the build is left: back to normal priority (at nice 19 any other work would starve it).
  { echo 0 > "/proc/$asan_build/autogroup"; } 2> /dev/null || true
  renice -n 0 -g "$asan_build" > /dev/null 2>&1 || true
  phase "ASan tree build (rest)" wait "$asan_build"
  phase sanitizers bash scripts/sanitize.sh all
fi
if [ -n "${CMAKE_CXX_COMPILER_LAUNCHER:-}" ]; then
  ccache --show-stats 2> /dev/null | sed -n '1,8s/^/pccl: ccache: /p' || true
fi
