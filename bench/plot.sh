#!/usr/bin/env bash
# PNG plots from the benchmark JSON in DIR (default docs/benchmarks): throughput against size
# (loopback) and against the number of connections K (WAN scenarios), with Gloo and the link bound.
set -euo pipefail
usage() {
  cat <<'EOF'
usage: bench/plot.sh [DIR]
  PNG plots (gnuplot) from the benchmark JSON in DIR (default docs/benchmarks): throughput against
  size (loopback) and against the connections K (WAN scenarios), with Gloo and the link bound.
EOF
}
case "${1:-}" in
  -h | --help) usage; exit 0 ;;
  -*) echo "plot.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
esac
[ $# -le 1 ] || { echo "plot.sh: one argument at most" >&2; usage >&2; exit 2; }
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=${1:-$ROOT/docs/benchmarks}
command -v gnuplot >/dev/null || { echo "gnuplot is needed: apt-get install gnuplot-nox" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# field FILE KEY...: one line per JSON row with the values of KEYs (rows are one per line).
field() {
  local file=$1
  shift
  { grep '"backend"' "$file" || true; } | while read -r row; do
    local line=""
    for k in "$@"; do
      v=$(echo "$row" | sed -n "s/.*\"$k\": \"\{0,1\}\([^,\"}]*\).*/\1/p")
      line="$line $v"
    done
    echo "$line"
  done
}

# Throughput against size, loopback, per rank count.
for f in "$DIR"/loopback-*ranks.json; do
  [ -f "$f" ] || continue
  name=$(basename "$f" .json)
  field "$f" backend algorithm bytes algbw_gbps >"$tmp/rows"
  awk '$1 == "pccl"' "$tmp/rows" >"$tmp/pccl"
  awk '$1 == "gloo" && $2 == "ring"' "$tmp/rows" >"$tmp/gring"
  awk '$1 == "gloo" && $2 == "ring_chunked"' "$tmp/rows" >"$tmp/gchunk"
  gnuplot <<GP
set terminal pngcairo size 800,500 noenhanced
set output "$DIR/$name.png"
set title "$name: all-reduce throughput against size (float32 sum)"
set logscale x 2
set xlabel "bytes"
set format x "%.0b %BB"
set ylabel "algbw (GB/s)"
set key top left
set grid
plot "$tmp/pccl" using 3:4 with linespoints title "pccl", \
     "$tmp/gring" using 3:4 with linespoints title "gloo ring", \
     "$tmp/gchunk" using 3:4 with linespoints title "gloo ring_chunked"
GP
done

# Throughput against connections, per WAN scenario: pccl for each K, Gloo's best, the link bound.
for scenario in europe transatlantic mixed; do
  ls "$DIR/$scenario"-*.json >/dev/null 2>&1 || continue
  : >"$tmp/k"
  : >"$tmp/g"
  for f in "$DIR/$scenario"-*.json; do field "$f" backend algorithm connections bytes algbw_gbps rate_mbit ranks; done >"$tmp/all"
  awk '$1 == "pccl" { print $3, $5 * 8 }' "$tmp/all" | sort -n >"$tmp/k"
  gbest=$(awk '$1 == "gloo" && $5 * 8 > b { b = $5 * 8 } END { print b + 0 }' "$tmp/all")
  bound=$(awk 'NR == 1 { n = $7; print $6 / 1000 / (2 * (n - 1) / n) }' "$tmp/all")
  gnuplot <<GP
set terminal pngcairo size 800,500 noenhanced
set output "$DIR/$scenario-connections.png"
set title "$scenario: one all-reduce against K (pccl) beside Gloo and the link bound"
set logscale x 2
set xrange [0.8:100]
set yrange [0:*]
set xlabel "connections per ring neighbour (K)"
set ylabel "algbw (Gbit/s)"
set key bottom right
set grid
plot "$tmp/k" using 1:2 with linespoints lw 2 title "pccl", \
     $gbest with lines dt 2 title "gloo (best algorithm)", \
     $bound with lines dt 3 title "link bound 2(N-1)/N"
GP
done
ls "$DIR"/*.png
