#!/usr/bin/env bash
# pccl-wanem's network faults (docs/wanem.md, "Faults") on a real TCP connection between 2 rank
# namespaces: rank 0 writes each fault into the --control FIFO and checks what it does (a blackout holds a
# round trip and the connection goes on; a loss burst loses nothing the application sees; a route change
# shows in the round trips; a reset fails the connection with ECONNRESET and a new one works; a blackout
# scheduled `at phase+300ms` follows a start mark written as pccl-bench writes them:
# tests/wanem_faults_peer.py); then the --stats file must count each fault and its effects. A --faults
# file with a bad line is refused with its file:line. Skipped (exit 77) without namespaces or TUN.
#   tests/wanem_faults.sh PATH/TO/pccl-wanem
set -euo pipefail
case "${1:-}" in
  -h | --help) echo "usage: $0 PATH/TO/pccl-wanem   (needs root, /dev/net/tun; exit 77 = skipped)"; exit 0 ;;
  -*) echo "wanem_faults: unknown option $1; usage: $0 PATH/TO/pccl-wanem" >&2; exit 2 ;;
esac
[ $# -eq 1 ] || { echo "usage: $0 PATH/TO/pccl-wanem" >&2; exit 2; }
WANEM=$1
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/wanem_checks.sh"
wanem_require_namespaces

dir=$(mktemp -d "${TMPDIR:-/tmp}/pccl-wanem-faults.XXXXXX")
trap 'rm -rf "$dir"' EXIT

# ---- a bad --faults line is refused with file:line and a reason, before anything starts --------------
printf 'at 1s down 0 for 1s\nat 2s down 7 for 1s\n' > "$dir/bad.faults"
status=0
"$WANEM" --ranks 2 --faults "$dir/bad.faults" -- true 2> "$dir/bad.err" || status=$?
cat "$dir/bad.err"
[ $status -eq 2 ] || { echo "FAIL: a bad --faults file gave exit $status, not 2"; exit 1; }
grep -q "bad.faults:2: rank 7 does not exist" "$dir/bad.err" || { echo "FAIL: the refusal does not name bad.faults:2 and why"; exit 1; }

# ---- every fault on a live connection ------------------------------------------------------------------
printf '# waits for the peer script'"'"'s start mark\nat phase+300ms down 0 -> 1 for 2s\n' > "$dir/run.faults"
status=0
timeout 300 "$WANEM" --ranks 2 --delay-ms 10 --rate-mbit 100 --control "$dir/control" --faults "$dir/run.faults" \
  --stats "$dir/stats.json" \
  -- /usr/bin/python3 "$HERE/wanem_faults_peer.py" "$dir/control" 17345 > "$dir/out" 2> "$dir/err" || status=$?
cat "$dir/out" "$dir/err"
[ $status -eq 0 ] || [ $status -eq 3 ] || { echo "FAIL: the run exited $status"; exit 1; }
/usr/bin/python3 - "$dir/stats.json" <<'PY'
import json, sys
f = json.load(open(sys.argv[1]))["faults"]
print("faults:", f)
want = {"down": 2, "burst": 1, "reset": 1, "path": 1}
bad = [k for k, v in want.items() if f[k] != v]
bad += [k for k in ("down_segments", "burst_segments", "resets_sent") if f[k] <= 0]
if bad:
    sys.exit(f"FAIL: the stats do not count {bad}")
PY
[ ! -e "$dir/control" ] || { echo "FAIL: the --control FIFO pccl-wanem made was left behind"; exit 1; }
grep -q "fault at .* s: reset 0 -> 1" "$dir/err" || { echo "FAIL: the applied faults are not logged"; exit 1; }
echo "PASS"
