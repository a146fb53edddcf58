#!/usr/bin/env bash
# Mixed: regions with different delays (bench/mixed.paths), 0.01 % loss, 200 Mbit/s per rank, cubic.
#   bench/mixed.sh [--json FILE] [pccl-bench flags]
SCENARIO=mixed
SCENARIO_HELP="  Mixed: 4 ranks in pccl-wanem, regions with different delays (bench/mixed.paths), 0.01 % loss,
  200 Mbit/s per rank, cubic. Needs root."
. "$(dirname "$0")/scenario_common.sh"
run_wanem 4 200 40 0.01 cubic "$ROOT/bench/mixed.paths" --backend both -b 64M -e 64M -n 3 -w 1 --connections 64 "${PASS[@]}"
