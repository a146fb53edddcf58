#!/usr/bin/env bash
# Regenerates the files docs/benchmarks.md and docs/benchmarks-history.md cite for their loopback tables
# and emulated-WAN scenarios, under the names they cite them by, into OUT_DIR (default
# docs/benchmarks/v2); every WAN row is one warm-up and 3 timed operations, pccl at K = 1, 4, 16 and 64.
# Then the tables (bench/tables.py) and the plots (bench/plot.sh). The WAN part needs root.
set -euo pipefail
usage() {
  cat <<'EOF'
usage: bench/run_all.sh [--part all|loopback|validation|wan] [OUT_DIR]
  Regenerates the files docs/benchmarks.md and docs/benchmarks-history.md cite, by the names they cite,
  into OUT_DIR (default docs/benchmarks/v2; the series before it stays in docs/benchmarks/):
  loopback (pccl-bench --ranks N, as the doc's commands):
    loopback-4ranks-sizes.json, loopback-4ranks-256M-K{1,4,16,64}.json, loopback-4ranks-256M-inplace.json,
    loopback-{2,4}ranks-4K.json, loopback-{2,4,8}ranks.json (bench/loopback.sh), loopback-{2,4}ranks-both.json,
    loopback-4ranks-repeated.json (8 runs, field "repetition"), loopback-4ranks-sync.json,
    encrypt-loopback-2ranks-{plain,aes,chacha}.json, observability-loopback-2ranks.json,
    loopback-4ranks-{broadcast,allgather,reducescatter}.json (--collective, with Gloo's)
  wan (root: pccl-wanem; every row -n 3 -w 1):
    wanem-validation.md (bench/wanem_validate.sh),
    {europe,transatlantic,mixed}-K{1,4,16,64}.json: pccl alone with K connections,
    europe-K4-and-gloo.json, transatlantic-K16-and-gloo.json, mixed-K64-and-gloo.json: pccl at the
      scenario's default K, then Gloo's ring and ring_chunked, in the same run,
    {europe,transatlantic}-quant-{none,fp16,bf16,int8}-zstd{0,1}.json (bench/quant_wan.sh),
    transatlantic-sync.json (--sync), encrypt-europe-{plain,aes,chacha}.json,
    transatlantic-{broadcast,allgather,reducescatter}-and-gloo.json (--collective, 64 MiB, with Gloo's)
  then tables.md (bench/tables.py OUT_DIR) and the plots (bench/plot.sh OUT_DIR). Not here: the CPU and
  GPU kernel files (codec-cpu.json, gpu-h100.json, device-*.json, host-h100-*.json; docs/benchmarks.md).
  --part loopback|validation|wan: that part only (wan: the scenarios, without the validation), then
  the tables and plots of all OUT_DIR holds.

  Time on the 2-core build machine, measured 2026-11-26 (each WAN row is 4 operations):
    loopback                     ~10 min
    wanem-validation.md          ~13 min
    europe (5 runs)               ~3 min
    transatlantic (5 runs)       ~35 min   Gloo at 80 ms RTT and 0.01 % loss takes 130-190 s per 256 MiB
                                           operation (the run with Gloo ~22 min); pccl K = 1 ~9 min
    mixed (5 runs)               ~11 min   Gloo 30-57 s per operation, pccl K = 1 ~40 s
    quant_wan (16 runs)           ~8 min
    sync, encryption (4 runs)     ~2 min
    wan                          ~59 min;  all: about 1 h 25 min
  A step that fails is reported and the others still run (exit 1 at the end). WAN rows the emulator did
  not carry faithfully are kept, marked "emulator_faithful": false (listed at the end; exit 0).
  Needs gnuplot-nox, and iperf3 for the WAN part: installed when missing (scripts/deps.sh, as root).
  Environment: PCCL_BUILD_DIR (default build/).
EOF
}
PART=all
OUT=""
while [ $# -gt 0 ]; do
  case "$1" in
    -h | --help) usage; exit 0 ;;
    --part)
      [ $# -ge 2 ] || { echo "run_all.sh: --part needs all, loopback or wan" >&2; usage >&2; exit 2; }
      PART=$2; shift 2 ;;
    -*) echo "run_all.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) [ -z "$OUT" ] || { echo "run_all.sh: one OUT_DIR at most" >&2; usage >&2; exit 2; }; OUT=$1; shift ;;
  esac
done
case "$PART" in
  all | loopback | validation | wan) ;;
  *) echo "run_all.sh: --part is all, loopback, validation or wan, not $PART" >&2; usage >&2; exit 2 ;;
