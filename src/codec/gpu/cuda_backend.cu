// libpccl-gpu-cuda.so: the GPU backend for NVIDIA GPUs, device_backend.inc compiled by nvcc
// (src/codec/gpu/CMakeLists.txt, docs/gpu.md).
#include "codec/gpu/device_backend.inc"
