#!/usr/bin/env bash
# Compiles the GPU backend modules and runs pccl-gpu-test against them (docs/gpu.md). Called by
# scripts/test.sh before the main suite; PCCL_GPU_BUILDS=0 skips it.
#   build-hip/   -DPCCL_ENABLE_HIP=ON with Debian's ROCm 5.2 (hipcc, libamdhip64-dev, rocm-device-libs,
#                clang-15; installed here when missing)
#   build-cuda/  -DPCCL_ENABLE_CUDA=ON, only where /usr/local/cuda/bin/nvcc exists
# Only the module and the test binary are built. On a machine without a GPU the test exits 77, which
# ctest reports as skipped; the kernels themselves still run on the CPU in the main suite (emu backend).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${PCCL_GPU_BUILDS:-1}" = "0" ]; then
  echo "pccl: GPU module builds skipped (PCCL_GPU_BUILDS=0)"
  exit 0
fi
JOBS=${PCCL_JOBS:-2}
BUILD_TYPE=${PCCL_BUILD_TYPE:-RelWithDebInfo}

# gpu_build DIR BACKEND CMAKE_OPTION: configure, build the module and the test, run the test.
gpu_build() {
  local dir=$1 backend=$2 option=$3 start
  start=$(date +%s)
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE="$BUILD_TYPE" "$option" >/dev/null
  cmake --build "$dir" -j "$JOBS" --target "pccl-gpu-$backend" pccl-gpu-test
  echo "pccl: $backend build ($dir) took $(($(date +%s) - start)) s"
  ctest --test-dir "$dir" --output-on-failure --timeout 300 -R "gpu kernels: $backend backend"
}

bash scripts/deps.sh hipcc libamdhip64-dev rocm-device-libs clang-15
gpu_build build-hip hip -DPCCL_ENABLE_HIP=ON

if [ -x /usr/local/cuda/bin/nvcc ]; then
  gpu_build build-cuda cuda -DPCCL_ENABLE_CUDA=ON
else
  echo "pccl: CUDA build skipped: /usr/local/cuda/bin/nvcc not found"
fi