esac
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/docs/benchmarks/v2}
BUILD_DIR=${PCCL_BUILD_DIR:-$ROOT/build}
export PCCL_BUILD_DIR=$BUILD_DIR
BENCH=$BUILD_DIR/bench/pccl-bench
for bin in bench/pccl-bench bench/pccl-wanem src/pccl-master; do
  [ -x "$BUILD_DIR/$bin" ] || { echo "run_all.sh: $BUILD_DIR/$bin not found: build first (bash scripts/build.sh)" >&2; exit 2; }
done
if [ "$PART" != loopback ] && [ "$(id -u)" -ne 0 ]; then
  echo "run_all.sh: the WAN part needs root (pccl-wanem); --part loopback runs the rest" >&2
  exit 2
fi
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
cd "$ROOT"
if [ "$PART" = loopback ]; then bash scripts/deps.sh gnuplot-nox; else bash scripts/deps.sh gnuplot-nox iperf3; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

failed=() unfaithful=()
# step NAME COMMAND...: one step; a failure is recorded and the run goes on. Exit 3 is a WAN run the
# emulator did not carry faithfully in some part: its rows say which.
step() {
  local name=$1 status=0 start=$SECONDS
  shift
  echo "run_all.sh: $name" >&2
  "$@" || status=$?
  case $status in
    0) ;;
    3) unfaithful+=("$name") ;;
    *) failed+=("$name (exit $status)") ;;
  esac
  echo "run_all.sh: $name: exit $status after $((SECONDS - start)) s" >&2
}

# merge_rows OUT FILE...: one {"results": [...]} holding every row of the files (one row per line).
merge_rows() {
  local out=$1
  shift
  { echo '{"results": ['; grep -h '"backend"' "$@" | sed 's/,$//; $!s/$/,/'; echo ']}'; } >"$out"
}

repeated() {  # eight back-to-back runs of the same comparison, merged
  local r files=()
  for r in 1 2 3 4 5 6 7 8; do
    "$BENCH" --ranks 4 -b 64M -e 256M -f 4 -n 5 -w 1 --backend both --json-field "repetition=$r" \
      --json "$tmp/rep$r.json" || return
    files+=("$tmp/rep$r.json")
  done
  merge_rows "$OUT/loopback-4ranks-repeated.json" "${files[@]}"
}

loopback() {
  local n k
  step loopback-4ranks-sizes "$BENCH" --ranks 4 -b 4K -e 256M -f 4 -n 5 -w 1 --connections 4 \
    --json "$OUT/loopback-4ranks-sizes.json"
  for k in 1 4 16 64; do
    step "loopback-4ranks-256M-K$k" "$BENCH" --ranks 4 -b 256M -e 256M -n 5 -w 1 --connections "$k" \
      --same-host-connections 0 --json "$OUT/loopback-4ranks-256M-K$k.json"
  done
  step loopback-4ranks-256M-inplace "$BENCH" --ranks 4 -b 256M -e 256M -n 5 -w 1 --connections 4 \
    --same-host-connections 0 --inplace --json "$OUT/loopback-4ranks-256M-inplace.json"
  for n in 2 4; do
    step "loopback-${n}ranks-4K" "$BENCH" --ranks "$n" -b 4K -e 4K -n 500 -w 50 --json "$OUT/loopback-${n}ranks-4K.json"
  done
  for n in 2 4 8; do
    step "loopback-${n}ranks" bash bench/loopback.sh --ranks "$n" -b 64K -e 256M -f 4 -n 3 -w 1 \
      --json "$OUT/loopback-${n}ranks.json"
  done
  for n in 2 4; do
    step "loopback-${n}ranks-both" "$BENCH" --ranks "$n" -b 4K -e 256M -f 4 -n 5 -w 2 --backend both \
      --json "$OUT/loopback-${n}ranks-both.json"
  done
  step loopback-4ranks-repeated repeated
  step loopback-4ranks-sync "$BENCH" --ranks 4 -b 4K -e 256M -f 16 -n 3 -w 1 --sync --json "$OUT/loopback-4ranks-sync.json"
  local enc="--ranks 2 -b 4K -e 256M -f 8 -n 5 -w 2"
  # shellcheck disable=SC2086
  {
    step encrypt-loopback-2ranks-plain "$BENCH" $enc --backend both --json "$OUT/encrypt-loopback-2ranks-plain.json"
    step encrypt-loopback-2ranks-aes "$BENCH" $enc --backend both --encrypt --json "$OUT/encrypt-loopback-2ranks-aes.json"
    step encrypt-loopback-2ranks-chacha env PCCL_CIPHER=chacha20poly1305 "$BENCH" $enc --backend pccl --encrypt \
      --json "$OUT/encrypt-loopback-2ranks-chacha.json"
  }
  step observability-loopback-2ranks env PCCL_LOG_LEVEL=error "$BENCH" --ranks 2 -b 4K -e 128M -f 32 -n 5 -w 2 \
    --backend both --json "$OUT/observability-loopback-2ranks.json"
  local c
  for c in broadcast allgather reducescatter; do
    step "loopback-4ranks-$c" "$BENCH" --ranks 4 --collective "$c" -b 1M -e 64M -f 4 -n 5 -w 1 --backend both \
      --json "$OUT/loopback-4ranks-$c.json"
  done
}

