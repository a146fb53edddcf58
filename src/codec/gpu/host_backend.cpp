// libpccl-gpu-host.so: the GPU backend ABI implemented on the CPU. "Device" memory is ordinary host
// memory, streams run their work at once, and the kernels are the CPU codec — the same functions the
// host all-reduce uses. It exists so that everything libpccl does with device buffers (loading the
// module, staging, the per-segment device jobs, in-place restore) runs in CI, which has no GPU. It is
// only loaded when $PCCL_GPU_BACKEND names it.
#include <cstdlib>
#include <cstring>
#include <new>

#include "codec/dtype.hpp"
#include "codec/gpu/backend_abi.h"
#include "codec/partial_sum.hpp"
#include "codec/quant.hpp"
#include "codec/reduce.hpp"

namespace {

using pccl::codec::DType;
using pccl::codec::Quant;
using pccl::codec::RedOp;

thread_local const char* t_error = "";

int fail(const char* why) {
  t_error = why;
  return PCCL_GPU_BAD_ARGUMENT;
}

bool validArgs(int quant, int dtype) {
  return pccl::codec::isValidQuant(static_cast<uint8_t>(quant)) && pccl::codec::isValidDType(static_cast<uint8_t>(dtype));
}

int deviceCount(int* count) {
  *count = 1;
  return PCCL_GPU_OK;
}
int pointerDevice(const void* p, int* device) {
  *device = p == nullptr ? -1 : 0;
  return PCCL_GPU_OK;
}
int setDevice(int device) { return device == 0 ? PCCL_GPU_OK : fail("the host backend has one device, 0"); }

struct pcclGpuStreamHost {};
int streamCreate(pcclGpuStream_t* s) {
  *s = reinterpret_cast<pcclGpuStream_t>(new (std::nothrow) pcclGpuStreamHost);
  return *s != nullptr ? PCCL_GPU_OK : fail("out of memory");
}
int streamDestroy(pcclGpuStream_t s) {
  delete reinterpret_cast<pcclGpuStreamHost*>(s);
  return PCCL_GPU_OK;
}
int streamSynchronize(pcclGpuStream_t) { return PCCL_GPU_OK; }

int alloc(void** p, size_t bytes) {
  *p = std::malloc(bytes == 0 ? 1 : bytes);
  return *p != nullptr ? PCCL_GPU_OK : fail("out of memory");
}
int release(void* p) {
  std::free(p);
  return PCCL_GPU_OK;
}
int copy(void* dst, const void* src, size_t bytes, int kind, pcclGpuStream_t) {
  if (kind < PCCL_GPU_COPY_H2D || kind > PCCL_GPU_COPY_D2D) return fail("unknown copy kind");
  if (bytes > 0) std::memmove(dst, src, bytes);
  return PCCL_GPU_OK;
}

int encode(int quant, int dtype, const void* src, size_t count, void* wire, pcclGpuStream_t) {
  if (!validArgs(quant, dtype)) return fail("unknown quant or dtype");
  pccl::codec::encode(static_cast<Quant>(quant), static_cast<DType>(dtype), src, count, static_cast<uint8_t*>(wire));
  return PCCL_GPU_OK;
}
int decode(int quant, int dtype, const void* wire, size_t count, void* dst, pcclGpuStream_t) {
  if (!validArgs(quant, dtype)) return fail("unknown quant or dtype");
  pccl::codec::decode(static_cast<Quant>(quant), static_cast<DType>(dtype), static_cast<const uint8_t*>(wire), count,
                      dst);
  return PCCL_GPU_OK;
}
int decodeReduce(int quant, int dtype, int op, const void* wire, size_t count, const void* in, void* dst,
                 uint32_t divisor, pcclGpuStream_t) {
  if (!validArgs(quant, dtype) || !pccl::codec::isValidRedOp(static_cast<uint8_t>(op))) {
    return fail("unknown quant, dtype or op");
  }
  if (dst == in) return fail("decode_reduce needs dst != in");
  pccl::codec::decodeReduce(static_cast<Quant>(quant), static_cast<DType>(dtype), static_cast<RedOp>(op),
                            static_cast<const uint8_t*>(wire), count, in, dst, divisor);
  return PCCL_GPU_OK;
}
int reduce(int dtype, int op, void* acc, const void* in, size_t count, uint32_t divisor, pcclGpuStream_t) {
  if (!validArgs(0, dtype) || !pccl::codec::isValidRedOp(static_cast<uint8_t>(op))) return fail("unknown dtype or op");
  pccl::codec::reduceInto(static_cast<DType>(dtype), static_cast<RedOp>(op), acc, in, count, divisor);
  return PCCL_GPU_OK;
}
bool isInteger(int dtype) {
  return pccl::codec::isValidDType(static_cast<uint8_t>(dtype)) && !pccl::codec::isFloating(static_cast<DType>(dtype));
}
int widenPartials(int dtype, uint32_t peers, const void* in, size_t count, void* wire, pcclGpuStream_t) {
  if (!isInteger(dtype) || peers == 0) return fail("partial sums need an integer dtype and peers >= 1");
  pccl::codec::widenToPartials(static_cast<DType>(dtype), peers, in, count, static_cast<uint8_t*>(wire));
  return PCCL_GPU_OK;
}
int addPartials(int dtype, uint32_t peers, const void* wire, const void* in, size_t count, void* dst,
                pcclGpuStream_t) {
  if (!isInteger(dtype) || peers == 0) return fail("partial sums need an integer dtype and peers >= 1");
  pccl::codec::addToPartials(static_cast<DType>(dtype), peers, static_cast<const uint8_t*>(wire), in, count,
                             static_cast<uint8_t*>(dst));
  return PCCL_GPU_OK;
}
int finishPartials(int dtype, uint32_t peers, const void* wire, const void* in, size_t count, void* out,
                   pcclGpuStream_t) {
  if (!isInteger(dtype) || peers == 0) return fail("partial sums need an integer dtype and peers >= 1");
  pccl::codec::finishPartials(static_cast<DType>(dtype), peers, static_cast<const uint8_t*>(wire), in, count, out);
  return PCCL_GPU_OK;
}
const char* lastError() { return t_error; }

const pcclGpuBackend_t kHostBackend = {
    PCCL_GPU_ABI_VERSION, "host", deviceCount, pointerDevice, setDevice, streamCreate, streamDestroy,
    streamSynchronize,    alloc,  release,     alloc,         release,   copy,         encode,
    decode,               decodeReduce,        reduce,        widenPartials, addPartials,  finishPartials,
    lastError,
};

}  // namespace

extern "C" __attribute__((visibility("default"))) const pcclGpuBackend_t* pcclGpuBackendV1(void) {
  return &kHostBackend;
}
