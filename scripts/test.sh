#!/usr/bin/env bash
# The README's test command: installs dependencies, builds, runs the whole suite with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh "$@"
ctest --test-dir "${PCCL_BUILD_DIR:-build}" --output-on-failure -j "${PCCL_JOBS:-2}" --timeout 300
