#!/usr/bin/env bash
# Configures and builds pccl into ${PCCL_BUILD_DIR:-build}: the tree the main job and the test command
# use, a Release build (-O3). Warnings are errors only where asked (PCCL_WERROR=ON: the test command does;
# CMake's default is OFF, so that a user's newer compiler does not stop the build on a new warning); an
# existing tree keeps its setting.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: scripts/build.sh [-DVAR=VALUE | -UVAR]...
  Installs the build dependencies when missing (scripts/deps.sh), configures pccl with CMake and Ninja
  and builds it. Arguments are CMake cache settings for the configure step (e.g. -DPCCL_BUILD_DILOCO=ON).
  Environment: PCCL_BUILD_DIR (default build), PCCL_BUILD_TYPE (default Release), PCCL_WERROR=ON|OFF
  (warnings as errors; default: the tree's setting, OFF in a new one), PCCL_JOBS (default 2),
  PCCL_BUILD_TARGET (one target to build instead of all, e.g. pccl-release-suite).
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
werror=()
[ -z "${PCCL_WERROR:-}" ] || werror=(-DPCCL_WERROR="$PCCL_WERROR")
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE="${PCCL_BUILD_TYPE:-Release}" "${werror[@]}" "$@" > /dev/null
targets=()
[ -z "${PCCL_BUILD_TARGET:-}" ] || targets=(--target "$PCCL_BUILD_TARGET")
cmake --build "$BUILD_DIR" -j "${PCCL_JOBS:-2}" "${targets[@]}"
