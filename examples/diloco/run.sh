#!/usr/bin/env bash
# DiLoCo over pccl on one machine: 4 workers float32, 4 workers int8, the 1-worker baseline with the
# same inner steps per worker, and an elastic run where one worker is killed mid-run and replaced by a
# late joiner that receives the run's state through pccl's shared-state sync.
# Writes logs, CSVs and diloco.png to $OUT_DIR (default build-diloco/diloco-run).
#
#   examples/diloco/run.sh            (env: OUTER_STEPS=10 H=20 BUILD_DIR=... OUT_DIR=... CORPUS=...)
set -euo pipefail
usage() {
  cat <<'EOF'
usage: examples/diloco/run.sh
  DiLoCo over pccl on this machine (a few minutes; installs libtorch and the corpus when missing):
  4 workers float32, 4 workers int8, the 1-worker baseline, and an elastic run (a worker killed, a late
  joiner receives the state); logs, CSVs and diloco.png in OUT_DIR.
  Environment: OUTER_STEPS (default 10), H (inner steps, default 20), BUILD_DIR (default build-diloco),
  OUT_DIR (default BUILD_DIR/diloco-run), CORPUS (default /usr/share/games/fortunes).
EOF
}
case "${1:-}" in
  "") ;;
  -h | --help) usage; exit 0 ;;
  *) echo "run.sh: unknown argument $1 (settings are environment variables)" >&2; usage >&2; exit 2 ;;
esac
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build-diloco}
OUT_DIR=${OUT_DIR:-$BUILD_DIR/diloco-run}
OUTER_STEPS=${OUTER_STEPS:-10}
H=${H:-20}
CORPUS=${CORPUS:-/usr/share/games/fortunes}  # Debian package `fortunes` (+ fortunes-min): ~2.5 MB of text
WORKERS=4

# ---- dependencies (apt-get, only what is missing) ---------------------------------------------------
bash "$ROOT/scripts/deps.sh"   # pccl's own build dependencies
bash "$ROOT/scripts/deps.sh" libtorch-dev libopenblas0-pthread python3-matplotlib fortunes fortunes-min