validate() { bash bench/wanem_validate.sh | tee "$OUT/wanem-validation.md"; }

# The WAN rows, the same-run comparisons with Gloo first (the headline tables), then pccl alone per K,
# then quantization, shared-state sync and encryption.
wan() {
  local scenario k default
  for scenario in europe transatlantic mixed; do
    step "$scenario-K$(default_k $scenario)-and-gloo" bash "bench/$scenario.sh" --backend both \
      --connections "$(default_k $scenario)" -n 3 -w 1 --json "$OUT/$scenario-K$(default_k $scenario)-and-gloo.json"
  done
  for scenario in europe transatlantic mixed; do
    for k in 4 16 64 1; do
      step "$scenario-K$k" bash "bench/$scenario.sh" --backend pccl --connections "$k" -n 3 -w 1 \
        --json "$OUT/$scenario-K$k.json"
    done
  done
  step quant_wan bash bench/quant_wan.sh "$OUT"
  step transatlantic-sync bash bench/transatlantic.sh --backend pccl --sync -n 3 -w 1 --json "$OUT/transatlantic-sync.json"
  step encrypt-europe-plain bash bench/europe.sh --backend pccl -n 3 -w 1 --json "$OUT/encrypt-europe-plain.json"
  step encrypt-europe-aes bash bench/europe.sh --backend pccl --encrypt -n 3 -w 1 --json "$OUT/encrypt-europe-aes.json"
  step encrypt-europe-chacha env PCCL_CIPHER=chacha20poly1305 bash bench/europe.sh --backend pccl --encrypt -n 3 -w 1 \
    --json "$OUT/encrypt-europe-chacha.json"
  local c
  for c in broadcast allgather reducescatter; do
    step "transatlantic-$c-and-gloo" bash bench/transatlantic.sh --backend both --collective "$c" -b 64M -e 64M \
      -n 3 -w 1 --json "$OUT/transatlantic-$c-and-gloo.json"
  done
}
default_k() {
  case $1 in
    europe) echo 4 ;;
    transatlantic) echo 16 ;;
    mixed) echo 64 ;;
  esac
}

case "$PART" in
  all) loopback; step wanem-validation validate; wan ;;
  loopback) loopback ;;
  validation) step wanem-validation validate ;;
  wan) wan ;;
esac
step tables.md sh -c '/usr/bin/python3 bench/tables.py "$1" > "$1/tables.md"' tables "$OUT"
step plots bash bench/plot.sh "$OUT"
echo "run_all.sh: results in $OUT, after $((SECONDS / 60)) min" >&2
[ ${#unfaithful[@]} -eq 0 ] ||
  echo "run_all.sh: runs the emulator did not carry faithfully in some part (see their rows' emulator_faithful): ${unfaithful[*]}" >&2
if [ ${#failed[@]} -ne 0 ]; then
  echo "run_all.sh: failed: ${failed[*]}" >&2
  exit 1
fi
