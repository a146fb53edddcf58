#!/usr/bin/env bash
# Checks pccl-wanem against theory and against its own settings, one Markdown table per check, and exits
# non-zero when a check fails (docs/wanem.md, "Validation", has the numbers of the last run):
#   rtt       a TCP ping-pong sees the configured RTT
#   rate      one flow fills an unlossy link (>= 90 % of the rate)
#   mathis    one Reno flow under random loss against the Mathis bound MSS/RTT * 1.22/sqrt(p), +-20 %,
#             for 2 RTTs x 2 loss rates (with the loss rate the flow really saw, and the configured one)
#   share     N flows through one bottleneck: Jain's fairness >= 0.9 and >= 90 % of the rate filled,
#             from one sender and from three senders into one receiver's downlink
#   queue     a queue of B bytes adds at most B/rate of delay, and drops begin only when it is full
#   paths     per-path settings (asymmetric rates and delays from a paths file): the probe measures each
#   capacity  the largest K (connections per ring neighbour) at 4 x 250 Mbit/s that stays faithful
set -euo pipefail
usage() {
  cat <<'EOF'
usage: bench/wanem_validate.sh [--part rtt|rate|mathis|share|queue|paths|capacity|all] [--old-wanem PATH]
  pccl-wanem against theory and its own settings; one Markdown table per part; exit 1 when a check
  fails. About 12 minutes for all parts on the 2-core build machine. Needs root and iperf3.
  --old-wanem PATH  also measure the capacity of another pccl-wanem binary (before/after).
  Environment: PCCL_BUILD_DIR (default build).
EOF
}
PART=all
OLD_WANEM=""
while [ $# -gt 0 ]; do
  case "$1" in
    -h | --help) usage; exit 0 ;;
    --part) [ $# -ge 2 ] || { usage >&2; exit 2; }; PART=$2; shift 2 ;;
    --old-wanem) [ $# -ge 2 ] || { usage >&2; exit 2; }; OLD_WANEM=$2; shift 2 ;;
    *) echo "wanem_validate.sh: unknown argument $1" >&2; usage >&2; exit 2 ;;
  esac
