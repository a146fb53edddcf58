#!/usr/bin/env bash
# The master learns which members cannot be dialled (issue 37, docs/concepts.md "Reachability"): on the
# emulator, rank 0 runs a master and a peer, rank 1 a peer behind a firewall, rank 2 one behind a cone NAT
# (tests/wanem_reach_peer.py; every peer in a peer group of its own, so that all of them join). The
# master dials each new member's ring port once: rank 0's answers, ranks 1 and 2's do not. Asserts the
# master's log lines (waited for, with a deadline), the NAT's public address in rank 2's line, and
# MasterStats::unreachable = 2.
# Skipped (exit 77) where namespaces or TUN devices are not available.
#   tests/wanem_reach.sh PATH/TO/BUILD_DIR
set -euo pipefail

usage() {
  cat << USAGE
usage: $0 PATH/TO/BUILD_DIR
  the master's reachability check on the emulator, a firewalled and a NAT'd member (needs root,
  /dev/net/tun, iproute2; exit 77 = skipped). Registered with ctest (tests/CMakeLists.txt).
USAGE
}
. "$(dirname "$0")/wanem_checks.sh"
wanem_scenario_start wanem_reach "$@"

printf 'firewall 1\nnat 2 cone\n' > "$dir/reach.paths"
mkfifo "$dir/go" "$dir/up"
# Held open (read-write: no wait for a reader) for the whole run, so that a line written to it waits for
# a rank that opens it later.
exec 3<> "$dir/go"
PCCL_LOG_LEVEL=info PCCL_LIBRARY="$BUILD_DIR/src/libpccl.so" PYTHONPATH="$ROOT/python" \
  timeout -k 10 180 "$BUILD_DIR/bench/pccl-wanem" --ranks 3 --delay-ms 2 --paths "$dir/reach.paths" \
  -- /usr/bin/python3 "$ROOT/tests/wanem_reach_peer.py" "$dir/go" "$dir/up" > "$dir/run.log" 2>&1 &
run=$!
finish() {
  kill -TERM "$run" 2> /dev/null || true
  wait "$run" 2> /dev/null || true
  rm -rf "$dir"
}
trap finish EXIT
# Wait (deadline 90 s) until the master has judged all three members and every rank is connected (a
# member joins once judged: it may not be connected yet when its verdict is logged).
# (grep returns at its 6th match whether or not more lines come; tail ends with the run.)
if ! timeout 90 bash -c "grep -m 6 -E 'ring port .* (accepts connections|is not reachable)|rank [12] connected|rank 0: every peer accepted' <(tail --pid=$run -n +1 -F '$dir/run.log' 2> /dev/null) > '$dir/verdicts'"; then
  cat "$dir/run.log"
  echo "FAIL: the master did not judge every member's reachability, or a rank did not connect, within 90 s"
  exit 1
fi
printf 'go\ngo\ngo\n' >&3  # one line for each rank
status=0
wait "$run" || status=$?
run=
cat "$dir/run.log"
case $status in
  0 | 3) ;;
  *) echo "FAIL: pccl-wanem exited $status"; exit 1 ;;
esac
fail=0
check() {
  if grep -qE "$1" "$dir/run.log"; then echo "ok: $2"; else echo "FAIL: $2"; fail=1; fi
}
check "ring port 10\.201\.0\.2:[0-9]+ accepts connections from the master; its connection came from 10\.201\.0\.2:" "rank 0 (open) is reachable"
check "ring port 10\.201\.1\.2:[0-9]+ is not reachable from the master \(no answer to a connection\); its connection came from 10\.201\.1\.2:" "rank 1 (firewall) is not reachable"
check "ring port 10\.202\.2\.2:[0-9]+ is not reachable from the master .*its connection came from 10\.202\.2\.2:40000" "rank 2 (cone NAT) is not reachable, seen from its NAT's public side"
check '^stats \{.*"accepted": 3.*"unreachable": 2\}' "MasterStats: 3 accepted, 2 unreachable"
[ "$fail" = 0 ] || exit 1
echo "PASS: the master tells the firewalled and the NAT'd member from the open one"
