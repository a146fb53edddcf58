#!/usr/bin/env bash
# Skewed: 5 ranks in three regions (bench/skewed.paths) with two slow directions, for topology
# optimisation. Ranks join in rank order, so the join-order ring uses a slow link; with
# --optimize-topology pccl measures every link and installs the best ring first.
#   bench/skewed.sh [--json FILE] [--optimize-topology] [pccl-bench flags]
SCENARIO=skewed
SCENARIO_HELP="  Skewed: 5 ranks in pccl-wanem, three regions (bench/skewed.paths), 200 Mbit/s access links, two
  directions at 50 Mbit/s on their own path, no random loss, cubic. The ranks join in rank order, one
  every 0.5 s (the join-order ring 0 -> 1 -> 2 -> 3 -> 4 crosses a slow direction); pass
  --optimize-topology to measure the links (2 s per round) and install the best ring before the sizes.
  Every JSON row gets the best ring's and the join-order ring's link bounds (bench/ring_bound.py, brute
  force over every ring of the configured rates). Needs root."
. "$(dirname "$0")/scenario_common.sh"
bounds=$(/usr/bin/python3 "$ROOT/bench/ring_bound.py" --paths "$ROOT/bench/skewed.paths" --rate-mbit 200 --ranks 5)
field() { /usr/bin/python3 -c "import json, sys; print(json.loads(sys.argv[1])[sys.argv[2]])" "$bounds" "$1"; }
echo "# link bounds (configured rates): best ring $(field best_ring_bound_mbit) Mbit/s, join order" \
  "$(field join_order_bound_mbit) Mbit/s"
export PCCL_BENCH_JOIN_STAGGER_MS=${PCCL_BENCH_JOIN_STAGGER_MS:-500}
export PCCL_BENCH_MASTER_FLAGS=${PCCL_BENCH_MASTER_FLAGS:---probe-budget-ms 2000}
run_wanem 5 200 40 0 cubic "$ROOT/bench/skewed.paths" --backend pccl -b 128M -e 128M -n 3 -w 1 --connections 16 \
  --json-field "best_ring_bound_mbit=$(field best_ring_bound_mbit)" \
  --json-field "join_order_bound_mbit=$(field join_order_bound_mbit)" "${PASS[@]}"
