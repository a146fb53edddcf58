#!/usr/bin/env bash
# The README's test command (CI runs it: .ci/run). Installs dependencies and then:
#  1. builds build/ with scripts/build.sh: gcc, Release (-O3), warnings as errors, with the DiLoCo
#     example;
#  2. compiles the GPU backend modules and runs their kernel test where a GPU is present (scripts/gpu.sh);
#  3. runs every fuzz harness for a bounded time (scripts/fuzz.sh: clang + libFuzzer, warnings as errors);
#  4. runs the suite: the tests only the release build has (pccl-bench, the WAN emulator, the GPU
#     emulation, DiLoCo, the Python package, whose ctypes cannot load a sanitizer build into python3, the
#     install of pccl-bench, the scripts' --help) in build/, and the whole rest twice, under ASan+UBSan
#     (gcc -O1) and under TSan (gcc at RelWithDebInfo's -O2) (scripts/sanitize.sh).
# Every tree with warnings as errors: gcc compiles each change at -O3 and at -O2, clang compiles the
# library (build-fuzz/). PCCL_SANITIZE=0 runs the whole suite in build/ instead (faster, no sanitizers,
# no -O2 build).
set -euo pipefail

usage() {
  cat <<'EOF'
usage: scripts/test.sh [-DVAR=VALUE | -UVAR]...
  The test command: build (Release, warnings as errors), GPU modules, fuzzing, then the suite in the
  release build and under ASan+UBSan and TSan. Arguments go to the configure step of build/
  (scripts/build.sh). Environment: PCCL_DILOCO=0 (no DiLoCo example, no libtorch), PCCL_SANITIZE=0 (the
  whole suite once in build/ instead of the sanitizer builds), PCCL_FUZZ=0, PCCL_FUZZ_SECONDS (default
  10), PCCL_GPU_BUILDS=0, PCCL_JOBS (default 2), PCCL_BUILD_DIR (default build).
EOF
}
for arg in "$@"; do
  case "$arg" in
    -h | --help) usage; exit 0 ;;
    -D?* | -U?*) ;;
    *) echo "test.sh: unknown argument '$arg'" >&2; usage >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/.."
# The DiLoCo example's smoke test (examples/diloco, libtorch) is part of the suite; PCCL_DILOCO=0 leaves
# it out (and libtorch uninstalled).
extra=()
if [ "${PCCL_DILOCO:-1}" != "0" ]; then
  bash scripts/deps.sh libtorch-dev libopenblas0-pthread
  extra=(-DPCCL_BUILD_DILOCO=ON)
fi
# The Python package's ctests (python/, docs/python.md) run with /usr/bin/python3 and need numpy; torch
# for its tensor tests and the torch example (without them, configure skips those ctests).
bash scripts/deps.sh python3-numpy python3-torch
phase() {  # phase NAME COMMAND...: runs COMMAND and reports its wall time
  local name=$1 start
  shift
  start=$(date +%s)
  "$@"
  echo "pccl: test.sh phase '$name' took $(($(date +%s) - start)) s"
}
phase build env PCCL_WERROR=ON bash scripts/build.sh "${extra[@]}" "$@"
phase gpu bash scripts/gpu.sh
phase fuzz bash scripts/fuzz.sh "${PCCL_FUZZ_SECONDS:-10}"
BUILD_DIR=${PCCL_BUILD_DIR:-build}
if [ "${PCCL_SANITIZE:-1}" = "0" ]; then
  phase suite ctest --test-dir "$BUILD_DIR" --output-on-failure -j "${PCCL_JOBS:-2}" --timeout 300
else
  phase "release-only suite" ctest --test-dir "$BUILD_DIR" --output-on-failure -j "${PCCL_JOBS:-2}" --timeout 300 \
    -R "^(bench|wanem|diloco|gpu bench|gpu emu|gpu kernels: emu|python|packaging|docs|scripts)"
  phase sanitizers bash scripts/sanitize.sh all
fi
