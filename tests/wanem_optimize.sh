#!/usr/bin/env bash
# Topology optimisation under pccl-wanem: 4 rank namespaces, 100 Mbit/s access links, 5 ms one way,
# and one slow direction, 1 -> 2 at 10 Mbit/s on its own path. The ranks join in rank order (one every
# 0.3 s), so the join-order ring 0 -> 1 -> 2 -> 3 crosses the slow direction; pccl-bench
# --optimize-topology has every rank call pcclOptimizeTopology, then runs one all-reduce (its result
# checked element by element). The ring installed must avoid 1 -> 2, and the bottleneck the links
# predict for it must exceed the slow link's rate (it is the access rate, ~12 MB/s; the test asks for
# more than 2.5 MB/s, twice the slow link, so that a busy machine cannot fail it).
# Skipped (exit 77) where namespaces or TUN devices are not available.
#   tests/wanem_optimize.sh PATH/TO/BUILD_DIR
set -euo pipefail

usage() {
  cat <<EOF
usage: $0 PATH/TO/BUILD_DIR
  pccl-wanem scenario test of topology optimisation (needs root, /dev/net/tun, iproute2; exit 77 =
  skipped): the optimiser must install a ring that avoids the configured slow link. Registered with
  ctest (tests/CMakeLists.txt).
EOF
}
. "$(dirname "$0")/wanem_checks.sh"
wanem_scenario_start wanem-optimize "$@"
printf '%s\n' "rank 0 r0" "rank 1 r1" "rank 2 r2" "rank 3 r3" "path 1 -> 2 delay=5 rate=10" > "$dir/paths"

status=0
PCCL_BUILD_DIR=$BUILD_DIR PCCL_BENCH_JOIN_STAGGER_MS=300 PCCL_BENCH_MASTER_FLAGS="--probe-budget-ms 500" \
  timeout 240 "$BUILD_DIR/bench/pccl-wanem" --ranks 4 --delay-ms 5 --rate-mbit 100 --paths "$dir/paths" -- \
  "$ROOT/bench/wanem_rank.sh" --backend pccl -b 1M -e 1M -n 1 -w 0 --connections 2 --optimize-topology \
  --timeout 200 --json "$dir/out.json" > "$dir/out.txt" 2> "$dir/err.txt" || status=$?
cat "$dir/out.txt"
# 3: the emulator's own verdict (not faithful on a busy machine): reported, not asserted.
case $status in 0 | 3) ;; *) cat "$dir/err.txt"; echo "FAIL: the run exited $status"; exit 1 ;; esac
[ -s "$dir/out.json" ] || { cat "$dir/err.txt"; echo "FAIL: no JSON rows"; exit 1; }
/usr/bin/python3 - "$dir/out.json" <<'PY'
import json, sys
row = json.load(open(sys.argv[1]))["results"][0]
ring, predicted = row["ring"], row.get("predicted_bottleneck_MBps", 0)
links = list(zip(ring, ring[1:] + ring[:1]))
print("ring %s, predicted bottleneck %.1f MB/s, optimisation %.2f s, wrong %d"
      % (" -> ".join(map(str, ring)), predicted, row["optimize_s"], row["wrong"]))
assert sorted(ring) == [0, 1, 2, 3], ring
assert row["optimized"] and row["wrong"] == 0, row
assert (1, 2) not in links, "the ring uses the slow link 1 -> 2: %s" % ring
assert predicted > 2.5, "predicted bottleneck %.2f MB/s: the slow link's rate, or a bad measurement" % predicted
print("ok")
PY
