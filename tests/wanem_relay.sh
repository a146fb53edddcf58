#!/usr/bin/env bash
# Relayed ring links (issue 37, docs/concepts.md "Reachability"), on the emulator with
# tests/relay_peer (rank 0 runs the master only):
#   death    ranks 1 and 2 open, 3, 4 and 5 firewalled: no ring keeps the closed ranks apart, so ring
#            links run through relays (ranks 1 and 2). Once every peer finished a call, the test
#            SIGKILLs a relay: the survivors get PeerLost, update, and the rebuilt ring relays through
#            the open rank left; every later call succeeds, none is wrong.
#   tamper   an encrypted run, rank 1 open, ranks 2 and 3 firewalled (their link is relayed by rank 1,
#            a hostile relay that flips a byte): the receiver's frame fails authentication, the call
#            fails on every peer, and no result is wrong.
#   replay   the same, the relay sending a chunk twice.
# Skipped (exit 77) where namespaces or TUN devices are not available.
#   tests/wanem_relay.sh PATH/TO/BUILD_DIR
set -euo pipefail

usage() {
  cat << USAGE
usage: $0 PATH/TO/BUILD_DIR
  relayed ring links on the emulator: a relay that dies, a relay that tampers with or replays bytes
  (needs root, /dev/net/tun, iproute2; exit 77 = skipped). Registered with ctest.
USAGE
}
. "$(dirname "$0")/wanem_checks.sh"
wanem_scenario_start wanem_relay "$@"

wanem_background_run
# emulate NAME RANKS PATHS relay_peer-flags...: starts the run in the background ($run), output in $dir/NAME.log
emulate() {
  local name=$1 ranks=$2 paths=$3
  shift 3
  printf '%b' "$paths" > "$dir/$name.paths"
  PCCL_LOG_LEVEL=info timeout -k 10 240 "$BUILD_DIR/bench/pccl-wanem" --ranks "$ranks" --delay-ms 5 --rate-mbit 200 \
    --paths "$dir/$name.paths" -- "$BUILD_DIR/tests/relay_peer" --master 10.201.0.2:17600 --world $((ranks - 1)) "$@" \
    > "$dir/$name.log" 2>&1 &
  run=$!
}
settle() {  # waits for the run, prints its log
  local name=$1 status=0
  wait "$run" || status=$?
  run=
  echo "---- $name (exit $status)"
  cat "$dir/$name.log"
}
await() {  # await FILE PATTERN COUNT SECONDS: COUNT lines of FILE match PATTERN within SECONDS
  # (tail ends with the run; grep returns at the COUNTth match, whether or not more lines come)
  timeout "$4" bash -c "grep -m $3 -E '$2' <(tail --pid=$run -n +1 -F '$1' 2> /dev/null) > /dev/null"
}

# -- a relay dies ---------------------------------------------------------------------------------
emulate death 6 'firewall 3\nfirewall 4\nfirewall 5\n' --ops 12 --count 1048576
log=$dir/death.log
if ! await "$log" '^rank [1-5]: op 1 ok' 5 120; then
  echo "FAIL: death: the peers did not all finish their second call within 120 s"
  fail=1
else
  # A peer that relays says so in its log lines: "[time pccl INFO  PID ring] epoch=E: relaying ...".
  victim=$(grep -E 'ring\] epoch=[0-9]+: relaying the ring link' "$log" | tail -n 1 | awk '{ print $4 }')
  echo "killing relay pid $victim"
  kill -KILL "$victim"
fi
settle death
for r in 1 2 3 4 5; do
  if grep -qE "^rank $r: op 1 ok" "$log" && ! grep -qE "^rank $r: done" "$log"; then
    killed=$r
  fi
done
echo "the killed rank: ${killed:-none}"
survivors=0
for r in 1 2 3 4 5; do
  [ "$r" = "${killed:-}" ] && continue
  check "^rank $r: op [0-9]+ failed: .*[Pp]eer" "$log" "death: rank $r saw the relay's loss as a failed call"
  check "^rank $r: done, 4 peers" "$log" "death: rank $r finished every call on the rebuilt ring"
  survivors=$((survivors + 1))
done
if [ "$survivors" != 4 ]; then echo "FAIL: death: $survivors survivors (4 expected)"; fail=1; fi
relays=$(grep -E 'ring\] epoch=[0-9]+: relaying the ring link' "$log" | awk '{ print $4 }' | sort -u | wc -l)
if [ "$relays" -ge 2 ]; then echo "ok: death: the rebuild relayed through another rank ($relays relays in all)"; else
  echo "FAIL: death: only $relays relay process(es) seen"; fail=1; fi
if grep -q "WRONG" "$log"; then echo "FAIL: death: a wrong result"; fail=1; fi

# -- a hostile relay ------------------------------------------------------------------------------
for mode in 1 2; do
  name=tamper
  [ "$mode" = 2 ] && name=replay
  PCCL_SECRET=relay-test-secret emulate $name 4 'firewall 2\nfirewall 3\n' --ops 3 --count 1048576 --encrypt \
    --tamper "$mode" --tamper-rank 1
  settle $name
  log=$dir/$name.log
  check "failed authentication \(tampered, replayed, reordered, or another key\)" "$log" \
    "$name: the receiver detected the relay's change"
  for r in 1 2 3; do
    check "^rank $r: op 0 failed: " "$log" "$name: rank $r's call failed"
  done
  if grep -q "WRONG" "$log"; then echo "FAIL: $name: a wrong result"; fail=1; else echo "ok: $name: no wrong result"; fi
done

[ "$fail" = 0 ] || exit 1
echo "PASS: a dead relay is replaced, a hostile one detected"
