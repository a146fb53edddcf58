// libpccl-gpu-emu.so: the GPU backend's own source (device_backend.inc, kernels and all) compiled by the
// host compiler over an emulated runtime (emu_runtime.hpp: thread blocks run as fibers on the CPU).
// A test module: pccl-gpu-test runs it in CI, so the kernels' indexing, block reductions, header
// handling and dispatch are checked bit for bit against the CPU codec on machines without a GPU.
// Never loaded by libpccl unless $PCCL_GPU_BACKEND names it.
#define PCCL_GPU_RUNTIME_EMULATED 1
#include "codec/gpu/device_backend.inc"
