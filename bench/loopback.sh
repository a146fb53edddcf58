#!/usr/bin/env bash
# Loopback: N ranks (default 4) on this machine, pccl against Gloo in the same run.
#   bench/loopback.sh [--ranks 2|4|8] [--json FILE] [pccl-bench flags]
SCENARIO=loopback
SCENARIO_ARGS="[--ranks N] "
SCENARIO_HELP="  Loopback: N ranks (default 4) on this machine, pccl against Gloo in the same run, 4 KiB .. 256 MiB."
. "$(dirname "$0")/scenario_common.sh"
ranks=4
args=()
for ((i = 0; i < ${#PASS[@]}; i++)); do
  if [ "${PASS[$i]}" = --ranks ]; then ranks=${PASS[$((i + 1))]}; i=$((i + 1)); else args+=("${PASS[$i]}"); fi
done
json_args=()
[ -n "$JSON" ] && json_args=(--json "$JSON" --json-field scenario=loopback)
exec "$BUILD_DIR/bench/pccl-bench" --ranks "$ranks" --backend both -b 4K -e 256M -f 4 -n 5 -w 2 "${json_args[@]}" "${args[@]}"
