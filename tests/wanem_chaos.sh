#!/usr/bin/env bash
# WAN chaos (issue 35; docs/algorithms.md §6, "Network faults"): 4 ranks of tests/chaos_peer under
# pccl-wanem (10 ms one way, 100 Mbit/s; rank 0 also runs pccl-master) loop all-reduces while this script
# breaks things under them, from a seeded random schedule (PCCL_CHAOS_SEED, printed):
#   phase 1  network faults that heal within the peer timeout (2 s; 3.2 s with TCP's allowance and a
#            heartbeat), fed to pccl-wanem's --control FIFO: blackouts of a rank or a path (0.3..1.2 s),
#            loss bursts (10..25 % for 1..2 s), resets of every connection between two ranks (ring and
#            control connections alike) and route changes (5..40 ms one way)
#   phase 2  a peer SIGKILLed (its rank starts a new one), another frozen for longer than the timeout, and
#            a third rank blacked out for 5 s (longer than the timeout: removed, it joins again after)
#   quiet    until every peer runs in one ring of 4 again
# Asserts: no wrong element and no split (every peer of an operation holds the same bytes) over the whole
# run; no operation, vote or join failed in phase 1 (every fault there healed within the timeout); and
# every peer back in one ring of 4 at the end (no hang). Never a speed. Exit 77 (skipped) where
# namespaces or TUN devices are not available.
#   tests/wanem_chaos.sh PATH/TO/BUILD_DIR
set -euo pipefail

usage() {
  cat <<USAGE
usage: $0 PATH/TO/BUILD_DIR
  pccl-wanem test: 4 chaos peers loop all-reduces under random network faults, a kill and a freeze: no
  wrong or split result, no operation failed by a fault that healed within the timeout, all back in one
  ring (needs root, /dev/net/tun, iproute2; exit 77 = skipped). PCCL_CHAOS_SEED picks the schedule.
  Registered with ctest (tests/CMakeLists.txt).
USAGE
}
. "$(dirname "$0")/wanem_checks.sh"
wanem_scenario_start wanem-chaos "$@"
seed=${PCCL_CHAOS_SEED:-$((RANDOM * 32768 + RANDOM))}
echo "seed $seed (PCCL_CHAOS_SEED=$seed repeats this schedule)"
ranks=4

cat > "$dir/rank.sh" <<'RANK'
#!/bin/sh
# One rank: rank 0 runs the master too; the chaos peer is started again when it dies, until $DIR/stop.
set -u
if [ "$PCCL_WANEM_RANK" = 0 ]; then
  "$BUILD/src/pccl-master" --listen "$PCCL_WANEM_ADDR:29500" --heartbeat-ms 200 --peer-timeout-ms 2000 \
    > "$DIR/master.log" 2>&1 &
  echo $! > "$DIR/master.pid"
fi
master=$(echo "$PCCL_WANEM_ADDRS" | cut -d, -f1):29500
while [ ! -e "$DIR/stop" ]; do
  "$BUILD/tests/chaos_peer" --master "$master" --log "$DIR/peer$PCCL_WANEM_RANK.log" --count 20000 \
    --quiet-file "$DIR/quiet" --listen "$PCCL_WANEM_ADDR:0" >> "$DIR/out$PCCL_WANEM_RANK.txt" 2>> "$DIR/err$PCCL_WANEM_RANK.txt" &
  echo $! > "$DIR/peer$PCCL_WANEM_RANK.pid"
  wait $! || true
done
if [ "$PCCL_WANEM_RANK" = 0 ]; then kill "$(cat "$DIR/master.pid")" 2> /dev/null || true; fi
RANK
chmod +x "$dir/rank.sh"

# The schedule, from the seed: one line per fault, with the pause after it (seconds).
/usr/bin/python3 - "$seed" "$ranks" > "$dir/schedule" <<'PY'
import random, sys
r = random.Random(int(sys.argv[1]))
n = int(sys.argv[2])
for _ in range(14):
    a, b = r.sample(range(n), 2)
    kind = r.choice(["down", "down-path", "burst", "reset", "path"])
    if kind == "down":
        line = "down %d for %dms" % (r.randrange(n), r.randint(300, 1200))
    elif kind == "down-path":
        line = "down %d -> %d for %dms" % (a, b, r.randint(300, 1200))
    elif kind == "burst":
        line = "burst %d -> %d loss=%d for %dms" % (a, b, r.randint(10, 25), r.randint(1000, 2000))
    elif kind == "reset":
        line = "reset %d -> %d" % (a, b)
    else:
        line = "path %d %d delay=%d" % (a, b, r.randint(5, 40))
    print("%s|%.1f" % (line, r.uniform(1.0, 2.5)))
kill, freeze, dark = r.sample(range(1, n), 3)
print("kill %d|0" % kill)
print("freeze %d|0" % freeze)
print("dark %d|0" % dark)
PY

