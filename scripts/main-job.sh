#!/usr/bin/env bash
# The README's main job: pccl-master plus 4 peer processes on loopback. They join and form a ring,
# exchange heartbeats, one is SIGKILLed on purpose, and the survivors re-form the ring without it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
BUILD_DIR=${PCCL_BUILD_DIR:-build}
HEARTBEAT_MS=200
TIMEOUT_MS=2000
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

# wait_for FILE PATTERN SECONDS: blocks until a line of FILE matches, or fails after SECONDS.
wait_for() {
  if ! timeout "$3" grep -q -m1 -E "$2" <(tail -n +1 -f "$1" 2>/dev/null); then
    echo "main job: timed out after $3 s waiting for '$2' in $1" >&2
    exit 1
  fi
}
say() { printf '\n== %s\n' "$*"; }

say "starting pccl-master (heartbeat ${HEARTBEAT_MS} ms, peer timeout ${TIMEOUT_MS} ms)"
PCCL_LOG_LEVEL=info "$BUILD_DIR/src/pccl-master" --listen 127.0.0.1:0 --heartbeat-ms $HEARTBEAT_MS \
  --peer-timeout-ms $TIMEOUT_MS >"$work/master.out" 2>"$work/master.log" &
pids+=($!)
wait_for "$work/master.out" "listening on" 10
address=$(sed -n 's/^pccl-master listening on //p' "$work/master.out")
echo "master at $address"

say "starting 4 peers"
for i in 1 2 3 4; do
  "$BUILD_DIR/examples/ring_member" --master "$address" --name "peer$i" --heartbeat-ms $HEARTBEAT_MS \
    --timeout-ms $TIMEOUT_MS >"$work/peer$i.out" 2>&1 &
  pids+=($!)
done
for i in 1 2 3 4; do wait_for "$work/peer$i.out" "world=4" 20; done
for i in 1 2 3 4; do grep "world=4" "$work/peer$i.out" | tail -n1; done

victim=${pids[3]}
say "SIGKILL peer3 (pid $victim); waiting for the master to notice and the others to re-form"
start=$(date +%s%N)
{ kill -KILL "$victim"; wait "$victim"; } 2>/dev/null || true
for i in 1 2 4; do wait_for "$work/peer$i.out" "world=3" 20; done
end=$(date +%s%N)
for i in 1 2 4; do grep "world=3" "$work/peer$i.out" | tail -n1; done
echo "ring re-formed without peer3 in $(( (end - start) / 1000000 )) ms"

say "stopping: peers leave gracefully, then the master"
for i in 1 2 4; do kill -TERM "${pids[$i]}"; done
for i in 1 2 4; do wait "${pids[$i]}"; tail -n1 "$work/peer$i.out"; done
kill -TERM "${pids[0]}"
wait "${pids[0]}"
pids=()

say "master log"
sed -E 's/^\[[^]]*\] //' "$work/master.log"
say "main job OK"
