#!/bin/sh
# pccl-wanem smoke test: 2 rank namespaces, 5 ms one-way delay; the RTT the probe sees must be 10 ms
# (plus at most 3 ms of emulator and scheduling overhead); a run stopped with SIGTERM must leave no
# namespace behind. Skipped (exit 77) where namespaces or TUN devices are not available.
set -u
WANEM=$1
if [ "$(id -u)" != 0 ] || [ ! -c /dev/net/tun ] || ! command -v ip >/dev/null 2>&1; then
  echo "skipped: needs root, /dev/net/tun and iproute2"; exit 77
fi
if ! ip netns add pccl-wanem-check 2>/dev/null; then echo "skipped: network namespaces unavailable"; exit 77; fi
ip netns del pccl-wanem-check

out=$("$WANEM" --ranks 2 --delay-ms 5 --probe 2>&1) || { echo "$out"; echo "FAIL: pccl-wanem exited non-zero"; exit 1; }
echo "$out"
rtt=$(echo "$out" | sed -n 's/.*rtt_ms median \([0-9.]*\).*/\1/p')
[ -n "$rtt" ] || { echo "FAIL: no RTT reported"; exit 1; }
awk -v r="$rtt" 'BEGIN { exit !(r >= 9.9 && r <= 13.0) }' || { echo "FAIL: RTT $rtt ms, configured 10 ms"; exit 1; }
echo "$out" | grep -q "faithful" || { echo "FAIL: no faithfulness verdict"; exit 1; }

# SIGTERM mid-run: the command is stopped and every namespace, veth and TUN is removed.
"$WANEM" --ranks 2 --delay-ms 1 -- sleep 60 2>/dev/null &
pid=$!
i=0
while ! ip netns list | grep -q "^pw${pid}n1"; do
  i=$((i + 1)); [ $i -gt 100 ] && { echo "FAIL: namespaces never appeared"; kill -KILL $pid; exit 1; }
  sleep 0.1
done
kill -TERM $pid
wait $pid
status=$?
[ $status -ne 0 ] || { echo "FAIL: a signalled run must not exit 0"; exit 1; }
if ip netns list | grep -q "^pw${pid}"; then echo "FAIL: namespaces left behind"; ip netns list; exit 1; fi
echo "PASS: RTT $rtt ms for 10 ms configured; SIGTERM tears down (exit $status)"