done
case "$PART" in rtt | rate | mathis | share | queue | paths | capacity | all) ;; *) usage >&2; exit 2 ;; esac
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WANEM=${PCCL_BUILD_DIR:-$ROOT/build}/bench/pccl-wanem
PY=/usr/bin/python3
command -v iperf3 >/dev/null || { echo "iperf3 is needed: apt-get install iperf3" >&2; exit 2; }
[ -x "$WANEM" ] || { echo "$WANEM not found: build first (bash scripts/build.sh)" >&2; exit 2; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
FAILED=0
check() {  # check NAME CONDITION-TEXT ok|FAIL
  [ "$3" = ok ] || { FAILED=1; echo "FAILED: $1: $2" >&2; }
}
want() { [ "$PART" = all ] || [ "$PART" = "$1" ]; }

# Every rank but 0 runs `iperf3 -c` to rank 0 for $1 s with $2 parallel flows (JSON to $TMP/iperf.RANK).
cat >"$TMP/iperf_rank.sh" <<'EOF'
#!/bin/sh
if [ "$PCCL_WANEM_RANK" = 0 ]; then
  i=1
  while [ $i -lt "$PCCL_WANEM_RANKS" ]; do iperf3 -s -1 -B "$PCCL_WANEM_ADDR" -p $((5200 + i)) >/dev/null 2>&1 & i=$((i + 1)); done
  wait
  exit 0
fi
sleep 1
exec iperf3 -c "$(echo "$PCCL_WANEM_ADDRS" | cut -d, -f1)" -p $((5200 + PCCL_WANEM_RANK)) -t "$1" -O "$3" -P "$2" -J \
  >"$4/iperf.$PCCL_WANEM_RANK"
EOF
chmod +x "$TMP/iperf_rank.sh"
# iperf RANKS SECONDS FLOWS OMIT pccl-wanem-flags...: runs it (with --min-tso-segs 16, as the scenarios
# do), leaves $TMP/iperf.* and $TMP/stats.json.
iperf() {
  local ranks=$1 secs=$2 flows=$3 omit=$4
  shift 4
  rm -f "$TMP"/iperf.* "$TMP/stats.json"
  "$WANEM" --ranks "$ranks" --min-tso-segs 16 --stats "$TMP/stats.json" "$@" -- "$TMP/iperf_rank.sh" "$secs" "$flows" "$omit" "$TMP" \
    >"$TMP/out" 2>&1 || true  # exit 3 (not faithful) still gives a row: its verdict column says so
}
verdict() { $PY -c 'import json,sys; s=json.load(open(sys.argv[1])); print("faithful" if s["faithful"] else "NOT faithful: " + s["run_why"])' "$TMP/stats.json"; }
# Per-flow receiver goodput (Mbit/s) of every iperf3 client, one per line.
flows() { $PY -c '
import json, sys
for f in sys.argv[1:]:
    for s in json.load(open(f))["end"]["streams"]:
        print("%.2f" % (s["receiver"]["bits_per_second"] / 1e6))' "$TMP"/iperf.*; }

if want rtt; then
  echo "### RTT (TCP ping-pong, 20 round trips)"
  echo
  echo "| RTT set | median seen | fastest seen | emulator |"
  echo "|---|---|---|---|"
  for d in 10 40; do
    "$WANEM" --ranks 2 --delay-ms $d --rate-mbit 250 --probe --stats "$TMP/stats.json" >"$TMP/out" 2>&1 || true
    med=$(sed -n 's/.*rtt_ms median \([0-9.]*\).*/\1/p' "$TMP/out")
    min=$(sed -n 's/.*rtt_ms median [0-9.]* min \([0-9.]*\).*/\1/p' "$TMP/out")
    echo "| $((2 * d)) ms | ${med:-?} ms | ${min:-?} ms | $(verdict) |"
    ok=$(awk -v m="${min:-0}" -v r=$((2 * d)) 'BEGIN { if (m >= r && m <= r + 1.5) print "ok"; else print "FAIL" }')
    check "rtt $((2 * d)) ms" "fastest round trip $min ms" "$ok"
  done
  echo
fi

if want rate; then
  echo "### One flow on an unlossy link (iperf3, 20 s, cubic)"
  echo
  echo "| RTT | rate | goodput | of the rate | emulator |"
  echo "|---|---|---|---|---|"
  for d in 10 40; do
    iperf 2 20 1 3 --delay-ms $d --rate-mbit 250 --cc cubic
    g=$(flows | head -1)
    pct=$(awk -v g="${g:-0}" 'BEGIN { printf "%.1f", g / 250 * 100 }')
    echo "| $((2 * d)) ms | 250 Mbit/s | ${g:-?} Mbit/s | $pct % | $(verdict) |"
    check "rate at $((2 * d)) ms" "$pct % of the rate" "$(awk -v p="$pct" 'BEGIN { if (p >= 90) print "ok"; else print "FAIL" }')"
  done
  echo
fi

if want mathis; then
  echo "### One Reno flow under random loss against Mathis (iperf3, 40 s after 5 s)"
  echo
  echo "| RTT | loss set | loss seen | goodput | Mathis (set) | Mathis (seen) | goodput / Mathis (seen) | emulator |"
  echo "|---|---|---|---|---|---|---|---|"
  for cfg in "10 0.2" "10 1" "40 0.2" "40 1"; do
    read -r d p <<<"$cfg"
    iperf 2 40 1 5 --delay-ms "$d" --loss-pct "$p" --rate-mbit 1000 --cc reno
    g=$(flows | head -1)
    # The loss the data direction (rank 1 -> 0) really saw, from the emulator's per-path counts.
    seen=$($PY -c 'import json,sys; s=json.load(open(sys.argv[1])); q=[x for x in s["paths"] if x["src"]==1 and x["dst"]==0][0]; print("%.4f" % (100.0*q["lost_random"]/q["segments"]))' "$TMP/stats.json")
    read -r m_set m_seen ratio <<<"$(awk -v g="${g:-0}" -v r=$((2 * d)) -v p="$p" -v s="$seen" 'BEGIN {
      k = 1448 * 8 / (r / 1000) * 1.22 / 1e6; ms = k / sqrt(p / 100); mo = s > 0 ? k / sqrt(s / 100) : 0
      printf "%.2f %.2f %.2f", ms, mo, (mo>0 ? g / mo : 0) }')"
    echo "| $((2 * d)) ms | $p % | $seen % | ${g:-?} Mbit/s | $m_set | $m_seen | $ratio | $(verdict) |"
    check "mathis $((2 * d)) ms $p %" "goodput / Mathis = $ratio" "$(awk -v x="$ratio" 'BEGIN { if (x >= 0.8 && x <= 1.2) print "ok"; else print "FAIL" }')"
  done
  echo
fi

if want share; then
  echo "### Flows sharing one bottleneck (iperf3, 40 s after 10 s, cubic, 100 Mbit/s, 20 ms RTT, queue 1 BDP)"
  echo
  echo "| flows | bottleneck | per-flow goodput (Mbit/s) | sum | of the rate | Jain | emulator |"
  echo "|---|---|---|---|---|---|---|"
  for cfg in "2 8 one sender's uplink" "4 2 rank 0's downlink, 3 senders x 2 flows"; do
    read -r ranks per what <<<"$cfg"
    iperf "$ranks" 40 "$per" 10 --delay-ms 10 --rate-mbit 100 --cc cubic
    read -r list sum jain <<<"$(flows | awk '{ x[NR] = $1; s += $1; q += $1 * $1 } END {
      l = x[1]; for (i = 2; i <= NR; ++i) l = l "," x[i]; printf "%s %.1f %.3f", l, s, s * s / (NR * q) }')"
    pct=$(awk -v s="$sum" 'BEGIN { printf "%.1f", s }')
    echo "| $((per * (ranks - 1))) | $what | $list | $sum | $pct % | $jain | $(verdict) |"
    check "share ($what)" "Jain $jain, $pct % filled" \
      "$(awk -v j="$jain" -v p="$pct" 'BEGIN { if (j >= 0.9 && p >= 90) print "ok"; else print "FAIL" }')"
  done
  echo
