#!/usr/bin/env bash
# The README's main job, on loopback:
#  1. pccl-bench starts a master and 4 rank processes that run float32 sum all-reduces from 4 KiB to
#     64 MiB with pccl and, in the same processes, with Gloo; every element is verified; time and
#     throughput per size and backend;
#  2. pccl-master plus 4 ring_member processes loop all-reduces; one is SIGKILLed mid-run, the others
#     see pcclPeerLost, re-form the ring without it and carry on with the right answer.
set -euo pipefail
usage() {
  cat <<'EOF'
usage: scripts/main-job.sh
  Builds pccl (scripts/build.sh), then on loopback: pccl-bench --ranks 4 (pccl and Gloo, every element
  verified), and pccl-master + 4 ring_member peers looping all-reduces while one is SIGKILLed.
  Environment: PCCL_BUILD_DIR (default build) and those of scripts/build.sh.
EOF
}
case "${1:-}" in
  "") ;;
  -h | --help) usage; exit 0 ;;
  *) echo "main-job.sh: unknown argument $1" >&2; usage >&2; exit 2 ;;
esac
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

say "1. all-reduce: 4 ranks on loopback, float32 sum, 4 KiB .. 64 MiB, pccl and Gloo in the same run, every element verified"
PCCL_LOG_LEVEL=error "$BUILD_DIR/bench/pccl-bench" --ranks 4 -b 4K -e 64M -f 4 -n 5 -w 2 --connections 4 --backend both

say "2. elastic ring: pccl-master + 4 peers looping all-reduces of 1 Mi floats; one peer is SIGKILLed"
PCCL_LOG_LEVEL=info "$BUILD_DIR/src/pccl-master" --listen 127.0.0.1:0 --heartbeat-ms $HEARTBEAT_MS \
  --peer-timeout-ms $TIMEOUT_MS >"$work/master.out" 2>"$work/master.log" &
pids+=($!)
wait_for "$work/master.out" "listening on" 10
address=$(sed -n 's/^pccl-master listening on //p' "$work/master.out")
echo "master at $address"
for i in 1 2 3 4; do
  PCCL_LOG_LEVEL=error "$BUILD_DIR/examples/ring_member" --master "$address" --name "peer$i" \
    --heartbeat-ms $HEARTBEAT_MS --timeout-ms $TIMEOUT_MS --allreduce 1048576 >"$work/peer$i.out" 2>&1 &
  pids+=($!)
done
# The first peer is admitted alone; the others join at its next topology update.
for i in 1 2 3 4; do wait_for "$work/peer$i.out" "allreduce [0-9]+ ok world=4" 30; done
for i in 1 2 3 4; do grep "world=4" "$work/peer$i.out" | tail -n1; done

victim=${pids[3]}
say "SIGKILL peer3 (pid $victim) while the ring is busy"
start=$(date +%s%N)
{ kill -KILL "$victim"; wait "$victim"; } 2>/dev/null || true
for i in 1 2 4; do wait_for "$work/peer$i.out" "allreduce [0-9]+ ok world=3" 30; done
end=$(date +%s%N)
for i in 1 2 4; do grep -E "error|ring epoch" "$work/peer$i.out" | head -n 2; grep "world=3" "$work/peer$i.out" | head -n1; done
echo "survivors were reducing correctly again, with world=3, $(( (end - start) / 1000000 )) ms after the kill"
if grep -h "wrong=[1-9]" "$work"/peer*.out; then echo "main job: WRONG RESULTS" >&2; exit 1; fi

say "stopping: peers leave gracefully, then the master"
for i in 1 2 4; do kill -TERM "${pids[$i]}"; done
for i in 1 2 4; do wait "${pids[$i]}"; grep " stats " "$work/peer$i.out"; tail -n1 "$work/peer$i.out"; done
kill -TERM "${pids[0]}"
wait "${pids[0]}"
pids=()
for i in 1 2 4; do echo "peer$i: $(grep -c ' ok ' "$work/peer$i.out") all-reduces, all verified"; done

say "master log"
sed -E 's/^\[[^]]*\] //' "$work/master.log" | grep -v "collective" | head -n 40
say "main job OK"
