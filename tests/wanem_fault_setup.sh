#!/usr/bin/env bash
# Network faults while a run is set up cost time, never a call (issue 35; docs/algorithms.md §6, "Network
# faults"): 3 rank namespaces under pccl-wanem (10 ms one way, 100 Mbit/s), the ranks joining one every
# 1.5 s, then pcclOptimizeTopology (a link survey and the ring build after it), then 1 MiB all-reduces.
# pccl-bench marks each rank's join (`begin setup:connect:RANK`) and the optimisation (`begin
# setup:optimize`), and the faults wait for those marks (docs/wanem.md, "Faults"):
#   run 1  rank 1's join hit by a reset of every connection 0 <-> 1 (its control connection to the master
#          on rank 0 and whichever ring connections of its first ring build are up: the master holds its
#          place and repeats the ring, a ring connection reset after its hello is resumed), rank 2's join
#          by a 1.5 s blackout of rank 2, the survey by resets 1 <-> 2 and 0 <-> 2 (probe connections, and
#          rank 2's control connection: the master counts that round's report as nothing measured)
#   run 2  rank 1's join hit by a 1 s loss burst of 30 % on 0 -> 1, rank 2's ring build by a route change
#          of 1 <-> 2 (10 -> 30 ms one way), the survey by a silent drop of the connections 1 <-> 2
#          (forget) and a loss burst on 2 -> 0
# Asserts, for each run: every rank joined and the optimisation succeeded (pccl-bench exits 0, or 3 for
# the emulator's own verdict on a busy machine), no ring build failed (the master's log), every one of the
# 6 links measured usable (a probe broken by a fault is measured again), the all-reduces exact, and each
# fault applied. Never a speed. Skipped (exit 77) where namespaces or TUN devices are not available.
#   tests/wanem_fault_setup.sh PATH/TO/BUILD_DIR
set -euo pipefail

usage() {
  cat <<USAGE
usage: $0 PATH/TO/BUILD_DIR
  pccl-wanem test: joins, a link survey and ring builds hit by resets, blackouts, loss bursts, route
  changes and silent drops all succeed (needs root, /dev/net/tun, iproute2; exit 77 = skipped).
  Registered with ctest (tests/CMakeLists.txt).
USAGE
}
. "$(dirname "$0")/wanem_checks.sh"
wanem_scenario_start wanem-fault-setup "$@"

# The first line only takes rank 0's join mark (the master runs beside rank 0: nothing crosses the
# emulator), so that the next waits for rank 1's.
printf '%s\n' "at phase path 0 1 delay=10" "at phase+150ms reset 0 -> 1" "at phase+20ms down 2 for 1500ms" \
  "at phase+200ms reset 1 -> 2" "at +600ms reset 0 -> 2" > "$dir/run1.faults"
printf '%s\n' "at phase path 0 1 delay=10" "at phase+20ms burst 0 -> 1 loss=30 for 1s" \
  "at phase+100ms path 1 2 delay=30" "at phase+200ms forget 1 -> 2" "at +500ms burst 2 -> 0 loss=30 for 1s" \
  > "$dir/run2.faults"

# setup_run NAME "FAULT COUNTS": the bench under pccl-wanem with $dir/NAME.faults, then the checks.
setup_run() {
  local name=$1 counts=$2 status=0
  PCCL_BUILD_DIR=$BUILD_DIR PCCL_BENCH_JOIN_STAGGER_MS=1500 PCCL_BENCH_MASTER_FLAGS="--probe-budget-ms 300" \
    timeout 240 "$BUILD_DIR/bench/pccl-wanem" --ranks 3 --delay-ms 10 --rate-mbit 100 \
    --faults "$dir/$name.faults" --stats "$dir/$name-stats.json" -- \
    "$ROOT/bench/wanem_rank.sh" --backend pccl -b 1M -e 1M -n 3 -w 1 --connections 2 --optimize-topology \
    --timeout 200 --json "$dir/$name.json" > "$dir/$name-out.txt" 2> "$dir/$name-err.txt" || status=$?
  cat "$dir/$name-out.txt"
  grep "fault at" "$dir/$name-err.txt" || true
  case $status in 0 | 3) ;; *) cat "$dir/$name-err.txt"; echo "FAIL: the $name run exited $status"; exit 1 ;; esac
  if grep "ring build failed" "$dir/$name-err.txt"; then
    echo "FAIL: a ring build failed in the $name run"
    exit 1
  fi
  /usr/bin/python3 - "$dir/$name.json" "$dir/$name-stats.json" "$dir/$name-out.txt" "$counts" <<'PY'
import json, re, sys
rows = json.load(open(sys.argv[1]))["results"]
assert len(rows) == 1, rows
row = rows[0]
print("%d ranks, ring %s, optimised in %.2f s, wrong %d" % (row["ranks"], row["ring"], row["optimize_s"], row["wrong"]))
assert row["ranks"] == 3 and sorted(row["ring"]) == [0, 1, 2] and row["optimized"], row
assert row["wrong"] == 0 and len(row["times_s"]) == 3, row
links = re.findall(r"(\d+)->(\d+): ([0-9.]+), ([0-9.]+);", open(sys.argv[3]).read())
print("links (from, to, MB/s, rtt ms):", links)
assert len(links) == 6 and all(float(bw) > 0 for _, _, bw, _ in links), "a link measured unusable: %s" % links
faults = json.load(open(sys.argv[2]))["faults"]
print("faults:", faults)
for kv in sys.argv[4].split():
    kind, n = kv.split("=")
    assert faults[kind] == int(n), (kind, faults)
PY
}

export PCCL_LOG_LEVEL=warn
setup_run run1 "path=1 reset=3 down=1"
setup_run run2 "path=2 burst=2 forget=1"
echo ok
