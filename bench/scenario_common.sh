# Shared by the scenario scripts (sourced; they set SCENARIO and SCENARIO_HELP first). Answers --help,
# finds the binaries, parses --json FILE, has pccl-bench check the other flags before anything starts,
# runs pccl-bench either on loopback or inside pccl-wanem, adds the network's parameters to every JSON
# row, and marks each row with the emulator's verdict over its own timed operations (wanem_mark.py).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=${PCCL_BUILD_DIR:-$ROOT/build}
export PCCL_BUILD_DIR=$BUILD_DIR

scenario_usage() {
  cat <<EOF
usage: bench/$SCENARIO.sh ${SCENARIO_ARGS:-}[--json FILE] [pccl-bench flags...]
$SCENARIO_HELP
  --json FILE  write the rows as JSON, with the scenario's parameters in every row
  Every other flag goes to pccl-bench (later flags override the scenario's defaults; see
  \$PCCL_BUILD_DIR/bench/pccl-bench --help); pccl-bench refuses unknown or bad ones before anything starts.
  Environment: PCCL_BUILD_DIR (default build/, where the binaries are), PCCL_WANEM_FLAGS (extra
  pccl-wanem flags, after the scenario's: a later flag overrides, e.g. "--min-tso-segs 0").
EOF
}
JSON=""
PASS=()
while [ $# -gt 0 ]; do
  case "$1" in
    -h | --help) scenario_usage; exit 0 ;;
    --json)
      [ $# -ge 2 ] || { echo "$0: --json needs a FILE" >&2; scenario_usage >&2; exit 2; }
      JSON=$2; shift 2 ;;
    --json=*) JSON=${1#--json=}; shift ;;
    *) PASS+=("$1"); shift ;;
  esac
done
# --encrypt: a fresh secret for the run, in a file every rank (and the master) reads.
for a in "${PASS[@]+"${PASS[@]}"}"; do
  if [ "$a" = "--encrypt" ] && [ -z "${PCCL_SECRET_FILE:-}" ]; then
    PCCL_SECRET_FILE=$(mktemp)
    head -c 32 /dev/urandom | base64 > "$PCCL_SECRET_FILE"
    export PCCL_SECRET_FILE
    trap 'rm -f "$PCCL_SECRET_FILE"' EXIT
  fi
done
for bin in bench/pccl-bench bench/pccl-wanem src/pccl-master; do
  [ -x "$BUILD_DIR/$bin" ] || { echo "$0: $BUILD_DIR/$bin not found: build first (bash scripts/build.sh)" >&2; exit 2; }
done
if ! "$BUILD_DIR/bench/pccl-bench" --check-args "${PASS[@]}"; then
  scenario_usage >&2
  exit 2
fi

# run_wanem RANKS RATE_MBIT ONE_WAY_MS LOSS_PCT CC [PATHS_FILE] -- pccl-bench flags...
# pccl-bench writes the rows to a file beside --json FILE; bench/wanem_mark.py gives each row the
# emulator's verdict over that row's own timed operations (pccl-wanem --stats "phases"), then the file
# replaces FILE. A run that writes no rows leaves FILE as it was (and says so).
run_wanem() {
  local ranks=$1 rate=$2 delay=$3 loss=$4 cc=$5 paths=${6:-}
  shift 6
  local stats json_args=() rtt rows=""
  stats=$(mktemp)
  rtt=$(awk -v d="$delay" 'BEGIN { print 2 * d }')
  if [ -n "$JSON" ]; then
    rows="$JSON.rows.$$"
    rm -f "$rows"
    json_args=(--json "$rows" --json-field "rate_mbit=$rate" --json-field "rtt_ms=$rtt" \
      --json-field "loss_pct=$loss" --json-field "cc=$cc" --json-field "scenario=$SCENARIO")
    [ -n "$paths" ] && json_args+=(--json-field "paths=$(basename "$paths")")
  fi
  # --min-tso-segs 16: senders hand the emulator trains of up to 16 segments instead of 2, which keeps
  # 4 x 250 Mbit/s with 64 connections per neighbour within what 2 cores can emulate faithfully
  # (docs/wanem.md, "Capacity"). PCCL_WANEM_FLAGS adds or overrides emulator flags.
  # shellcheck disable=SC2206
  local wanem_args=(--ranks "$ranks" --delay-ms "$delay" --loss-pct "$loss" --rate-mbit "$rate" --cc "$cc"
    --min-tso-segs 16 --stats "$stats" ${PCCL_WANEM_FLAGS:-})
  [ -n "$paths" ] && wanem_args+=(--paths "$paths")
  local status=0
  "$BUILD_DIR/bench/pccl-wanem" "${wanem_args[@]}" -- "$ROOT/bench/wanem_rank.sh" "${json_args[@]}" "$@" || status=$?
  if [ -n "$rows" ] && [ -f "$rows" ]; then
    /usr/bin/python3 "$ROOT/bench/wanem_mark.py" "$stats" "$rows" || { [ $status -ne 0 ] || status=1; }
    mv -f "$rows" "$JSON"
  elif [ -n "$JSON" ]; then
    echo "$0: the run wrote no rows; $JSON left as it was" >&2
    rm -f "$rows"
  fi
  rm -f "$stats"
  [ $status -eq 3 ] && echo "$0: the emulator was not faithful for part of the run: each row's \"emulator_faithful\" says whether its own timed operations were" >&2
  return $status
}