# ---- build ------------------------------------------------------------------------------------------
cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DPCCL_BUILD_DILOCO=ON > /dev/null
ninja -C "$BUILD_DIR" -j2 pccl-master diloco
DILOCO=$BUILD_DIR/examples/diloco/diloco
mkdir -p "$OUT_DIR"
rm -f "$OUT_DIR"/*.log "$OUT_DIR"/*.csv

PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2> /dev/null || true; done; }
trap cleanup EXIT

wait_for_line() {  # wait_for_line FILE PATTERN [SECONDS]: blocks until a line of FILE matches, or fails
  if ! timeout "${3:-120}" grep -q -m1 -e "$2" <(tail -n +1 -F --pid=$$ "$1" 2> /dev/null); then
    echo "timed out after ${3:-120} s waiting for '$2' in $1"
    exit 1
  fi
}

start_master() {  # sets ADDR and MASTER_PID
  "$BUILD_DIR/src/pccl-master" --listen 127.0.0.1:0 > "$OUT_DIR/master-$1.log" 2>&1 &
  MASTER_PID=$!
  PIDS+=("$MASTER_PID")
  wait_for_line "$OUT_DIR/master-$1.log" "^pccl-master listening on " 10
  ADDR=$(sed -n 's/^pccl-master listening on //p' "$OUT_DIR/master-$1.log")
}

COMMON=(--data "$CORPUS" -H "$H" --batch 16 --seq-len 64)

worker() {  # worker NAME INDEX [extra args...]: starts one worker in the background, sets WPID
  local name=$1 index=$2
  shift 2
  "$DILOCO" "${COMMON[@]}" --master "$ADDR" --workers $WORKERS --worker-index "$index" \
    --log "$OUT_DIR/$name-w$index.csv" "$@" > "$OUT_DIR/$name-w$index.log" 2>&1 &
  WPID=$!
  PIDS+=("$WPID")
}

run_variant() {  # run_variant NAME QUANT
  local name=$1 quant=$2 pids=()
  start_master "$name"
  for i in $(seq 0 $((WORKERS - 1))); do
    worker "$name" "$i" --outer-steps "$OUTER_STEPS" --quant "$quant"
    pids+=("$WPID")
  done
  for p in "${pids[@]}"; do wait "$p"; done
  kill "$MASTER_PID"
  grep '^outer_step=' "$OUT_DIR/$name-w0.log" | tail -1
}


# Elastic: worker 3 is SIGKILLed after outer step KILL_AT; the others retry with 3 (updateTopology, a sync
# that moves nothing, the same all-reduce again), then a replacement joins with --late-join: the sync
# after the updateTopology that admits it hands it theta, the outer momentum and the step counter, so it
# logs the others' weight hash from the step it joined at and stops with them after OUTER_STEPS.
run_elastic() {
  local kill_at=$((OUTER_STEPS / 3)) pids=()
  start_master elastic
  for i in $(seq 0 $((WORKERS - 1))); do
    worker elastic "$i" --outer-steps "$OUTER_STEPS"
    pids+=("$WPID")
  done
  local victim=$WPID
  wait_for_line "$OUT_DIR/elastic-w3.log" "^outer_step=$kill_at "
  kill -9 "$victim"
  wait "$victim" 2> /dev/null || true
  echo "elastic: killed worker 3 after outer step $kill_at"
  wait_for_line "$OUT_DIR/elastic-w0.log" "^outer_step=$((kill_at + 1)) .* world=3 "
  mv "$OUT_DIR/elastic-w3.log" "$OUT_DIR/elastic-w3-killed.log"
  mv "$OUT_DIR/elastic-w3.csv" "$OUT_DIR/elastic-w3-killed.csv"
  worker elastic 3 --outer-steps "$OUTER_STEPS" --late-join
  echo "elastic: started a replacement worker 3 (--late-join)"
  for p in "${pids[@]:0:3}" "$WPID"; do wait "$p"; done
  kill "$MASTER_PID"
  grep -h 'all-reduce failed' "$OUT_DIR"/elastic-w*.log | sed 's/ (.*//' | sort | uniq -c || true
  grep -h '^worker=3 sync\|^worker=3 adopted' "$OUT_DIR/elastic-w3.log" || true
  grep -h '^worker=[0-3] done' "$OUT_DIR"/elastic-w[0-3].log || true
  sed -n 's/^outer_step=\([0-9]*\) .*/\1/p' "$OUT_DIR/elastic-w3.log" | head -1 | sed 's/^/elastic: the replacement joined at outer step /'
  grep '^outer_step=' "$OUT_DIR/elastic-w0.log" | tail -1
  grep '^outer_step=' "$OUT_DIR/elastic-w3.log" | tail -1
}

start=$(date +%s)
echo "== DiLoCo, $WORKERS workers, float32 all-reduce"; run_variant float32 none
echo "== DiLoCo, $WORKERS workers, int8 all-reduce";    run_variant int8 int8
echo "== baseline: 1 worker, no pccl, $((OUTER_STEPS * H)) AdamW steps"
"$DILOCO" "${COMMON[@]}" --workers 1 --outer-steps "$OUTER_STEPS" --log "$OUT_DIR/baseline-w0.csv" \
  > "$OUT_DIR/baseline-w0.log" 2>&1
grep '^outer_step=' "$OUT_DIR/baseline-w0.log" | tail -1
echo "== elastic: kill a worker mid-run, start a replacement"; run_elastic

# Every worker of a run holds byte-identical weights after every outer step it took part in (the elastic
# run: the killed worker up to its death, the replacement from the step it joined at).
for name in float32 int8 elastic; do
  n=$(cat "$OUT_DIR"/$name-w*.log | sed -n 's/^outer_step=\([0-9]*\) .*hash=\(.*\)$/\1 \2/p' | sort -u | wc -l)
  echo "$name: $n distinct (outer step, weight hash) pairs over its workers (want $((OUTER_STEPS + 1)))"
done
/usr/bin/python3 "$ROOT/examples/diloco/plot.py" "$OUT_DIR" "$OUT_DIR/diloco.png"
echo "done in $(( $(date +%s) - start )) s: $OUT_DIR/diloco.png"