fi

if want queue; then
  echo "### A queue of B bytes adds at most B/rate (one cubic flow, 100 Mbit/s, 20 ms RTT, 20 s)"
  echo
  echo "| queue | B/rate | largest RTT seen by TCP | mean RTT | longest wait in a queue | emptiest queue at a drop | emulator |"
  echo "|---|---|---|---|---|---|---|"
  for q in 125000 250000; do
    iperf 2 20 1 3 --delay-ms 10 --rate-mbit 100 --queue "$q" --cc cubic
    read -r maxrtt meanrtt <<<"$($PY -c 'import json,sys; s=json.load(open(sys.argv[1]))["end"]["streams"][0]["sender"]; print(s["max_rtt"]/1000, s["mean_rtt"]/1000)' "$TMP/iperf.1")"
    read -r wait backlog <<<"$($PY -c 'import json,sys; l=json.load(open(sys.argv[1]))["links"]["uplink"]; print("%.2f %d" % (l["max_queue_delay_ms"], l["min_drop_backlog_bytes"]))' "$TMP/stats.json")"
    bound=$(awk -v q="$q" 'BEGIN { printf "%.1f", q * 8 / 100e6 * 1000 }')
    echo "| $q B | $bound ms | $maxrtt ms | $meanrtt ms | $wait ms | $backlog B | $(verdict) |"
    check "queue $q" "wait $wait ms (bound $bound), RTT $maxrtt ms, drop at $backlog B" "$(awk -v w="$wait" -v b="$bound" \
      -v r="$maxrtt" -v d="$backlog" -v q="$q" 'BEGIN { if (w <= b + 0.01 && r <= 20 + b + 65536 * 8 / 1e5 + 1 && (d < 0 || d >= q - 1600)) print "ok"; else print "FAIL" }')"
  done
  echo
fi

