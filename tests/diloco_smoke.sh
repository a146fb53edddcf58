#!/bin/sh
# diloco smoke test: pccl-master + 2 DiLoCo workers (tiny model, 3 outer steps, H=5). Asserts that both
# workers logged the same weight hash after every outer step and that the held-out loss went down.
#   diloco_smoke.sh PCCL_MASTER DILOCO [CORPUS]   (corpus default: /usr/share/common-licenses)
set -eu
MASTER_BIN=$1
DILOCO=$2
DATA=${3:-/usr/share/common-licenses}
DIR=$(mktemp -d)
MASTER_PID=
cleanup() {
  [ -n "$MASTER_PID" ] && kill "$MASTER_PID" 2>/dev/null || true
  rm -rf "$DIR"
}
trap cleanup EXIT

"$MASTER_BIN" --listen 127.0.0.1:0 > "$DIR/master.log" 2>&1 &
MASTER_PID=$!
ADDR=
for _ in $(seq 100); do
  ADDR=$(sed -n 's/^pccl-master listening on //p' "$DIR/master.log")
  [ -n "$ADDR" ] && break
  sleep 0.1
done
[ -n "$ADDR" ] || { echo "FAIL: pccl-master did not start"; cat "$DIR/master.log"; exit 1; }

for i in 0 1; do
  "$DILOCO" --master "$ADDR" --workers 2 --worker-index $i --data "$DATA" --outer-steps 3 -H 5 \
    --d-model 32 --layers 1 --heads 2 --seq-len 32 --batch 8 --eval-batches 2 > "$DIR/w$i.log" 2>&1 &
  eval "W$i=\$!"
done
wait "$W0" || { echo "FAIL: worker 0 exited non-zero"; cat "$DIR/w0.log"; exit 1; }
wait "$W1" || { echo "FAIL: worker 1 exited non-zero"; cat "$DIR/w1.log"; exit 1; }
cat "$DIR/w0.log" "$DIR/w1.log"

hashes() { sed -n 's/^outer_step=\([0-9]*\) .*hash=\([0-9a-f]*\)$/\1 \2/p' "$1"; }
hashes "$DIR/w0.log" > "$DIR/h0"
hashes "$DIR/w1.log" > "$DIR/h1"
for f in "$DIR/w0.log" "$DIR/w1.log"; do
  [ "$(grep -c '^outer_step=[1-3] .* world=2 ' "$f")" -eq 3 ] ||
    { echo "FAIL: $f: not 3 outer steps with world=2"; exit 1; }
done
cmp -s "$DIR/h0" "$DIR/h1" || { echo "FAIL: weight hashes differ"; diff "$DIR/h0" "$DIR/h1"; exit 1; }

loss() { sed -n "s/^outer_step=$2 .* loss=\([0-9.]*\) .*/\1/p" "$1"; }
L0=$(loss "$DIR/w0.log" 0)
L3=$(loss "$DIR/w0.log" 3)
awk -v a="$L0" -v b="$L3" 'BEGIN { exit !(b < a) }' || { echo "FAIL: loss did not go down ($L0 -> $L3)"; exit 1; }
echo "diloco smoke: identical weights after every outer step, loss $L0 -> $L3"
echo "1 passed, 0 failed"
