#!/bin/sh
# One rank of a pccl-bench run inside a pccl-wanem namespace. Rank 0 also runs pccl-master (so control
# traffic crosses the emulated WAN too). Arguments go to pccl-bench.
#   pccl-wanem --ranks N ... -- bench/wanem_rank.sh [pccl-bench flags]
set -eu
usage() {
  cat <<'EOF'
usage: pccl-wanem --ranks N ... -- bench/wanem_rank.sh [pccl-bench flags...]
  One rank of a pccl-bench run inside a pccl-wanem rank namespace (rank 0 also runs pccl-master on port
  29500). Every flag goes to pccl-bench, which refuses unknown or bad ones before anything starts.
  Environment: PCCL_BUILD_DIR (default build), PCCL_WANEM_* (set by pccl-wanem), PCCL_LOG_LEVEL,
  PCCL_BENCH_MASTER_FLAGS (extra pccl-master flags, e.g. "--probe-budget-ms 1000"), PCCL_BENCH_JOIN_STAGGER_MS
  (rank r starts r times this many ms late, so that the ranks join, and the join-order ring is, in
  rank order), PCCL_BENCH_REGIONS=FILE (each rank declares the region that FILE's 'rank I REGION' line
  gives it, as PCCL_REGION: a pccl-wanem paths file; a PCCL_REGION already set wins).
EOF
}
for arg in "$@"; do
  case "$arg" in -h | --help) usage; exit 0 ;; esac
done
BUILD_DIR=${PCCL_BUILD_DIR:-build}
if ! "$BUILD_DIR/bench/pccl-bench" --check-args "$@"; then
  usage >&2
  exit 2
fi
if [ -z "${PCCL_WANEM_RANK:-}" ] || [ -z "${PCCL_WANEM_ADDRS:-}" ]; then
  echo "wanem_rank.sh: PCCL_WANEM_RANK/PCCL_WANEM_ADDRS are not set: run me under pccl-wanem" >&2
  usage >&2
  exit 2
fi
port=29500
master_host=$(echo "$PCCL_WANEM_ADDRS" | cut -d, -f1)
# --encrypt: the master encrypts too, with the secret the ranks read from PCCL_SECRET_FILE.
security=""
case " $* " in
  *" --encrypt "*) security="--encrypt --secret-file ${PCCL_SECRET_FILE:?--encrypt needs PCCL_SECRET_FILE}" ;;
esac
if [ "$PCCL_WANEM_RANK" = 0 ]; then
  # shellcheck disable=SC2086
  PCCL_LOG_LEVEL=${PCCL_LOG_LEVEL:-error} "$BUILD_DIR/src/pccl-master" --listen "$PCCL_WANEM_ADDR:$port" \
    --heartbeat-ms 1000 --peer-timeout-ms 30000 $security ${PCCL_BENCH_MASTER_FLAGS:-} >/dev/null &
  master=$!
  trap 'kill $master 2>/dev/null; wait $master 2>/dev/null || true' EXIT INT TERM
fi
if [ -n "${PCCL_BENCH_REGIONS:-}" ] && [ -z "${PCCL_REGION:-}" ]; then
  region=$(awk -v r="$PCCL_WANEM_RANK" '{ sub(/#.*/, "") } $1 == "rank" && $2 == r { print $3; exit }' "$PCCL_BENCH_REGIONS")
  if [ -n "$region" ]; then
    PCCL_REGION=$region
    export PCCL_REGION
  fi
fi
if [ -n "${PCCL_BENCH_JOIN_STAGGER_MS:-}" ]; then
  sleep "$(awk -v r="$PCCL_WANEM_RANK" -v ms="$PCCL_BENCH_JOIN_STAGGER_MS" 'BEGIN { print r * ms / 1000 }')"
fi
PCCL_LOG_LEVEL=${PCCL_LOG_LEVEL:-error} "$BUILD_DIR/bench/pccl-bench" --master "$master_host:$port" \
  --world "$PCCL_WANEM_RANKS" "$@"
