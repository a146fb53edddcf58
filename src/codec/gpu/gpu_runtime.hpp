// The project's own thin layer over the GPU runtime, so that one backend source (device_backend.inc)
// compiles with HIP (clang -x hip / hipcc, AMD) and with CUDA (nvcc). HIP's NVIDIA headers do not
// compile with CUDA 13, so the mapping is ours: only the handful of calls the backend makes.
// With PCCL_GPU_RUNTIME_EMULATED the same names come from emu_runtime.hpp (the kernels on the CPU).
//
// Everything here is host code; launch() wraps <<<...>>>, which both compilers accept.
#ifndef PCCL_CODEC_GPU_GPU_RUNTIME_HPP_
#define PCCL_CODEC_GPU_GPU_RUNTIME_HPP_

#include <cstddef>

#include "codec/gpu/backend_abi.h"

#if defined(PCCL_GPU_RUNTIME_EMULATED)
#include "codec/gpu/emu_runtime.hpp"  // the kernels on the CPU (CI); defines the same rt:: names
#elif defined(__HIP__) || defined(__HIPCC__)
#include <hip/hip_runtime.h>
#define PCCL_GPU_RUNTIME_HIP 1
#elif defined(__CUDACC__)
#include <cuda_runtime.h>
#define PCCL_GPU_RUNTIME_CUDA 1
#else
#error "gpu_runtime.hpp is for HIP or CUDA translation units (or PCCL_GPU_RUNTIME_EMULATED)"
#endif

namespace pccl::gpu::rt {

#if defined(PCCL_GPU_RUNTIME_EMULATED)
// everything is in emu_runtime.hpp
#elif defined(PCCL_GPU_RUNTIME_HIP)
using Error = hipError_t;
using Stream = hipStream_t;
inline constexpr Error kSuccess = hipSuccess;
inline constexpr const char* kName = "hip";

inline bool isNoDevice(Error e) { return e == hipErrorNoDevice || e == hipErrorInsufficientDriver; }
inline const char* errorString(Error e) { return hipGetErrorString(e); }
inline Error lastError() { return hipGetLastError(); }  // also clears it
inline Error deviceCount(int* n) { return hipGetDeviceCount(n); }
inline Error setDevice(int d) { return hipSetDevice(d); }
inline Error currentDevice(int* d) { return hipGetDevice(d); }
inline Error multiprocessors(int* n, int device) {
  return hipDeviceGetAttribute(n, hipDeviceAttributeMultiprocessorCount, device);
}
inline Error streamCreate(Stream* s) { return hipStreamCreateWithFlags(s, hipStreamNonBlocking); }
inline Error streamDestroy(Stream s) { return hipStreamDestroy(s); }
inline Error streamSynchronize(Stream s) { return hipStreamSynchronize(s); }
inline Error hostAlloc(void** p, size_t bytes) { return hipHostMalloc(p, bytes, hipHostMallocDefault); }
inline Error hostFree(void* p) { return hipHostFree(p); }
inline Error deviceAlloc(void** p, size_t bytes) { return hipMalloc(p, bytes); }
inline Error deviceFree(void* p) { return hipFree(p); }
inline Error memcpyAsync(void* dst, const void* src, size_t bytes, int kind, Stream s) {
  const hipMemcpyKind k = kind == PCCL_GPU_COPY_H2D   ? hipMemcpyHostToDevice
                          : kind == PCCL_GPU_COPY_D2H ? hipMemcpyDeviceToHost
                                                      : hipMemcpyDeviceToDevice;
  return hipMemcpyAsync(dst, src, bytes, k, s);
}
// *device := the GPU that owns p (device or managed memory), or -1 for any host memory.
inline Error pointerDevice(const void* p, int* device) {
  hipPointerAttribute_t a{};
  const Error e = hipPointerGetAttributes(&a, p);
  if (e != kSuccess) return e;
  *device = (a.memoryType == hipMemoryTypeDevice || a.isManaged != 0) ? a.device : -1;
  return kSuccess;
}
#else
using Error = cudaError_t;
using Stream = cudaStream_t;
inline constexpr Error kSuccess = cudaSuccess;
inline constexpr const char* kName = "cuda";

inline bool isNoDevice(Error e) { return e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver; }
inline const char* errorString(Error e) { return cudaGetErrorString(e); }
inline Error lastError() { return cudaGetLastError(); }  // also clears it
inline Error deviceCount(int* n) { return cudaGetDeviceCount(n); }
inline Error setDevice(int d) { return cudaSetDevice(d); }
inline Error currentDevice(int* d) { return cudaGetDevice(d); }
inline Error multiprocessors(int* n, int device) {
  return cudaDeviceGetAttribute(n, cudaDevAttrMultiProcessorCount, device);
}
inline Error streamCreate(Stream* s) { return cudaStreamCreateWithFlags(s, cudaStreamNonBlocking); }
inline Error streamDestroy(Stream s) { return cudaStreamDestroy(s); }
inline Error streamSynchronize(Stream s) { return cudaStreamSynchronize(s); }
inline Error hostAlloc(void** p, size_t bytes) { return cudaMallocHost(p, bytes); }
inline Error hostFree(void* p) { return cudaFreeHost(p); }
inline Error deviceAlloc(void** p, size_t bytes) { return cudaMalloc(p, bytes); }
inline Error deviceFree(void* p) { return cudaFree(p); }
inline Error memcpyAsync(void* dst, const void* src, size_t bytes, int kind, Stream s) {
  const cudaMemcpyKind k = kind == PCCL_GPU_COPY_H2D   ? cudaMemcpyHostToDevice
                           : kind == PCCL_GPU_COPY_D2H ? cudaMemcpyDeviceToHost
                                                       : cudaMemcpyDeviceToDevice;
  return cudaMemcpyAsync(dst, src, bytes, k, s);
}
inline Error pointerDevice(const void* p, int* device) {
  cudaPointerAttributes a{};
  const Error e = cudaPointerGetAttributes(&a, p);
  if (e != kSuccess) return e;
  *device = (a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged) ? a.device : -1;
  return kSuccess;
}
#endif

#if !defined(PCCL_GPU_RUNTIME_EMULATED)
// Queues kernel<<<grid, block, shared, s>>>(args...) and returns the launch's error (cleared).
template <typename... Params, typename... Args>
Error launch(void (*kernel)(Params...), unsigned grid, unsigned block, size_t shared, Stream s, Args... args) {
  kernel<<<grid, block, shared, s>>>(static_cast<Params>(args)...);
  return lastError();
}
#endif

inline void clearError() { static_cast<void>(lastError()); }

inline Stream toStream(pcclGpuStream_t s) { return reinterpret_cast<Stream>(s); }
inline pcclGpuStream_t fromStream(Stream s) { return reinterpret_cast<pcclGpuStream_t>(s); }

}  // namespace pccl::gpu::rt

#endif  // PCCL_CODEC_GPU_GPU_RUNTIME_HPP_
