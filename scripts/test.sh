#!/usr/bin/env bash
# The README's test command: installs dependencies, builds (with the DiLoCo example), compiles the GPU
# backend modules and runs their kernel test (scripts/gpu.sh; skipped without a GPU), runs every fuzz
# harness for a bounded time (scripts/fuzz.sh; clang + libFuzzer), then runs the suite: the tests only
# the release build has (pccl-bench, the WAN emulator, the GPU emulation, DiLoCo, the Python package,
# whose ctypes cannot load a sanitizer build into python3, and the install of pccl-bench) there, and the whole
# rest twice, under ASan+UBSan and under TSan (scripts/sanitize.sh). PCCL_SANITIZE=0 runs the whole
# suite in the release build instead (faster, no sanitizers).
set -euo pipefail

usage() {
  cat <<'EOF'
usage: scripts/test.sh [-DVAR=VALUE | -UVAR]...
  The test command: build, GPU modules, fuzzing, then the suite in the release build and under
  ASan+UBSan and TSan. Arguments go to the configure step of build/ (scripts/build.sh). Environment:
  PCCL_DILOCO=0 (no DiLoCo example, no libtorch), PCCL_SANITIZE=0 (the whole suite once in build/
  instead of the sanitizer builds), PCCL_FUZZ=0, PCCL_FUZZ_SECONDS (default 10), PCCL_GPU_BUILDS=0,
  PCCL_JOBS (default 2), PCCL_BUILD_DIR (default build).
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
bash scripts/build.sh "${extra[@]}" "$@"
bash scripts/gpu.sh
bash scripts/fuzz.sh "${PCCL_FUZZ_SECONDS:-10}"
if [ "${PCCL_SANITIZE:-1}" = "0" ]; then
  ctest --test-dir "${PCCL_BUILD_DIR:-build}" --output-on-failure -j "${PCCL_JOBS:-2}" --timeout 300
else
  ctest --test-dir "${PCCL_BUILD_DIR:-build}" --output-on-failure -j "${PCCL_JOBS:-2}" --timeout 300 \
    -R "^(bench|wanem|diloco|gpu bench|gpu emu|gpu kernels: emu|python|packaging|docs|scripts)"
  bash scripts/sanitize.sh all
fi
