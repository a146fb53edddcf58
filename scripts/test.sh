#!/usr/bin/env bash
# The README's test command: installs dependencies, builds, compiles the GPU backend modules and runs
# their kernel test (scripts/gpu.sh; skipped without a GPU), then runs the whole suite with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh "$@"
bash scripts/gpu.sh
ctest --test-dir "${PCCL_BUILD_DIR:-build}" --output-on-failure -j "${PCCL_JOBS:-2}" --timeout 300
