#!/usr/bin/env bash
# Network faults under the transatlantic scenario (issue 35; docs/benchmarks.md "Network faults"): one
# pccl run of 256 MiB all-reduces whose timed operations are hit in turn by a blackout of rank 2 (3 s), a
# reset of every connection between ranks 0 and 1 (rank 0 runs the master), a 2 s loss burst of 30 % on
# 1 -> 2 and a route change of every path from 80 to 160 ms RTT, beside two undisturbed operations and
# one at the new RTT; then Gloo under the first faults, in the same scenario.
#   bench/faults.sh [--json-dir DIR]
set -euo pipefail
usage() {
  cat <<'EOF'
usage: bench/faults.sh [--json-dir DIR]
  The transatlantic scenario (bench/transatlantic.sh) under scheduled network faults, each hitting one
  timed 256 MiB all-reduce (pccl-wanem --faults, 'at phase+1s ...'):
    pccl  7 timed operations: 2 undisturbed, a 3 s blackout of rank 2, a reset of every connection
          0 <-> 1, a 30 % loss burst for 2 s on 1 -> 2, a route change 80 -> 160 ms RTT, 1 at the new RTT
    gloo  2 timed operations, no warm-up (one takes ~150 s): undisturbed and the blackout; then a run of
          one operation hit by the reset (Gloo cannot survive one: its last lines are kept)
  --json-dir DIR   where the results go (default docs/benchmarks/v3): transatlantic-256M-faults-pccl.json,
                   -gloo.json, -gloo-reset.txt
  Needs root (pccl-wanem). PCCL_BUILD_DIR as for the scenario scripts.
EOF
}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
JSON_DIR=$ROOT/docs/benchmarks/v3
while [ $# -gt 0 ]; do
  case "$1" in
    -h | --help) usage; exit 0 ;;
    --json-dir) [ $# -ge 2 ] || { usage >&2; exit 2; }; JSON_DIR=$2; shift 2 ;;
    *) echo "bench/faults.sh: unknown argument $1" >&2; usage >&2; exit 2 ;;
  esac
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# A no-op route line marks an undisturbed operation (each 'phase' line waits for the next timed one).
cat > "$tmp/pccl.faults" <<'EOF'
at phase path 0 1 delay=40
at phase path 0 1 delay=40
at phase+1s down 2 for 3s
at phase+1s reset 0 -> 1
at phase+1s burst 1 -> 2 loss=30 for 2s
at phase+1s path 0 1 delay=80
at +0s path 0 2 delay=80
at +0s path 0 3 delay=80
at +0s path 1 2 delay=80
at +0s path 1 3 delay=80
at +0s path 2 3 delay=80
EOF
sed -n 2,3p "$tmp/pccl.faults" > "$tmp/gloo.faults"
echo "at phase+1s reset 0 -> 1" > "$tmp/gloo-reset.faults"
echo "== pccl"
PCCL_WANEM_FLAGS="--faults $tmp/pccl.faults" bash "$ROOT/bench/transatlantic.sh" --backend pccl -n 7 -w 1 \
  --timeout 600 --json "$JSON_DIR/transatlantic-256M-faults-pccl.json" || echo "pccl run exited $?"
echo "== gloo"
PCCL_WANEM_FLAGS="--faults $tmp/gloo.faults" bash "$ROOT/bench/transatlantic.sh" --backend gloo -n 2 -w 0 \
  --timeout 600 --json "$JSON_DIR/transatlantic-256M-faults-gloo.json" || echo "gloo run exited $?"
echo "== gloo, reset"
status=0
PCCL_WANEM_FLAGS="--faults $tmp/gloo-reset.faults" bash "$ROOT/bench/transatlantic.sh" --backend gloo -n 1 -w 0 \
  --timeout 600 > "$tmp/gloo-reset.txt" 2>&1 || status=$?
{ echo "exit $status"; tail -20 "$tmp/gloo-reset.txt"; } | tee "$JSON_DIR/transatlantic-256M-faults-gloo-reset.txt"
