// libpccl-gpu-hip.so: the GPU backend for AMD GPUs, device_backend.inc compiled in clang's HIP mode
// (src/codec/gpu/CMakeLists.txt, docs/gpu.md).
#include "codec/gpu/device_backend.inc"
