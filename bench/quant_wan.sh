#!/usr/bin/env bash
# Quantization and zstd on the emulated WANs: every wire format with zstd off and on (level 1), pccl
# only (float32 data in [-1, 1), the float32 row is the baseline). Needs root (pccl-wanem).
#   bench/quant_wan.sh [OUT_DIR]    (default docs/benchmarks)
set -euo pipefail
usage() {
  cat <<'EOF'
usage: bench/quant_wan.sh [OUT_DIR]
  Every wire format (none, fp16, bf16, int8) with zstd off and on, pccl only, on the europe and
  transatlantic scenarios; JSON into OUT_DIR (default docs/benchmarks). Needs root (pccl-wanem).
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
for scenario in europe transatlantic; do
  for q in none fp16 bf16 int8; do
    for z in 0 1; do
      bash "bench/$scenario.sh" --backend pccl --quant "$q" --compress "$z" \
        --json "$OUT/$scenario-quant-$q-zstd$z.json"
    done
  done
done
