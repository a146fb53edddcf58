#!/usr/bin/env bash
# Quantization and zstd on the emulated WANs: every wire format with zstd off and on (level 1), pccl
# only (float32 data in [-1, 1), the float32 row is the baseline). Needs root (pccl-wanem).
#   bench/quant_wan.sh [OUT_DIR]    (default docs/benchmarks)
set -euo pipefail
usage() {
  cat <<'EOF'
usage: bench/quant_wan.sh [OUT_DIR]
  Every wire format (none, fp16, bf16, int8, fp4) with zstd off and on, pccl only, on the europe and
  transatlantic scenarios (their defaults: K = 4 and 16, -n 3 -w 1), into
  OUT_DIR/SCENARIO-quant-Q-zstdZ.json (default docs/benchmarks). Needs root (pccl-wanem).
  A failed run does not stop the others: exit 1 if any failed, 3 if only the emulator was not faithful
  somewhere (the rows say where), else 0.
EOF
}
case "${1:-}" in
  -h | --help) usage; exit 0 ;;
  -*) echo "quant_wan.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
esac
[ $# -le 1 ] || { echo "quant_wan.sh: one argument at most" >&2; usage >&2; exit 2; }
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-$ROOT/docs/benchmarks}
mkdir -p "$OUT"
cd "$ROOT"
# A run that fails does not stop the others; the exit status is 1 if any failed, else 3 if the emulator
# was not faithful in some part of a run (its rows say which), else 0.
worst=0
for scenario in europe transatlantic; do
  for q in none fp16 bf16 int8 fp4; do
    for z in 0 1; do
      status=0
      bash "bench/$scenario.sh" --backend pccl --quant "$q" --compress "$z" \
        --json "$OUT/$scenario-quant-$q-zstd$z.json" || status=$?
      if [ $status -eq 3 ] && [ $worst -eq 0 ]; then
        worst=3
      elif [ $status -ne 0 ] && [ $status -ne 3 ]; then
        echo "quant_wan.sh: $scenario --quant $q --compress $z failed (exit $status)" >&2
        worst=1
      fi
    done
  done
done
exit $worst
