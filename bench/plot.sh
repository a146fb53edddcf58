#!/usr/bin/env bash
# PNG plots from the benchmark JSON in DIR (default docs/benchmarks): throughput against size
# (loopback) and against the number of connections K (WAN scenarios), with Gloo and the link bound.
# Only float32 all-reduces without quantization, zstd, encryption or --sync are plotted, and on the
# WANs only rows the emulator carried faithfully ("emulator_faithful": true).
set -euo pipefail
usage() {
  cat <<'EOF'
usage: bench/plot.sh [DIR]
  PNG plots (gnuplot) from the benchmark JSON in DIR (default docs/benchmarks): throughput against
  size (loopback, DIR/loopback-Nranks.json) and against the connections K (WAN scenarios,
  DIR/{europe,transatlantic,mixed}-*.json), with Gloo and the link bound. Plotted: float32 rows
  without quantization, zstd, encryption or --sync; on the WANs only rows marked
  "emulator_faithful": true. Points are medians, bars span the slowest to the fastest iteration
  (time_max_s .. time_min_s; a row without them counts as one iteration at its median time).
EOF
}
case "${1:-}" in
  -h | --help) usage; exit 0 ;;
  -*) echo "plot.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
esac
[ $# -le 1 ] || { echo "plot.sh: one argument at most" >&2; usage >&2; exit 2; }
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=${1:-$ROOT/docs/benchmarks}
command -v gnuplot >/dev/null || { echo "gnuplot is needed: apt-get install gnuplot-nox (or bash scripts/deps.sh --bench)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
written=()

# field FILE KEY...: one line per JSON row with the values of KEYs, "-" for a key the row lacks (rows are
# one per line, as pccl-bench and bench/wanem_mark.py write them).
field() {
  local file=$1
  shift
  { grep '"backend"' "$file" || true; } | while read -r row; do
    local line=""
    for k in "$@"; do
      v=$(echo "$row" | sed -n "s/.*\"$k\": \"\{0,1\}\([^,\"}]*\).*/\1/p")
      line="$line ${v:--}"
    done
    echo "$line"
  done
}

# The keys plain_rows and spread read, in this order, after the caller's own keys.
ROW_KEYS="quant dtype sync_sources encrypt compress algbw_gbps time_s time_min_s time_max_s"
# plain_rows FIRST: keeps the rows of float32 all-reduces without quantization, zstd, encryption or
# --sync; their ROW_KEYS start at field FIRST.
plain_rows() {
  awk -v f="$1" '$f == "none" && $(f + 1) == "float32" && $(f + 2) == "-" && $(f + 3) != "true" &&
                 ($(f + 4) == "-" || $(f + 4) == 0)'
}
# spread FIRST SCALE: prints algbw, and algbw at the slowest and at the fastest iteration (the median's
# when the row has no spread), times SCALE; then the caller's fields before FIRST.
spread() {
  awk -v f="$1" -v scale="$2" '{
    bw = $(f + 5) * scale; t = $(f + 6)
    lo = ($(f + 8) == "-" || $(f + 8) <= 0) ? bw : bw * t / $(f + 8)
    hi = ($(f + 7) == "-" || $(f + 7) <= 0) ? bw : bw * t / $(f + 7)
    line = bw " " lo " " hi
    for (i = 1; i < f; ++i) line = line " " $i
    print line
  }'
}

# Throughput against size, loopback, per rank count: median, bars from the slowest to the fastest
# iteration where the rows have them.
for f in "$DIR"/loopback-*ranks.json; do
  [ -f "$f" ] || continue
  name=$(basename "$f" .json)
  # shellcheck disable=SC2086
  field "$f" backend algorithm bytes $ROW_KEYS | plain_rows 4 | spread 4 1 >"$tmp/rows"
  # columns: algbw lo hi backend algorithm bytes
  awk '$4 == "pccl" { print $6, $1, $2, $3 }' "$tmp/rows" | sort -n >"$tmp/pccl"
  awk '$4 == "gloo" && $5 == "ring" { print $6, $1, $2, $3 }' "$tmp/rows" | sort -n >"$tmp/gring"
  awk '$4 == "gloo" && $5 == "ring_chunked" { print $6, $1, $2, $3 }' "$tmp/rows" | sort -n >"$tmp/gchunk"
  plots=()
  [ -s "$tmp/pccl" ] && plots+=("\"$tmp/pccl\" using 1:2:3:4 with yerrorlines title \"pccl\"")
  [ -s "$tmp/gring" ] && plots+=("\"$tmp/gring\" using 1:2:3:4 with yerrorlines title \"gloo ring\"")
  [ -s "$tmp/gchunk" ] && plots+=("\"$tmp/gchunk\" using 1:2:3:4 with yerrorlines title \"gloo ring_chunked\"")
  if [ ${#plots[@]} -eq 0 ]; then
    echo "plot.sh: $f: no float32 rows without quantization: no plot" >&2
    continue
  fi
  gnuplot <<GP
set terminal pngcairo size 800,500 noenhanced
set output "$DIR/$name.png"
set title "$name: float32 all-reduce throughput (bars: slowest..fastest iteration)"
set logscale x 2
set xlabel "bytes"
set format x "%.0b %BB"
set ylabel "algbw (GB/s)"
set key top left
set grid
plot $(IFS=,; echo "${plots[*]}")
GP
  written+=("$DIR/$name.png")
done

# Throughput against connections, per WAN scenario, from the rows the emulator carried faithfully:
# pccl's float32 all-reduces (no quantization, zstd, encryption or --sync) per K, the median over the
# rows at that K with bars from the slowest to the fastest iteration among them; Gloo's best; the link
# bound.
for scenario in europe transatlantic mixed; do
  ls "$DIR/$scenario"-*.json >/dev/null 2>&1 || continue
  for f in "$DIR/$scenario"-*.json; do
    # shellcheck disable=SC2086
    field "$f" backend algorithm connections rate_mbit ranks emulator_faithful $ROW_KEYS
  done | awk '$6 == "true"' | plain_rows 7 | spread 7 8 >"$tmp/all"
  # columns: gbit lo hi backend algorithm K rate ranks faithful
  awk '$4 == "pccl" { print $6, $1, $2, $3 }' "$tmp/all" | sort -k1,1n -k2,2g | awk '
    function flush() { if (n) print k, (n % 2 ? y[(n + 1) / 2] : (y[n / 2] + y[n / 2 + 1]) / 2), lo, hi }
    $1 != k { flush(); k = $1; n = 0; lo = $3; hi = $4 }
    { y[++n] = $2; if ($3 < lo) lo = $3; if ($4 > hi) hi = $4 }
    END { flush() }' >"$tmp/k"
  if [ ! -s "$tmp/k" ]; then
    echo "plot.sh: $scenario: no faithful float32 pccl rows: no plot" >&2
    continue
  fi
  gbest=$(awk '$4 == "gloo" && $1 > b { b = $1 } END { print b + 0 }' "$tmp/all")
  bound=$(awk 'NR == 1 { n = $8; print $7 / 1000 / (2 * (n - 1) / n) }' "$tmp/all")
  plots=("\"$tmp/k\" using 1:2:3:4 with yerrorlines lw 2 title \"pccl (median; bars: slowest..fastest iteration)\"")
  [ "$gbest" != 0 ] && plots+=("$gbest with lines dt 2 title \"gloo (best algorithm)\"")
  plots+=("$bound with lines dt 3 title \"link bound 2(N-1)/N\"")
  gnuplot <<GP
set terminal pngcairo size 800,500 noenhanced
set output "$DIR/$scenario-connections.png"
set title "$scenario: one all-reduce against K (pccl) beside Gloo and the link bound (faithful rows)"
set logscale x 2
set xrange [0.8:100]
set yrange [0:*]
set xlabel "connections per ring neighbour (K)"
set ylabel "algbw (Gbit/s)"
set key bottom right
set grid
plot $(IFS=,; echo "${plots[*]}")
GP
  written+=("$DIR/$scenario-connections.png")
done
[ ${#written[@]} -eq 0 ] || printf '%s\n' "${written[@]}"
