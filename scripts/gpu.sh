#!/usr/bin/env bash
# Compiles the GPU backend modules and runs pccl-gpu-test against them (docs/gpu.md). Called by
# scripts/test.sh before the main suite; PCCL_GPU_BUILDS=0 skips it.
#   build-hip/   -DPCCL_ENABLE_HIP=ON with Debian's ROCm 5.2 (hipcc, libamdhip64-dev, rocm-device-libs,
#                clang-15; installed here when missing)
# Both with warnings as errors (PCCL_WERROR=ON).
#   build-cuda/  -DPCCL_ENABLE_CUDA=ON, only where /usr/local/cuda/bin/nvcc exists
# Only the module is built, and where a GPU of its kind is present (/dev/kfd, /dev/nvidiactl) also the
# test binary, which is then run. Without a GPU the kernels still run on the CPU in the main suite
# (emu backend).
set -euo pipefail
usage() {
  cat <<'EOF'
usage: scripts/gpu.sh
  Compiles the GPU backend modules (build-hip/ with Debian's ROCm, installed when missing; build-cuda/
  where /usr/local/cuda/bin/nvcc exists) and, where a GPU of that kind is present, runs pccl-gpu-test.
  Environment: PCCL_GPU_BUILDS=0 skips; PCCL_BUILD_TYPE (default RelWithDebInfo); PCCL_JOBS (default 2).
EOF
}
case "${1:-}" in
  "") ;;
  -h | --help) usage; exit 0 ;;
  *) echo "gpu.sh: unknown argument $1" >&2; usage >&2; exit 2 ;;
esac
cd "$(dirname "$0")/.."
if [ "${PCCL_GPU_BUILDS:-1}" = "0" ]; then
  echo "pccl: GPU module builds skipped (PCCL_GPU_BUILDS=0)"
  exit 0
fi
JOBS=${PCCL_JOBS:-2}
BUILD_TYPE=${PCCL_BUILD_TYPE:-RelWithDebInfo}

# gpu_build DIR BACKEND CMAKE_OPTION DEVICE_PRESENT: configure and build the module; where a GPU of that
# kind is present, also build pccl-gpu-test (it needs the whole core library) and run it.
gpu_build() {
  local dir=$1 backend=$2 option=$3 present=$4 start targets
  start=$(date +%s)
  targets=("pccl-gpu-$backend")
  [ "$present" = 1 ] && targets+=(pccl-gpu-test)
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE="$BUILD_TYPE" -DPCCL_WERROR=ON "$option" >/dev/null
  cmake --build "$dir" -j "$JOBS" --target "${targets[@]}"
  echo "pccl: $backend build ($dir) took $(($(date +%s) - start)) s"
  if [ "$present" = 1 ]; then
    ctest --test-dir "$dir" --output-on-failure --timeout 300 -R "gpu kernels: $backend backend"
  else
    echo "pccl: no $backend GPU here: module compiled, its kernel test not run (they run on the CPU in the suite)"
  fi
}

bash scripts/deps.sh hipcc libamdhip64-dev rocm-device-libs clang-15
amd=0; [ -e /dev/kfd ] && amd=1
gpu_build build-hip hip -DPCCL_ENABLE_HIP=ON "$amd"

if [ -x /usr/local/cuda/bin/nvcc ]; then
  nvidia=0; [ -e /dev/nvidiactl ] && nvidia=1
  gpu_build build-cuda cuda -DPCCL_ENABLE_CUDA=ON "$nvidia"
else
  echo "pccl: CUDA build skipped: /usr/local/cuda/bin/nvcc not found"
fi
