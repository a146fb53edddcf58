#!/usr/bin/env bash
# Checks pccl-wanem against what it was asked for: the RTT a TCP ping-pong sees, and the throughput
# of one TCP flow (iperf3) against the configured rate, and on lossy paths against the Mathis estimate
# rate <= MSS / RTT * 1.22 / sqrt(p). Prints one line per configuration (recorded in docs/wanem.md).
set -euo pipefail
usage() {
  cat <<'EOF'
usage: bench/wanem_validate.sh
  pccl-wanem against its settings: the RTT of a TCP ping-pong and one iperf3 flow per configuration
  (against the rate and the Mathis estimate); one Markdown table row each. Needs root and iperf3.
  Environment: PCCL_BUILD_DIR (default build), SECONDS_PER_TEST (default 15).
EOF
}
case "${1:-}" in
  "") ;;
  -h | --help) usage; exit 0 ;;
  *) echo "wanem_validate.sh: unknown argument $1" >&2; usage >&2; exit 2 ;;
esac
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WANEM=${PCCL_BUILD_DIR:-$ROOT/build}/bench/pccl-wanem
command -v iperf3 >/dev/null || { echo "iperf3 is needed: apt-get install iperf3 (or bash scripts/deps.sh --bench)" >&2; exit 2; }
SECONDS_PER_TEST=${SECONDS_PER_TEST:-15}

measure() {  # one-way-ms loss-pct rate-mbit cc
  local out
  out=$("$WANEM" --ranks 2 --delay-ms "$1" --loss-pct "$2" --rate-mbit "$3" --cc "$4" --probe -- sh -c '
    if [ "$PCCL_WANEM_RANK" = 0 ]; then exec iperf3 -s -1 -B "$PCCL_WANEM_ADDR" >/dev/null 2>&1; fi
    sleep 1; iperf3 -c "$(echo "$PCCL_WANEM_ADDRS" | cut -d, -f1)" -t '"$SECONDS_PER_TEST"' -f m | grep receiver' 2>&1) ||
    true  # exit 3 (not faithful) still gives a row: its verdict column says so
  local rtt mbit verdict
  rtt=$(echo "$out" | sed -n 's/.*rtt_ms median \([0-9.]*\).*/\1/p')
  mbit=$(echo "$out" | awk '/receiver/ { for (i = 1; i <= NF; ++i) if ($i == "Mbits/sec") print $(i - 1) }')
  verdict=$(echo "$out" | { grep -o "faithful\|NOT FAITHFUL" || true; } | tail -1)
  local mathis
  mathis=$(awk -v r="$(awk -v d="$1" 'BEGIN{print 2*d}')" -v p="$2" 'BEGIN { if (p == 0) print "-"; else printf "%.1f", 1448 * 8 / (r / 1000) * 1.22 / sqrt(p / 100) / 1e6 }')
  printf "| %s ms | %s %% | %s | %s | %s ms | %s Mbit/s | %s | %s |\n" "$(awk -v d="$1" 'BEGIN{print 2*d}')" "$2" \
    "$3" "$4" "${rtt:-?}" "${mbit:-?}" "$mathis" "${verdict:-?}"
}

echo "| RTT set | loss | rate (Mbit/s) | cc | RTT seen | one flow (iperf3) | Mathis (Mbit/s) | emulator |"
echo "|---|---|---|---|---|---|---|---|"
measure 10 0 250 cubic
measure 40 0 250 cubic
measure 40 0 1000 cubic
measure 40 0.01 250 cubic
measure 40 0.1 250 cubic
measure 40 0.01 250 bbr
