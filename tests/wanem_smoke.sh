#!/usr/bin/env bash
# pccl-wanem smoke test: 2 rank namespaces, 5 ms one-way delay.
#  1. --probe: the fastest of the probe's round trips must be the configured 10 ms RTT: at least 10 ms
#     (every packet is delayed) and at most 5 ms more (no packet is delayed twice). The fastest round
#     trip, not the median: it is the one least disturbed by a busy machine (the probe's threads also
#     run SCHED_FIFO, so that it measures the path, not the wait for a CPU).
#     The emulator's own verdict (faithful, or exit 3: NOT FAITHFUL, its p99 release lateness or drops
#     past the limit) is printed, not asserted: it judges the machine's load, which a test cannot control.
#  1b. --paths: 3 ranks in two regions with asymmetric delays: every pair's fastest round trip is the
#     sum of its two directions' configured delays (and the default delay is not used).
#  2. SIGTERM mid-run: each rank's command reports through a FIFO that it runs inside its namespace (the
#     event waited for, with a deadline) while the rank namespaces exist; after SIGTERM the run exits
#     non-zero and leaves no namespace behind (the ranks' TUN devices live inside them).
# Skipped (exit 77) where namespaces or TUN devices are not available.
#   tests/wanem_smoke.sh PATH/TO/pccl-wanem
set -euo pipefail

usage() {
  cat <<EOF
usage: $0 PATH/TO/pccl-wanem
  pccl-wanem smoke test (needs root, /dev/net/tun, iproute2; exit 77 = skipped): the probe sees the
  configured RTT, and SIGTERM tears every namespace down. Registered with ctest (tests/CMakeLists.txt).
EOF
}
case "${1:-}" in
  -h | --help) usage; exit 0 ;;
  -*) echo "wanem_smoke: unknown option $1" >&2; usage >&2; exit 2 ;;
esac
[ $# -eq 1 ] || { usage >&2; exit 2; }
WANEM=$1
DEADLINE_S=60

. "$(dirname "$0")/wanem_checks.sh"
wanem_require_namespaces

dir=$(mktemp -d "${TMPDIR:-/tmp}/pccl-wanem-smoke.XXXXXX")
pid=
cleanup() {  # a failed check still stops the run the way a user would, so that it tears down
  if [ -n "$pid" ]; then
    kill -TERM "$pid" 2> /dev/null || true
    wait "$pid" 2> /dev/null || true
    for ns in $(ip netns list | sed -n "s/^\(pw${pid}n[0-9]*\).*/\1/p"); do ip netns del "$ns" || true; done
  fi
  rm -rf "$dir"
}
trap cleanup EXIT

# ---- 1. the RTT the probe sees -----------------------------------------------------------------------
status=0
"$WANEM" --ranks 2 --delay-ms 5 --probe > "$dir/probe.out" 2> "$dir/probe.err" || status=$?
cat "$dir/probe.out" "$dir/probe.err"
case $status in
  0) verdict="faithful" ;;
  3) verdict="NOT FAITHFUL on this machine now (exit 3: the emulator's verdict, reported, not asserted)" ;;
  *) echo "FAIL: pccl-wanem --probe exited $status"; exit 1 ;;
esac
grep -qE "(: faithful|NOT FAITHFUL)" "$dir/probe.err" || { echo "FAIL: no faithfulness verdict"; exit 1; }
min=$(sed -n 's/.*rtt_ms median [0-9.]* min \([0-9.]*\).*/\1/p' "$dir/probe.out")
median=$(sed -n 's/.*rtt_ms median \([0-9.]*\).*/\1/p' "$dir/probe.out")
[ -n "$min" ] || { echo "FAIL: no RTT reported"; exit 1; }
awk -v r="$min" 'BEGIN { exit !(r >= 9.9 && r <= 15.0) }' ||
  { echo "FAIL: fastest RTT $min ms, configured 10 ms (want 10 .. 15 ms)"; exit 1; }

# ---- 1b. per-path settings: 3 ranks, asymmetric paths from a paths file --------------------------------
# Every pair's fastest round trip must be its configured RTT (the sum of both directions' delays), as in
# part 1; a path given its own delay must not take the default one.
printf '%s\n' "rank 0 a" "rank 1 a" "rank 2 b" "path a a delay=2" "path a -> b delay=20" "path b -> a delay=25" \
  > "$dir/paths"
status=0
"$WANEM" --ranks 3 --delay-ms 50 --paths "$dir/paths" --probe > "$dir/paths.out" 2> "$dir/paths.err" || status=$?
cat "$dir/paths.out"
case $status in 0 | 3) ;; *) cat "$dir/paths.err"; echo "FAIL: pccl-wanem --paths --probe exited $status"; exit 1 ;; esac
for pair in "0 1 4" "0 2 45" "1 2 45"; do
  read -r a b want <<< "$pair"
  got=$(sed -n "s/^probe rank $a <-> $b: rtt_ms median [0-9.]* min \([0-9.]*\) (configured \([0-9.]*\)).*/\1 \2/p" "$dir/paths.out")
  fastest= configured=
  read -r fastest configured <<< "$got" || true
  [ -n "$fastest" ] || { echo "FAIL: no RTT reported for ranks $a and $b"; exit 1; }
  awk -v c="$configured" -v w="$want" 'BEGIN { exit !(c == w) }' ||
    { echo "FAIL: ranks $a and $b: configured RTT reported as $configured ms, the paths file says $want ms"; exit 1; }
  awk -v r="$fastest" -v w="$want" 'BEGIN { exit !(r >= w - 0.1 && r <= w + 5.0) }' ||
    { echo "FAIL: ranks $a and $b: fastest RTT $fastest ms, configured $want ms (want $want .. $want + 5 ms)"; exit 1; }
done

# ---- 2. SIGTERM mid-run tears everything down ----------------------------------------------------------
mkfifo "$dir/ready"
exec 3<> "$dir/ready"  # read-write: neither side's open blocks
# shellcheck disable=SC2016
"$WANEM" --ranks 2 --delay-ms 1 -- sh -c 'echo "ready $PCCL_WANEM_RANK" > "$1"; exec sleep 600' sh "$dir/ready" \
  2> "$dir/run.err" &
pid=$!
end=$(($(date +%s) + DEADLINE_S))
ready=0
while [ $ready -lt 2 ]; do
  left=$((end - $(date +%s)))
  if [ $left -le 0 ] || ! IFS= read -r -t "$left" line <&3; then
    cat "$dir/run.err"
    echo "FAIL: the ranks' commands did not start within $DEADLINE_S s"
    exit 1
  fi
  case $line in ready\ [01]) ready=$((ready + 1)) ;; esac
done
exec 3<&-
for n in n0 n1; do
  ip netns list | grep -q "^pw${pid}${n}\b" || { echo "FAIL: namespace pw${pid}${n} missing while running"; exit 1; }
done
kill -TERM "$pid"
status=0
wait "$pid" || status=$?
pid_done=$pid
pid=
[ $status -ne 0 ] || { echo "FAIL: a signalled run must not exit 0"; exit 1; }
if ip netns list | grep -q "^pw${pid_done}"; then
  echo "FAIL: namespaces left behind"
  ip netns list
  exit 1
fi
echo "PASS: fastest RTT $min ms (median $median) for 10 ms configured, emulator $verdict;" \
  "per-path RTTs as configured; SIGTERM tears down (exit $status)"
