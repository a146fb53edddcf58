#!/usr/bin/env bash
# Network faults that heal within the peer timeout cost all-reduces time, never the operation
# (issue 35; docs/algorithms.md §6, "Network faults"): 3 rank namespaces under pccl-wanem, pccl-bench
# 1 MiB all-reduces, every element checked, each timed operation hit by one fault scheduled from its
# start mark (docs/wanem.md, "Faults"): rank 2 blacked out for 3 s (both ways, master connection
# included; the peer timeout is 10 s), a 2 s loss burst of 30 % on 0 -> 1, a route change of 0 <-> 1
# from 10 to 40 ms one way, and a reset of every connection between ranks 1 and 2 (their ring
# connection, whichever way the ring runs: it resumes on a new connection, protocol 17), then of every
# connection between ranks 0 and 1 (rank 0 runs the master: rank 1's control connection too, which the
# master holds while rank 1 dials again), then a silent drop of the connections between ranks 1 and 2
# (forget: a NAT that lost its state; the ring connection stalls and is replaced after
# PCCL_RING_STALL_MS, 2 s here). Asserts that every operation succeeded exact, that each fault
# was applied and that the resets were resumed, never a speed. Then shared-state syncs under resets (the
# syncing rank's control connection's too), a blackout and a loss burst (below): every sync succeeds with
# every byte right. Skipped (exit 77) where
# namespaces or TUN devices are not available.
#   tests/wanem_fault_ops.sh PATH/TO/BUILD_DIR
set -euo pipefail

usage() {
  cat <<USAGE
usage: $0 PATH/TO/BUILD_DIR
  pccl-wanem test: all-reduces through a blackout, a loss burst and a route change succeed exact
  (needs root, /dev/net/tun, iproute2; exit 77 = skipped). Registered with ctest (tests/CMakeLists.txt).
USAGE
}
. "$(dirname "$0")/wanem_checks.sh"
wanem_scenario_start wanem-fault-ops "$@"
# Each line waits for the start of the next timed operation (pccl-bench's marks), then 100 ms.
printf '%s\n' "at phase+100ms down 2 for 3s" "at phase+100ms burst 0 -> 1 loss=30 for 2s" \
  "at phase+100ms path 0 1 delay=40" "at phase+100ms reset 1 -> 2" \
  "at phase+100ms reset 0 -> 1" "at phase+100ms forget 1 -> 2" > "$dir/faults"

# faulted_run NAME FAULTS_FILE pccl-bench flags...: the bench under pccl-wanem with those faults, 3 ranks;
# writes $dir/NAME.json (rows) and $dir/NAME-stats.json (the emulator's counters); fails the test on any
# exit but 0 or 3 (3: the emulator's own verdict, not faithful on a busy machine: reported, not asserted).
faulted_run() {
  local name=$1 faults=$2 status=0
  shift 2
  PCCL_BUILD_DIR=$BUILD_DIR timeout 240 "$BUILD_DIR/bench/pccl-wanem" --ranks 3 --delay-ms 10 --rate-mbit 100 \
    --faults "$faults" --stats "$dir/$name-stats.json" -- \
    "$ROOT/bench/wanem_rank.sh" --backend pccl "$@" --connections 2 --timeout 200 \
    --json "$dir/$name.json" > "$dir/$name-out.txt" 2> "$dir/$name-err.txt" || status=$?
  cat "$dir/$name-out.txt"
  grep "fault at" "$dir/$name-err.txt" || true
  case $status in 0 | 3) ;; *) cat "$dir/$name-err.txt"; echo "FAIL: the $name run exited $status"; exit 1 ;; esac
  [ -s "$dir/$name.json" ] || { cat "$dir/$name-err.txt"; echo "FAIL: no $name JSON rows"; exit 1; }
}

# PCCL_RING_STALL_MS: the forgotten connections count as broken after 2 s without an acknowledgement.
export PCCL_RING_STALL_MS=2000 PCCL_LOG_LEVEL=${PCCL_LOG_LEVEL:-error}
faulted_run ops "$dir/faults" -b 1M -e 1M -n 7 -w 1
# check_run NAME TIMED "FAULT COUNTS": one row, every timed operation there and exact, and the emulator
# applied each fault kind the given number of times (kind=N ..., and some RSTs sent).
check_run() {
  /usr/bin/python3 - "$dir/$1.json" "$dir/$1-stats.json" "$2" "$3" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))["results"]
assert len(rows) == 1, rows
row = rows[0]
print("%s: %d timed operations, times %s s, wrong %d" % (row["bytes"], len(row["times_s"]), row["times_s"], row["wrong"]))
assert row["wrong"] == 0 and len(row["times_s"]) == int(sys.argv[3]) and row["ranks"] == 3, row
faults = json.load(open(sys.argv[2]))["faults"]
print("faults:", faults)
for kv in sys.argv[4].split():
    kind, n = kv.split("=")
    assert faults[kind] == int(n), (kind, faults)
assert faults["resets_sent"] > 0, faults
print("ring connections resumed (all ranks):", row["ring_reconnects"])
PY
}
check_run ops 7 "down=1 burst=1 path=1 reset=2 forget=1"
/usr/bin/python3 -c 'import json, sys; r = json.load(open(sys.argv[1]))["results"][0]; s = json.load(open(sys.argv[2]))["faults"]
assert s["down_segments"] > 0 and r["ring_reconnects"] > 0, (s, r)' "$dir/ops.json" "$dir/ops-stats.json"
echo ok

# Shared-state syncs under the same kinds of faults: rank 2's copy is stale and it fetches 8 MiB from
# ranks 0 and 1 over state connections, which do not resume: a reset one breaks, its unanswered
# requests go to the others and it is dialled again (docs/algorithms.md §6, "Network faults"). Each
# timed sync is hit by one fault: every connection 1 <-> 2 reset (rank 2's state connections to rank 1
# and their ring connection), again a second time, rank 2 blacked out for 2 s, a 1 s loss burst of 30 %
# on 0 -> 2, and every connection 0 <-> 2 reset: rank 2's control connection too, which runs to the
# master on rank 0 (protocol 19: the sync goes on, the master repeats what rank 2 missed). Every sync
# must succeed with every byte right.
printf '%s\n' "at phase+100ms reset 1 -> 2" "at phase+200ms reset 1 -> 2" "at phase+100ms down 2 for 2s" \
  "at phase+100ms burst 0 -> 2 loss=30 for 1s" "at phase+100ms reset 0 -> 2" > "$dir/sync-faults"
faulted_run sync "$dir/sync-faults" --sync -b 8M -e 8M -n 5 -w 1
check_run sync 5 "reset=3 down=1 burst=1"
echo ok
