/* The boundary between libpccl and a GPU backend module (libpccl-gpu-hip.so, libpccl-gpu-cuda.so,
 * libpccl-gpu-host.so).
 *
 * libpccl never links a GPU runtime: the first all-reduce on device memory dlopen()s a backend module
 * (src/codec/gpu/loader.cpp says which) and calls the one symbol it exports, pcclGpuBackendV1(). The
 * table it returns is plain C so that modules built by hipcc/clang, nvcc or g++ all fit.
 *
 * Conventions
 *   - Every function returns PCCL_GPU_OK (0) or an error code; last_error() then describes this
 *     thread's latest failure. No function aborts or exits the process.
 *   - "device" pointers are memory of the backend's GPU (or, for the host backend, ordinary memory);
 *     "pinned" pointers come from host_alloc.
 *   - Kernels and copies are queued on a stream and run in order; nothing is finished before
 *     stream_synchronize() returns OK for that stream.
 *   - quant, dtype and op are the integer values of pcclQuant_t, pcclDataType_t and pcclRedOp_t
 *     (codec::Quant, codec::DType, codec::RedOp). The wire bytes produced by encode() must be the
 *     exact bytes codec::encode() produces on the CPU for the same input (docs/protocol.md §5.4), and
 *     decode / decode_reduce / reduce must produce the exact bits of codec::decode / decodeReduce /
 *     reduceInto: peers may mix CPU and GPU buffers in one all-reduce.
 *   - A module may be called from several threads, each with its own streams.
 */
#ifndef PCCL_CODEC_GPU_BACKEND_ABI_H_
#define PCCL_CODEC_GPU_BACKEND_ABI_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PCCL_GPU_ABI_VERSION 2u /* 2: the partial-sum functions of integer avg */

enum {
  PCCL_GPU_OK = 0,
  PCCL_GPU_ERROR = 1,        /* a runtime call failed; see last_error() */
  PCCL_GPU_NO_DEVICE = 2,    /* the runtime loaded but sees no usable GPU */
  PCCL_GPU_UNSUPPORTED = 3,  /* this (quant, dtype, op) is not implemented by the module */
  PCCL_GPU_BAD_ARGUMENT = 4
};

enum { PCCL_GPU_COPY_H2D = 0, PCCL_GPU_COPY_D2H = 1, PCCL_GPU_COPY_D2D = 2 };

typedef struct pcclGpuStream_st* pcclGpuStream_t;

typedef struct pcclGpuBackend_t {
  uint32_t abi_version; /* PCCL_GPU_ABI_VERSION */
  const char* name;     /* "hip", "cuda" or "host" */

  /* Number of usable devices (0 is not an error: the caller reports it). */
  int (*device_count)(int* count);
  /* *device := the ordinal of the GPU that owns p, or -1 when p is host memory. */
  int (*pointer_device)(const void* p, int* device);
  /* Makes `device` current for the calling thread. */
  int (*set_device)(int device);

  int (*stream_create)(pcclGpuStream_t* stream);
  int (*stream_destroy)(pcclGpuStream_t stream);
  int (*stream_synchronize)(pcclGpuStream_t stream);

  int (*host_alloc)(void** p, size_t bytes); /* page-locked host memory */
  int (*host_free)(void* p);
  int (*device_alloc)(void** p, size_t bytes);
  int (*device_free)(void* p);
  /* kind: PCCL_GPU_COPY_*. */
  int (*memcpy_async)(void* dst, const void* src, size_t bytes, int kind, pcclGpuStream_t stream);

  /* wire (device) := encode(src[0..count)) in format `quant`. */
  int (*encode)(int quant, int dtype, const void* src, size_t count, void* wire, pcclGpuStream_t stream);
  /* dst (device) := decode(wire). */
  int (*decode)(int quant, int dtype, const void* wire, size_t count, void* dst, pcclGpuStream_t stream);
  /* dst[i] := decode(wire)[i] (op) in[i], divided by divisor (>= 1). dst must not
   * overlap wire or in. */
  int (*decode_reduce)(int quant, int dtype, int op, const void* wire, size_t count, const void* in, void* dst,
                       uint32_t divisor, pcclGpuStream_t stream);
  /* acc[i] := acc[i] (op) in[i], divided by divisor (>= 1). */
  int (*reduce)(int dtype, int op, void* acc, const void* in, size_t count, uint32_t divisor,
                pcclGpuStream_t stream);

  /* Integer avg's exact partial sums over `peers` peers (codec/partial_sum.hpp, docs/protocol.md
   * §5.4), integer dtypes only: the wire holds codec::partialSumSize(dtype, peers) bytes per element
   * and is aligned to that size (8 for 16-byte sums). The exact bytes and values of
   * codec::widenToPartials / addToPartials / finishPartials. */
  /* wire := in[0..count) as partial sums. */
  int (*widen_partials)(int dtype, uint32_t peers, const void* in, size_t count, void* wire, pcclGpuStream_t stream);
  /* dst := wire + in, as partial sums; dst may be wire. */
  int (*add_partials)(int dtype, uint32_t peers, const void* wire, const void* in, size_t count, void* dst,
                      pcclGpuStream_t stream);
  /* out := (wire + in) / peers (peers >= 1), rounded toward zero, in dtype. */
  int (*finish_partials)(int dtype, uint32_t peers, const void* wire, const void* in, size_t count, void* out,
                         pcclGpuStream_t stream);

  const char* (*last_error)(void);
} pcclGpuBackend_t;

typedef const pcclGpuBackend_t* (*pcclGpuBackendFn)(void);
#define PCCL_GPU_BACKEND_SYMBOL "pcclGpuBackendV1"

#ifdef __cplusplus
}
#endif

#endif /* PCCL_CODEC_GPU_BACKEND_ABI_H_ */
