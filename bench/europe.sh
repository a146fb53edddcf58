#!/usr/bin/env bash
# Europe: 4 ranks, ~20 ms RTT, 0.001 % loss, 250 Mbit/s per rank, cubic.
#   bench/europe.sh [--json FILE] [pccl-bench flags]
SCENARIO=europe
. "$(dirname "$0")/scenario_common.sh"
run_wanem 4 250 10 0.001 cubic "" --backend both -b 64M -e 64M -n 3 -w 1 --connections 4 "${PASS[@]}"
