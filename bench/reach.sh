#!/usr/bin/env bash
# Members that cannot be dialled (issue 37, docs/concepts.md "Reachability"), measured on the europe
# scenario (4 ranks, ~20 ms RTT, 250 Mbit/s per rank, 64 MiB all-reduces, pccl alone: Gloo cannot run
# where a rank cannot be dialled): open, ranks 2 and 3 behind firewalls, ranks 2 and 3 behind cone NATs,
# rank 3 behind a symmetric NAT, and "relayed" (ranks 1 and 2 firewalled, rank 3 behind a symmetric NAT:
# two ring links run through rank 0), ROUNDS rounds in that order (so that the variants alternate), one
# JSON file per run; then the time a join takes (bench/join_time.py) for an open rank, a firewalled one
# that declared inbound=false, a firewalled one that did not, a cone-NAT'd and a symmetric-NAT'd one.
#   bench/reach.sh [--rounds N] [--out DIR] [--variants "open relayed ..."] [--no-join]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=${PCCL_BUILD_DIR:-$ROOT/build}
ROUNDS=3
OUT=$ROOT/docs/benchmarks/reach
VARIANTS="open firewall cone symmetric relayed"
JOIN=1
usage() {
  cat << USAGE
usage: bench/reach.sh [--rounds N] [--out DIR] [--variants LIST] [--no-join]
  The europe scenario (bench/europe.sh, pccl alone, 64 MiB) open, with 2 firewalled ranks, 2 cone-NAT'd
  ranks, 1 symmetric-NAT'd rank, and 3 closed ranks (two links relayed by rank 0), N rounds (default 3)
  in turn, JSON into DIR (default docs/benchmarks/reach/); LIST: which of "open firewall cone symmetric
  relayed" (default all); then (unless --no-join) join times per kind of rank (bench/join_time.py),
  DIR/join.json. Needs root.
USAGE
}
while [ $# -gt 0 ]; do
  case "$1" in
    -h | --help) usage; exit 0 ;;
    --rounds) [ $# -ge 2 ] || { usage >&2; exit 2; }; ROUNDS=$2; shift 2 ;;
    --out) [ $# -ge 2 ] || { usage >&2; exit 2; }; OUT=$2; shift 2 ;;
    --variants) [ $# -ge 2 ] || { usage >&2; exit 2; }; VARIANTS=$2; shift 2 ;;
    --no-join) JOIN=0; shift ;;
    *) echo "reach.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
mkdir -p "$OUT"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '' > "$tmp/open.paths"
printf 'firewall 2\nfirewall 3\n' > "$tmp/firewall.paths"
printf 'nat 2 cone\nnat 3 cone\n' > "$tmp/cone.paths"
printf 'nat 3 symmetric\n' > "$tmp/symmetric.paths"
printf 'firewall 1\nfirewall 2\nnat 3 symmetric\n' > "$tmp/relayed.paths"
for ((round = 1; round <= ROUNDS; ++round)); do
  for variant in $VARIANTS; do
    [ -f "$tmp/$variant.paths" ] || { echo "reach.sh: unknown variant '$variant'" >&2; exit 2; }
    echo "== round $round: $variant"
    PCCL_WANEM_FLAGS="--paths $tmp/$variant.paths" bash "$ROOT/bench/europe.sh" --backend pccl \
      --json "$OUT/europe-$variant-run$round.json" --json-field "reach=$variant" || echo "(exit $?)"
  done
done
[ "$JOIN" = 1 ] || exit 0
# Join times: rank 1 open, rank 2 firewalled and declared, rank 3 firewalled and not; then rank 2 behind
# a cone NAT, rank 3 behind a symmetric NAT (neither declared).
: > "$OUT/join.json"
for spec in "firewall:2" "nat:"; do
  kind=${spec%%:*}
  declared=${spec#*:}
  if [ "$kind" = firewall ]; then printf 'firewall 2\nfirewall 3\n' > "$tmp/join.paths"; else
    printf 'nat 2 cone\nnat 3 symmetric\n' > "$tmp/join.paths"; fi
  for ((round = 1; round <= ROUNDS; ++round)); do
    PCCL_LIBRARY="$BUILD_DIR/src/libpccl.so" "$BUILD_DIR/bench/pccl-wanem" --ranks 4 --delay-ms 10 --rate-mbit 250 \
      --paths "$tmp/join.paths" -- /usr/bin/python3 "$ROOT/bench/join_time.py" --declared "$declared" \
      --stagger-s 7 2> /dev/null | grep '^{' | sed "s/}\$/, \"paths\": \"$kind\", \"round\": $round}/" >> "$OUT/join.json" || true
  done
done
cat "$OUT/join.json"