now_ms() { date +%s%3N; }
# Waits until `cond` (a shell command) holds, at most $2 s; 1 on the deadline.
wait_for() {
  local cond=$1 deadline=$(($(date +%s) + $2))
  until eval "$cond"; do
    [ "$(date +%s)" -lt "$deadline" ] || return 1
    sleep 0.2
  done
}
every_peer() {  # $1: a grep pattern every peer's log holds
  local r
  for r in $(seq 0 $((ranks - 1))); do grep -q "$1" "$dir/peer$r.log" 2> /dev/null || return 1; done
}
ok_count() {
  local c
  c=$(grep -c "^ok " "$dir/peer$1.log" 2> /dev/null) || true
  echo "${c:-0}"
}
all_progressed() {  # every peer completed two operations since `before`
  local r
  for r in $(seq 0 $((ranks - 1))); do [ "$(ok_count "$r")" -ge $((before[r] + 2)) ] || return 1; done
}
all_quiet() {  # every peer's last report: its operations run in one ring of 4
  local r
  for r in $(seq 0 $((ranks - 1))); do [ "$(tail -n1 "$dir/out$r.txt" 2> /dev/null)" = "quiet-ok world=4" ] || return 1; done
}

status=0
DIR=$dir BUILD=$BUILD_DIR timeout 400 "$BUILD_DIR/bench/pccl-wanem" --ranks $ranks --delay-ms 10 --rate-mbit 100 \
  --control "$dir/control" --stats "$dir/stats.json" -- "$dir/rank.sh" > "$dir/wanem.out" 2> "$dir/wanem.err" &
wanem=$!
fail() {
  echo "FAIL: $1"
  touch "$dir/stop"
  for f in "$dir"/peer*.pid; do [ -e "$f" ] && kill -CONT "$(cat "$f")" 2> /dev/null && kill "$(cat "$f")" 2> /dev/null; done
  wait $wanem || true
  tail -5 "$dir"/peer*.log "$dir/wanem.err" || true
  exit 1
}
wait_for '[ -p "$dir/control" ]' 30 || fail "pccl-wanem made no control FIFO"
exec 7> "$dir/control"
wait_for 'every_peer "^ok .* world=4 "' 120 || fail "the 4 peers never ran in one ring"

# Phase 1: network faults only.
t1=$(now_ms)
while IFS='|' read -r fault pause; do
  case $fault in kill* | freeze* | dark*) continue ;; esac
  echo "$fault" >&7
  sleep "$pause"
done < "$dir/schedule"
# Every fault has healed (the longest lasts 2 s); each peer completes two more operations.
sleep 2
before=()
for r in $(seq 0 $((ranks - 1))); do before[r]=$(ok_count "$r"); done
wait_for all_progressed 60 ||
  fail "a peer made no progress after the network faults"
t2=$(now_ms)

# Phase 2: a kill, a freeze and a blackout longer than the timeout.
victim=$(grep '^kill' "$dir/schedule" | cut -d' ' -f2 | cut -d'|' -f1)
frozen=$(grep '^freeze' "$dir/schedule" | cut -d' ' -f2 | cut -d'|' -f1)
dark=$(grep '^dark' "$dir/schedule" | cut -d' ' -f2 | cut -d'|' -f1)
kill -KILL "$(cat "$dir/peer$victim.pid")"
kill -STOP "$(cat "$dir/peer$frozen.pid")"
echo "down $dark for 5s" >&7
sleep 4
kill -CONT "$(cat "$dir/peer$frozen.pid")"

# Quiet: everyone back in one ring of 4.
touch "$dir/quiet"
wait_for all_quiet 120 ||
  fail "the peers did not come back to one ring of 4"
touch "$dir/stop"
for f in "$dir"/peer*.pid; do kill "$(cat "$f")" 2> /dev/null || true; done
exec 7>&-
wait $wanem || status=$?
case $status in 0 | 3 | 143) ;; *) cat "$dir/wanem.err"; echo "FAIL: pccl-wanem exited $status"; exit 1 ;; esac

/usr/bin/python3 - "$dir" "$ranks" "$t1" "$t2" <<'PY'
import collections, glob, json, sys
d, n, t1, t2 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
hashes = collections.defaultdict(set)
ok = wrong = 0
phase1_errors = []
for r in range(n):
    for line in open("%s/peer%d.log" % (d, r)):
        f = line.split()
        kv = dict(x.split("=", 1) for x in f[1:] if "=" in x)
        if f[0] == "ok":
            ok += 1
            wrong += int(kv["wrong"])
            hashes[(kv["epoch"], kv["seq"], kv["world"])].add(kv["hash"])
        elif f[0] == "err" and t1 <= int(kv.get("t", 0)) <= t2:
            phase1_errors.append("rank %d: %s" % (r, line.strip()))
split = sum(1 for h in hashes.values() if len(h) > 1)
faults = json.load(open(d + "/stats.json"))["faults"]
print("%d successful operations (%d distinct), wrong %d, split %d; faults applied: %s" % (ok, len(hashes), wrong, split, faults))
for e in phase1_errors:
    print("phase 1:", e)
assert wrong == 0 and split == 0, (wrong, split)
assert not phase1_errors, "an operation failed under faults that healed within the timeout"
assert sum(faults[k] for k in ("down", "burst", "reset", "path")) == 15, faults
print("ok")
PY
