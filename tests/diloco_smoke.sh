#!/bin/sh
# diloco smoke test: pccl-master + 2 DiLoCo workers (tiny model, 5 outer steps, H=5), and a third worker
# that joins late (--late-join) once worker 0 has logged outer step 1. Worker 0 waits before outer step 3
# until the joiner is in the ring (--await-world 3 --await-step 3), so it joins at step 1 or 2, never
# after. Worker 1 does not wait: it is usually already in the all-reduce of step 3 when worker 0 votes to
# admit the joiner, so it meets the joiner's sync from the retry path of its all-reduce (TopologyChanged,
# updateTopology, sync, the same all-reduce again); otherwise both admit it at the top of an outer step.
# Asserts:
#   (a) every worker that logged an outer step logged the same weight hash for it (a joiner's first line
#       is the step it joined at: the weights it received), so all hold byte-identical weights;
#   (b) the joiner's first logged step is >= 1 and matches the others' (same hash), it received the
#       state through the shared-state sync (rx_bytes > 0, all 3 tensors), the others received nothing,
#       and it took part (world=3) in every later step up to the last;
#   (c) the held-out loss went down.
# Waits on events only: the master's address and worker 0's first outer step are read from FIFOs.
# DILOCO_FRAGMENTS=P DILOCO_EXTRA="--fragments P ..." runs Streaming DiLoCo instead: a logged step is then
# one fragment's sync (P per 5 outer steps' worth of inner steps), and the loss is the outer weights'.
#   diloco_smoke.sh PCCL_MASTER DILOCO [CORPUS]   (corpus default: /usr/share/common-licenses)
set -eu
usage() {
  cat <<'EOF'
usage: tests/diloco_smoke.sh PCCL_MASTER DILOCO [CORPUS]
  DiLoCo smoke test: pccl-master + 2 workers + a late joiner; identical weights after every outer step,
  the joiner receives the state, the loss goes down. Registered with ctest (examples/diloco).
EOF
}
case "${1:-}" in
  -h | --help) usage; exit 0 ;;
  -*) echo "diloco_smoke: unknown option $1" >&2; usage >&2; exit 2 ;;
