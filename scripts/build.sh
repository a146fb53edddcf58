#!/usr/bin/env bash
# Configures and builds pccl into ${PCCL_BUILD_DIR:-build}. Extra arguments go to cmake's configure step.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: scripts/build.sh [-DVAR=VALUE | -UVAR]...
  Installs the build dependencies when missing (scripts/deps.sh), configures pccl with CMake and Ninja
  and builds it. Arguments are CMake cache settings for the configure step (e.g. -DPCCL_BUILD_DILOCO=ON).
  Environment: PCCL_BUILD_DIR (default build), PCCL_BUILD_TYPE (default RelWithDebInfo), PCCL_JOBS
  (default 2).
EOF
}
for arg in "$@"; do
  case "$arg" in
    -h | --help) usage; exit 0 ;;
    -D?* | -U?*) ;;
    *) echo "build.sh: unknown argument '$arg' (only -DVAR=VALUE and -UVAR are passed to cmake)" >&2; usage >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/.."
bash scripts/deps.sh
BUILD_DIR=${PCCL_BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=${PCCL_BUILD_TYPE:-RelWithDebInfo} "$@" >/dev/null
cmake --build "$BUILD_DIR" -j "${PCCL_JOBS:-2}"
