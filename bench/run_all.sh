#!/usr/bin/env bash
# Regenerates every benchmark result under docs/benchmarks/ (about 25 minutes on the 2-core build
# machine), then the plots. Needs root for the WAN scenarios.
set -euo pipefail
usage() {
  cat <<'EOF'
usage: bench/run_all.sh [OUT_DIR]
  Regenerates every benchmark result (JSON, validation table, plots) into OUT_DIR (default
  docs/benchmarks): about 25 minutes on 2 cores. Needs root for the WAN scenarios.
EOF
}
case "${1:-}" in
  -h | --help) usage; exit 0 ;;
  -*) echo "run_all.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
esac
[ $# -le 1 ] || { echo "run_all.sh: one argument at most" >&2; usage >&2; exit 2; }
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-$ROOT/docs/benchmarks}
mkdir -p "$OUT"
cd "$ROOT"
bash bench/wanem_validate.sh | tee "$OUT/wanem-validation.md"
for n in 2 4 8; do
  bash bench/loopback.sh --ranks "$n" -b 64K -e 256M -f 4 -n 3 -w 1 --json "$OUT/loopback-${n}ranks.json"
done
bash bench/europe.sh --json "$OUT/europe-K16-and-gloo.json" --connections 16
for k in 1 4 64; do bash bench/europe.sh --backend pccl --connections $k --json "$OUT/europe-K$k.json"; done
bash bench/transatlantic.sh --json "$OUT/transatlantic-K64-and-gloo.json" --connections 64
for k in 1 4 16; do bash bench/transatlantic.sh --backend pccl --connections $k --json "$OUT/transatlantic-K$k.json"; done
bash bench/mixed.sh --json "$OUT/mixed-K64-and-gloo.json"
bash bench/quant_wan.sh "$OUT"
bash bench/plot.sh "$OUT"
