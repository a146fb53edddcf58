#!/usr/bin/env bash
# Transatlantic: 4 ranks, ~80 ms RTT, 0.01 % loss, 250 Mbit/s per rank, cubic.
#   bench/transatlantic.sh [--json FILE] [pccl-bench flags]
SCENARIO=transatlantic
SCENARIO_HELP="  Transatlantic: 4 ranks in pccl-wanem, ~80 ms RTT, 0.01 % loss, 250 Mbit/s per rank, cubic; pccl
  and Gloo on 256 MiB all-reduces. Needs root."
. "$(dirname "$0")/scenario_common.sh"
# K = 16: the default since the 2026-11-24 runs, where K = 32 and 64 made the emulator drop packets on
# 2 cores (docs/benchmarks.md); bench/run_all.sh measures K = 1, 4, 16 and 64 beside it.
run_wanem 4 250 40 0.01 cubic "" --backend both -b 256M -e 256M -n 3 -w 1 --connections 16 \
  --segment-bytes 262144 "${PASS[@]}"
