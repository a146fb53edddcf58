#!/usr/bin/env bash
# The master's death inside the WAN emulator: 4 ranks in pccl-wanem (the europe scenario: ~20 ms RTT,
# 0.001 % loss, 250 Mbit/s per rank, cubic), each a pccl-failover-bench peer looping all-reduces; rank 0
# also runs the driver, which starts pccl-master, SIGKILLs it after the warm-up and restarts it.
#   bench/failover.sh [--json FILE] [pccl-failover-bench driver flags: --runs K --restart-after-ms D ...]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=${PCCL_BUILD_DIR:-$ROOT/build}
usage() {
  cat <<'EOF'
usage: bench/failover.sh [--json FILE] [--count C] [--runs K] [--restart-after-ms D] [--window-ms W]
  4 ranks in pccl-wanem with the europe scenario's network (~20 ms RTT, 0.001 % loss, 250 Mbit/s, cubic):
  every rank loops float32 all-reduces (pccl-failover-bench --role peer); rank 0 also runs the driver,
  which SIGKILLs pccl-master after a warm-up and restarts it, and reports per peer: the time until the
  run resumed, until the first all-reduce after the restart, the longest gap between all-reduces, and
  the all-reduces done while no master was up. Needs root. Environment: PCCL_BUILD_DIR (default build/).
EOF
}
JSON=""
PASS=()
while [ $# -gt 0 ]; do
  case "$1" in
    -h | --help) usage; exit 0 ;;
    --json) [ $# -ge 2 ] || { usage >&2; exit 2; }; JSON=$2; shift 2 ;;
    --count | --runs | --restart-after-ms | --window-ms | --reconnect-ms)
      [ $# -ge 2 ] || { usage >&2; exit 2; }; PASS+=("$1" "$2"); shift 2 ;;
    *) echo "failover.sh: unknown flag $1" >&2; usage >&2; exit 2 ;;
  esac
done
for bin in bench/pccl-failover-bench bench/pccl-wanem src/pccl-master; do
  [ -x "$BUILD_DIR/$bin" ] || { echo "failover.sh: $BUILD_DIR/$bin not found: build first" >&2; exit 2; }
done
DIR=$(mktemp -d /tmp/pccl-failover-wan-XXXXXX)
chmod 755 "$DIR"
export PCCL_FB_BIN="$BUILD_DIR/bench/pccl-failover-bench" PCCL_FB_DIR="$DIR" PCCL_FB_JSON="$JSON"
export PCCL_FB_ARGS="${PASS[*]:-}" PCCL_MASTER_BIN="$BUILD_DIR/src/pccl-master"
# shellcheck disable=SC2016
"$BUILD_DIR/bench/pccl-wanem" --ranks 4 --delay-ms 10 --loss-pct 0.001 --rate-mbit 250 --cc cubic --min-tso-segs 16 -- \
  sh -c '
    master=$(echo "$PCCL_WANEM_ADDRS" | cut -d, -f1):29500
    if [ "$PCCL_WANEM_RANK" = 0 ]; then
      json="--scenario europe"; [ -n "$PCCL_FB_JSON" ] && json="$json --json $PCCL_FB_JSON"
      # shellcheck disable=SC2086
      "$PCCL_FB_BIN" --role driver --listen "$master" --peers 4 --log-dir "$PCCL_FB_DIR" $json $PCCL_FB_ARGS &
    fi
    "$PCCL_FB_BIN" --role peer --master "$master" --log "$PCCL_FB_DIR/peer$PCCL_WANEM_RANK" \
      --stop-file "$PCCL_FB_DIR/stop" $(echo "$PCCL_FB_ARGS" | grep -o -- "--count [0-9]*" || true)
    wait'
echo "failover.sh: logs in $DIR"