if want paths; then
  echo "### Per-path settings (3 ranks, asymmetric, bench/validate.paths; --probe --probe-rate 8)"
  echo
  echo "| path | RTT set | RTT seen (fastest) | bottleneck | goodput | of the bottleneck | emulator |"
  echo "|---|---|---|---|---|---|---|"
  "$WANEM" --ranks 3 --rate-mbit 200 --cc cubic --paths "$ROOT/bench/validate.paths" --probe --probe-rate 8 \
    --stats "$TMP/stats.json" >"$TMP/out" 2>&1 || true
  v=$(verdict)
  for i in 0 1 2; do
    for j in 0 1 2; do
      [ $i = $j ] && continue
      a=$((i < j ? i : j)) b=$((i < j ? j : i))
      rtt=$(sed -n "s/^probe rank $a <-> $b: rtt_ms median [0-9.]* min \([0-9.]*\) (configured \([0-9.]*\)).*/\1 \2/p" "$TMP/out")
      rate=$(sed -n "s/^probe rank $i -> $j: goodput_mbit \([0-9.]*\) (bottleneck \([0-9.]*\) .*/\1 \2/p" "$TMP/out")
      read -r rseen rset <<<"$rtt"
      read -r g cap <<<"$rate"
      pct=$(awk -v g="${g:-0}" -v c="${cap:-1}" 'BEGIN { printf "%.1f", g / c * 100 }')
      echo "| $i -> $j | ${rset:-?} ms | ${rseen:-?} ms | ${cap:-?} Mbit/s | ${g:-?} Mbit/s | $pct % | $v |"
      check "path $i -> $j" "RTT $rseen ms (set $rset), goodput $pct % of $cap" "$(awk -v s="${rseen:-0}" -v c="${rset:-0}" \
        -v p="$pct" 'BEGIN { if (s >= c && s <= c + 1.5 && p >= 85 && p <= 100) print "ok"; else print "FAIL" }')"
    done
  done
  echo
fi

if want capacity; then
  echo "### Capacity: transatlantic (4 x 250 Mbit/s, 80 ms RTT, 0.01 % loss), pccl 256 MiB, one timed operation"
  echo
  echo "| emulator | K | time | packets | lateness p99 / max | emulator drops | verdict |"
  echo "|---|---|---|---|---|---|---|"
  capacity() {  # capacity NAME WANEM-BINARY K [pccl-wanem flags]: the transatlantic scenario, pccl only
    local name=$1 bin=$2 k=$3
    shift 3
    "$bin" --ranks 4 --delay-ms 40 --loss-pct 0.01 --rate-mbit 250 --cc cubic "$@" -- "$ROOT/bench/wanem_rank.sh" \
      --backend pccl -b 256M -e 256M -n 1 -w 1 --connections "$k" --segment-bytes 262144 >"$TMP/out" 2>&1 || true
    local row t pk p99 dr v
    # This emulator judges the timed phase; the previous one only the whole run.
    row=$(grep -E "phase 0:|whole run:|release lateness" "$TMP/out" | head -1)
    t=$(awk '$1 == "pccl" && $2 == "ring" { printf "%.1f s", $5 / 1e6 }' "$TMP/out")
    pk=$(echo "$row" | sed -n 's/.*: \([0-9]*\) packets.*/\1/p')
    p99=$(echo "$row" | sed -n 's/.*p99 \([0-9]*\) us max \([0-9]*\) us.*/\1 us \/ \2 us/p')
    dr=$(echo "$row" | sed -n 's/.*emulator drops \([0-9]*\) (queue) + \([0-9]*\) (TUN).*/\1 + \2/p; s/.*emulator drops \([0-9]*\),.*/\1/p')
    v=$(echo "$row" | grep -q "NOT FAITHFUL" && echo "NOT faithful" || echo "faithful")
    echo "| $name | $k | ${t:-?} | ${pk:-?} | ${p99:-?} | ${dr:-?} | $v |"
  }
  if [ -n "$OLD_WANEM" ]; then
    for k in 16 32 64; do capacity "previous (tbf on the veths)" "$OLD_WANEM" $k; done
  fi
  for k in 16 32 64; do capacity "this one (--min-tso-segs 16, as the scenarios)" "$WANEM" $k --min-tso-segs 16; done
  capacity "this one, kernel's tcp_min_tso_segs (2)" "$WANEM" 64
  echo
fi
exit $FAILED