esac
if [ $# -lt 2 ] || [ $# -gt 3 ]; then usage >&2; exit 2; fi
MASTER_BIN=$1
DILOCO=$2
DATA=${3:-/usr/share/common-licenses}
STEPS=5
FRAGMENTS=${DILOCO_FRAGMENTS:-1}
LINES=$((STEPS * FRAGMENTS))  # logged steps after the first line
DIR=$(mktemp -d)
PIDS=
cleanup() {
  for p in $PIDS; do kill "$p" 2>/dev/null || true; done
  rm -rf "$DIR"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

fail() {
  echo "FAIL: $*"
  for f in "$DIR"/master.log "$DIR"/w0.log "$DIR"/w1.log "$DIR"/w2.log; do
    [ -f "$f" ] && { echo "---- $f"; cat "$f"; }
  done
  exit 1
}

# sh -c "$UNTIL" sh PATTERN: copies stdin to stdout up to and including the first line matching the case
# pattern PATTERN; exit 1 at EOF without one. `read` takes one byte at a time from a pipe, so what
# follows that line stays in the FIFO for the drain. Run under `timeout`: the deadline of the event.
# shellcheck disable=SC2016
UNTIL='while IFS= read -r line; do printf "%s\n" "$line"; case $line in $1) exit 0;; esac; done; exit 1'

start=$(date +%s)

# ---- master: its output goes through a FIFO; the address line is the event we wait for --------------
mkfifo "$DIR/master.fifo"
"$MASTER_BIN" --listen 127.0.0.1:0 > "$DIR/master.fifo" 2>&1 &
MASTER_PID=$!
PIDS="$MASTER_PID"
exec 3< "$DIR/master.fifo"
if ! timeout 30 sh -c "$UNTIL" sh 'pccl-master listening on *' <&3 > "$DIR/master.log"; then
  fail "pccl-master did not print its address"
fi
cat <&3 >> "$DIR/master.log" &
PIDS="$PIDS $!"
exec 3<&-
ADDR=$(sed -n 's/^pccl-master listening on //p' "$DIR/master.log")
[ -n "$ADDR" ] || fail "no address in the master's output"

COMMON="--master $ADDR --workers 3 --data $DATA --outer-steps $STEPS -H 5 --d-model 32 --layers 1 --heads 2 \
--seq-len 32 --batch 8 --eval-batches 2 ${DILOCO_EXTRA:-}"

# ---- workers 0 and 1 start together; worker 0's output goes through a FIFO ---------------------------
mkfifo "$DIR/w0.fifo"
# shellcheck disable=SC2086
"$DILOCO" $COMMON --worker-index 0 --min-world 2 --await-world 3 --await-step 3 > "$DIR/w0.fifo" 2>&1 &
W0=$!
PIDS="$PIDS $W0"
exec 4< "$DIR/w0.fifo"
# shellcheck disable=SC2086
"$DILOCO" $COMMON --worker-index 1 --min-world 2 > "$DIR/w1.log" 2>&1 &
W1=$!
PIDS="$PIDS $W1"
if ! timeout 60 sh -c "$UNTIL" sh 'outer_step=1 *' <&4 > "$DIR/w0.log"; then
  fail "worker 0 did not log outer step 1"
fi
cat <&4 >> "$DIR/w0.log" &
DRAIN0=$!
PIDS="$PIDS $DRAIN0"
exec 4<&-

# ---- worker 2 joins the run in progress -------------------------------------------------------------
# shellcheck disable=SC2086
"$DILOCO" $COMMON --worker-index 2 --late-join > "$DIR/w2.log" 2>&1 &
W2=$!
PIDS="$PIDS $W2"

wait "$W0" || fail "worker 0 exited non-zero"
wait "$W1" || fail "worker 1 exited non-zero"
wait "$W2" || fail "worker 2 (late joiner) exited non-zero"
wait "$DRAIN0" || true
cat "$DIR/w0.log" "$DIR/w1.log" "$DIR/w2.log"

# ---- (a) byte-identical weights after every outer step, across every log that has it -----------------
hashes() { sed -n 's/^outer_step=\([0-9]*\) .*hash=\([0-9a-f]*\)$/\1 \2/p' "$1"; }
for i in 0 1 2; do hashes "$DIR/w$i.log" > "$DIR/h$i"; done
for i in 0 1; do
  [ "$(wc -l < "$DIR/h$i")" -eq $((LINES + 1)) ] || fail "worker $i did not log outer steps 0..$LINES"
done
split=$(sort -u "$DIR/h0" "$DIR/h1" "$DIR/h2" | cut -d' ' -f1 | uniq -d)
[ -z "$split" ] || fail "weight hashes differ between workers at outer step(s): $split"

# ---- (b) the late joiner -----------------------------------------------------------------------------
JOIN=$(head -n1 "$DIR/h2" | cut -d' ' -f1)
[ -n "$JOIN" ] || fail "the late joiner logged no outer step"
if [ "$JOIN" -lt 1 ] || [ "$JOIN" -gt 2 ]; then fail "the late joiner's first step is $JOIN, not 1 or 2"; fi
grep -qx "$(head -n1 "$DIR/h2")" "$DIR/h0" || fail "the late joiner's first step $JOIN differs from worker 0's"
[ "$(wc -l < "$DIR/h2")" -eq $((LINES - JOIN + 1)) ] || fail "the late joiner did not log steps $JOIN..$LINES"
# theta, the velocity, the step counter (and the schedule's phase, where it differs from a new worker's 0)
grep -q "^worker=2 sync revision=$JOIN rx_bytes=[1-9][0-9]* .* keys=[34] " "$DIR/w2.log" ||
  fail "the late joiner did not receive the state at revision $JOIN"
for i in 0 1; do
  grep -q "^worker=$i sync .* rx_bytes=[1-9]" "$DIR/w$i.log" && fail "worker $i received shared state"
done
grep -q "^worker=[01] sync revision=$JOIN .* tx_bytes=[1-9]" "$DIR/w0.log" "$DIR/w1.log" ||
  fail "neither worker 0 nor 1 sent the state at revision $JOIN"
for i in 0 1 2; do
  after=$(grep -c "^outer_step=\([0-9]*\) .* world=3 " "$DIR/w$i.log" || true)
  [ "$after" -ge $((LINES - JOIN)) ] || fail "worker $i: only $after outer steps with world=3 after step $JOIN"
done

# ---- (c) loss goes down ------------------------------------------------------------------------------
loss() { sed -n "s/^outer_step=$2 .* loss=\([0-9.]*\) .*/\1/p" "$1"; }
L0=$(loss "$DIR/w0.log" 0)
LN=$(loss "$DIR/w0.log" $LINES)
awk -v a="$L0" -v b="$LN" 'BEGIN { exit !(b < a) }' || fail "loss did not go down ($L0 -> $LN)"
[ "$(loss "$DIR/w2.log" $LINES)" = "$LN" ] || fail "the late joiner's final loss differs from worker 0's"

if grep -q '^worker=1 all-reduce failed' "$DIR/w1.log"; then PATH1="its all-reduce's retry path"; else PATH1="the top of a step"; fi
echo "diloco smoke: 3 workers (one joined at outer step $JOIN; worker 1 met it from $PATH1) hold identical" \
  "weights after every outer step, loss $L0 -> $LN, $(( $(date +%s) - start )) s"
echo "1 passed, 0 failed"
