#!/usr/bin/env bash
# Regions: 9 ranks in three regions of unequal size (bench/regions.paths: 4 in eu, 3 in us, 2 in asia):
# the flat ring against the two-level all-reduce (docs/algorithms.md §12). Each rank declares its
# region; pcclOptimizeTopology installs the best ring first; one pccl-wanem run per algorithm (the
# algorithm and the gather limit are a communicator's settings, fixed when it is created).
#   bench/regions.sh [--json FILE] [--algorithms flat,two-level] [--sizes FROM:TO] [--paths FILE] [pccl-bench flags]
SCENARIO=regions
SCENARIO_ARGS="[--algorithms LIST] [--sizes FROM:TO] [--paths FILE] "
SCENARIO_HELP="  Regions: 9 ranks in pccl-wanem, three regions of unequal size (bench/regions.paths): 4 in eu, 3 in
  us, 2 in asia; 500 Mbit/s access links and 0.5 ms one way inside a region; across regions every pair
  of peers has its own 50 Mbit/s path, 40 ms one way eu-us, 70 ms eu-asia, 80 ms us-asia; no loss,
  cubic. Each rank declares its region (PCCL_REGION); --optimize-topology measures the links and
  installs the best ring (8 rounds, about 40 s) before the sizes; 16 connections per link, 1 warm-up
  and 3 timed operations per size.
  --algorithms LIST  comma-separated, run in this order, one pccl-wanem run each (default flat,two-level):
                     flat       the library's flat choice (--algorithm flat): the gather up to its default
                                limit (1 MiB across hosts), the ring above it, 4 KiB .. 256 MiB
                     ring       the flat ring at every size, 4 KiB .. 256 MiB (PCCL_GATHER_BYTES=0)
                     gather     the gather, 4 KiB .. 256 KiB (PCCL_GATHER_BYTES=4194304: 8 inputs within
                                the 4 MiB eager limit)
                     two-level  --algorithm hierarchical: two levels (gathered in two levels up to the
                                gather limit), 4 KiB .. 256 MiB
                     auto       --algorithm auto: the master's cost model decides flat or two levels,
                                and from which size on (docs/algorithms.md §12), 4 KiB .. 256 MiB
  --sizes FROM:TO    only the sizes FROM .. TO of each algorithm's (e.g. 4K:64K, 64M:64M)
  --paths FILE       another scenario in the paths file's syntax (docs/wanem.md), one rank per 'rank'
                     line: bench/one-region.paths (6 peers on one LAN) and bench/spread.paths (one
                     peer in each of the three regions) check that auto picks the flat ring there
  --json FILE        FILE.json becomes FILE-ALGORITHM.json, one per algorithm; every row carries the
                     machine, the command and the emulator's verdict over its own timed operations.
  Takes about 15 minutes per algorithm. Needs root."
