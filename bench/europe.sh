#!/usr/bin/env bash
# Europe: 4 ranks, ~20 ms RTT, 0.001 % loss, 250 Mbit/s per rank, cubic.
#   bench/europe.sh [--json FILE] [pccl-bench flags]
SCENARIO=europe
SCENARIO_HELP="  Europe: 4 ranks in pccl-wanem, ~20 ms RTT, 0.001 % loss, 250 Mbit/s per rank, cubic; pccl and
  Gloo on 64 MiB all-reduces. Needs root."
. "$(dirname "$0")/scenario_common.sh"
run_wanem 4 250 10 0.001 cubic "" --backend both -b 64M -e 64M -n 3 -w 1 --connections 4 "${PASS[@]}"
