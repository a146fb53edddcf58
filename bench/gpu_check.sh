#!/usr/bin/env bash
# Every check that needs an NVIDIA GPU (docs/gpu.md, "What has been verified where"), in one run, for a
# machine with a GPU that did not build pccl: the kernels against the CPU codec, the same under
# compute-sanitizer, the kernel benchmark, and pccl-bench of every collective on device and host
# buffers, 4 ranks on the one GPU (MPS started when available), optionally the Python layer and torch
# backend on CUDA tensors. Results (logs and JSON) go to OUT.
set -uo pipefail
usage() {
  cat <<'EOF'
usage: bench/gpu_check.sh [--build DIR] [--module PATH] [--out DIR] [--max SIZE] [--quick] [--python]
                          [--bench-only] [--no-mps]
  --build DIR    the tree with pccl-gpu-test, pccl-gpu-bench and pccl-bench (default build)
  --module PATH  the CUDA backend module (default build-cuda/src/libpccl-gpu-cuda.so)
  --out DIR      where logs and JSON go (default gpu-check)
  --max SIZE     largest pccl-bench size (default 256M)
  --quick        no compute-sanitizer run, float32 only
  --python       also bench/gpu_torch_check.py (python3 with torch on CUDA; PCCL_LIBRARY set)
  --bench-only   only the pccl-bench runs (repeated runs for the spread)
  --no-mps       do not start MPS (the ranks are time-sliced on the one GPU)
Environment: LD_LIBRARY_PATH for shared libraries carried beside the binaries.
EOF
}
BUILD=build MODULE=build-cuda/src/libpccl-gpu-cuda.so OUT=gpu-check MAX=256M QUICK=0 PYTHON=0 BENCH_ONLY=0 MPS=1
while [ $# -gt 0 ]; do
  case "$1" in
    --build) BUILD=$2; shift 2 ;;
    --module) MODULE=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --max) MAX=$2; shift 2 ;;
    --quick) QUICK=1; shift ;;
    --python) PYTHON=1; shift ;;
    --bench-only) BENCH_ONLY=1; shift ;;
    --no-mps) MPS=0; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "gpu_check.sh: unknown argument $1" >&2; usage >&2; exit 2 ;;
  esac
done
mkdir -p "$OUT"
export PCCL_GPU_BACKEND=$MODULE
failed=0
step() {  # step NAME TIMEOUT_S COMMAND...: runs it, its output in OUT/NAME.log, and says how it went
  local name=$1 limit=$2 start rc
  shift 2
  start=$(date +%s%N)
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
  rc=$?
  printf 'gpu-check: %-34s rc=%d %d ms\n' "$name" "$rc" "$((($(date +%s%N) - start) / 1000000))"
  [ "$rc" = 0 ] || { failed=1; tail -5 "$OUT/$name.log"; }
}
nvidia-smi -L | tee "$OUT/gpu.txt"
if [ "$BENCH_ONLY" = 0 ]; then
  step gpu-test 120 "$BUILD/tests/pccl-gpu-test" --backend "$MODULE"
  tail -1 "$OUT/gpu-test.log"
  step gpu-bench 120 "$BUILD/bench/pccl-gpu-bench" --backend "$MODULE" --json "$OUT/gpu-bench.json"
fi
mps=0
if [ "$MPS" = 1 ] && command -v nvidia-cuda-mps-control > /dev/null && nvidia-cuda-mps-control -d 2> /dev/null; then
  mps=1
fi
echo "gpu-check: MPS $([ "$mps" = 1 ] && echo on || echo off)"
quants=(none int8)
[ "$QUICK" = 1 ] && quants=(none)
for coll in allreduce broadcast allgather reducescatter; do
  for q in "${quants[@]}"; do
    for where in device host; do
      flags=()
      [ "$where" = device ] && flags=(--device)
      step "bench-$coll-$q-$where" 150 "$BUILD/bench/pccl-bench" --ranks 4 -b 4K -e "$MAX" -f 4 -n 5 -w 1 \
        --collective "$coll" --quant "$q" --backend pccl "${flags[@]}" --json "$OUT/bench-$coll-$q-$where.json" \
        --json-field "mps=$mps" --timeout 100
    done
  done
done
# The Python layer and the torch backend on CUDA tensors (needs torch with CUDA, and PCCL_LIBRARY).
if [ "$PYTHON" = 1 ]; then
  step python-torch 240 python3 bench/gpu_torch_check.py
  grep -E "FAIL|passed|FAILED" "$OUT/python-torch.log" | head -20
fi
[ "$mps" = 1 ] && echo quit | nvidia-cuda-mps-control
# Last, as the slowest: the kernel test under compute-sanitizer.
if [ "$QUICK" = 0 ] && [ "$BENCH_ONLY" = 0 ] && command -v compute-sanitizer > /dev/null; then
  step gpu-test-memcheck 300 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 3 \
    "$BUILD/tests/pccl-gpu-test" --backend "$MODULE"
  tail -3 "$OUT/gpu-test-memcheck.log"
fi
exit "$failed"