# --algorithms is this script's, not pccl-bench's: taken out before scenario_common.sh reads the rest.
ALGORITHMS=flat,two-level
ONLY_SIZES=
PATHS=
COMMAND="bench/regions.sh $*"
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --algorithms)
      if [ $# -lt 2 ]; then
        echo "$0: --algorithms needs a LIST (e.g. flat,two-level); usage: bench/regions.sh --help" >&2
        exit 2
      fi
      ALGORITHMS=$2
      shift 2 ;;
    --algorithms=*) ALGORITHMS=${1#--algorithms=}; shift ;;
    --sizes)
      if [ $# -lt 2 ] || [[ "$2" != *:* ]]; then
        echo "$0: --sizes needs FROM:TO (e.g. 64M:64M); usage: bench/regions.sh --help" >&2
        exit 2
      fi
      ONLY_SIZES=$2
      shift 2 ;;
    --paths)
      if [ $# -lt 2 ] || [ ! -f "$2" ]; then
        echo "$0: --paths needs a paths FILE (e.g. bench/one-region.paths); usage: bench/regions.sh --help" >&2
        exit 2
      fi
      PATHS=$(realpath "$2")
      shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
set -- "${args[@]+"${args[@]}"}"
. "$(dirname "$0")/scenario_common.sh"

# algorithm_settings NAME: the gather limit (empty: the library's default), pccl-bench's --algorithm and
# the sizes of one algorithm's run (exit 2 if unknown).
algorithm_settings() {
  case "$1" in
    flat) GATHER_BYTES=; LEVELS=flat; SIZES=(-b 4K -e 256M -f 4) ;;
    ring) GATHER_BYTES=0; LEVELS=flat; SIZES=(-b 4K -e 256M -f 4) ;;
    gather) GATHER_BYTES=4194304; LEVELS=flat; SIZES=(-b 4K -e 256K -f 4) ;;
    two-level) GATHER_BYTES=; LEVELS=hierarchical; SIZES=(-b 4K -e 256M -f 4) ;;
    auto) GATHER_BYTES=; LEVELS=auto; SIZES=(-b 4K -e 256M -f 4) ;;
    *) echo "$0: unknown algorithm '$1' in --algorithms (flat, ring, gather, two-level, auto)" >&2; scenario_usage >&2; exit 2 ;;
  esac
}
IFS=, read -r -a algorithms <<< "$ALGORITHMS"
[ ${#algorithms[@]} -gt 0 ] || { echo "$0: --algorithms is empty" >&2; scenario_usage >&2; exit 2; }
for a in "${algorithms[@]}"; do algorithm_settings "$a"; done
# only_sizes: SIZES narrowed to --sizes FROM:TO (pccl-bench takes one -b and one -e).
only_sizes() {
  [ -n "$ONLY_SIZES" ] || return 0
  SIZES=(-b "${ONLY_SIZES%%:*}" -e "${ONLY_SIZES#*:}" -f 4)
}

PATHS=${PATHS:-$ROOT/bench/regions.paths}
# The ranks and the regions: the file's 'rank R REGION' lines (e.g. eu:4,us:3,asia:2).
RANKS=$(grep -c '^rank ' "$PATHS")
REGIONS=$(awk '$1 == "rank" { if (!($3 in n)) order[++k] = $3; n[$3]++ }
               END { for (i = 1; i <= k; ++i) printf "%s%s:%d", (i > 1 ? "," : ""), order[i], n[order[i]] }' "$PATHS")
[ "$RANKS" -ge 2 ] || { echo "$0: $PATHS has fewer than 2 'rank' lines" >&2; exit 2; }
export PCCL_BENCH_REGIONS=$PATHS  # each rank's PCCL_REGION from the file's 'rank' lines (wanem_rank.sh)
export PCCL_BENCH_MASTER_FLAGS=${PCCL_BENCH_MASTER_FLAGS:---probe-budget-ms 2000}
machine="$(nproc) vCPUs ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)), $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo), Linux $(uname -r)"
base_json=$JSON
status=0
for a in "${algorithms[@]}"; do
  algorithm_settings "$a"
  only_sizes
  [ -z "$base_json" ] || JSON="${base_json%.json}-$a.json"
  if [ -n "$GATHER_BYTES" ]; then export PCCL_GATHER_BYTES=$GATHER_BYTES; else unset PCCL_GATHER_BYTES; fi
  echo "# regions: $a (--algorithm $LEVELS, PCCL_GATHER_BYTES=${GATHER_BYTES:-default})${JSON:+, rows to $JSON}"
  run_wanem "$RANKS" 500 40 0 cubic "$PATHS" --backend pccl "${SIZES[@]}" -n 3 -w 1 --connections 16 --optimize-topology \
    --algorithm "$LEVELS" --json-field "forced=$a" --json-field "gather_bytes=${GATHER_BYTES:-default}" \
    --json-field "regions=$REGIONS" \
    --json-field "machine=$machine" --json-field "command=$COMMAND" "${PASS[@]}" || status=$?
done
exit $status
