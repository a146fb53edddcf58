#!/usr/bin/env bash
# Builds the libFuzzer harnesses with clang (ASan + UBSan, warnings as errors) into build-fuzz/ and runs each one for a
# bounded time from the seed corpora (tests/fuzz/make_seeds.cpp) plus the regression inputs kept in
# tests/fuzz/regressions/<harness>/. A crash fails the script and leaves the input in
# build-fuzz/artifacts/ (turn it into a regression: copy it to tests/fuzz/regressions/<harness>/).
#   scripts/fuzz.sh [SECONDS_PER_HARNESS]     (default 20; PCCL_FUZZ=0 skips)
set -euo pipefail
usage() {
  cat <<'EOF'
usage: scripts/fuzz.sh [SECONDS_PER_HARNESS]
  Builds the libFuzzer harnesses with clang (ASan + UBSan) into build-fuzz/ and runs each for
  SECONDS_PER_HARNESS (default 20) from the seed corpora and tests/fuzz/regressions/.
  Environment: PCCL_FUZZ=0 skips; PCCL_JOBS (default 2).
EOF
}
case "${1:-}" in
  -h | --help) usage; exit 0 ;;
  -*) echo "fuzz.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
esac
if [ $# -gt 1 ] || ! [[ "${1:-20}" =~ ^[0-9]+$ ]]; then
  echo "fuzz.sh: expected one number of seconds, got: $*" >&2
  usage >&2
  exit 2
fi
cd "$(dirname "$0")/.."
if [ "${PCCL_FUZZ:-1}" = "0" ]; then
  echo "pccl: fuzzing skipped (PCCL_FUZZ=0)"
  exit 0
fi
SECONDS_EACH=${1:-20}
BUILD=build-fuzz
bash scripts/deps.sh clang libclang-rt-dev
# -O1 -g1: what libFuzzer's documentation suggests, and about half the compile time of -O2 -g.
CC=clang CXX=clang++ cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPCCL_FUZZ=ON \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
  -DPCCL_SANITIZE=address,undefined -DPCCL_WERROR=ON >/dev/null
cmake --build "$BUILD" -j "${PCCL_JOBS:-2}" --target fuzz_frames fuzz_codec fuzz_handshake pccl-fuzz-seeds pccl_clang_check
rm -rf "$BUILD/seeds" "$BUILD/corpus"
"$BUILD/tests/fuzz/pccl-fuzz-seeds" "$BUILD/seeds"
mkdir -p "$BUILD/artifacts"
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export ASAN_OPTIONS=detect_leaks=1
for h in frames codec handshake; do
  mkdir -p "$BUILD/corpus/$h"
  dirs=("$BUILD/corpus/$h" "$BUILD/seeds/$h")
  [ -d "tests/fuzz/regressions/$h" ] && dirs+=("tests/fuzz/regressions/$h")
  echo "pccl: fuzz_$h for ${SECONDS_EACH} s"
  "$BUILD/tests/fuzz/fuzz_$h" -max_total_time="$SECONDS_EACH" -max_len=8192 -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$BUILD/artifacts/${h}-" "${dirs[@]}" 2>&1 | grep -E "^(#[0-9]+ +DONE|stat::number_of_executed_units|stat::peak_rss_mb|==[0-9]+==|SUMMARY|.*ERROR)" || true
  test "${PIPESTATUS[0]}" -eq 0 || { echo "pccl: fuzz_$h found a failure (input in $BUILD/artifacts/)" >&2; exit 1; }
done
echo "pccl: fuzzing passed"
