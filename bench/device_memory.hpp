// GPU memory for `pccl-bench --device`: the bench plays a trainer that keeps its tensors on the GPU.
// It loads the same GPU backend module libpccl uses (PCCL_GPU_BACKEND, else libpccl-gpu-hip.so /
// libpccl-gpu-cuda.so beside libpccl.so) and uses its allocation and copy entry points.
#ifndef PCCL_BENCH_DEVICE_MEMORY_HPP_
#define PCCL_BENCH_DEVICE_MEMORY_HPP_

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "codec/gpu/backend_abi.h"

namespace pccl::bench {

class DeviceMemory {
 public:
  // nullptr with *error set when no module loads or it sees no GPU.
  static std::unique_ptr<DeviceMemory> open(std::string* error);
  ~DeviceMemory();
  const char* name() const { return api_->name; }
  void* alloc(size_t bytes, std::string* error);  // freed with this object
  // Synchronous copies (kind: PCCL_GPU_COPY_*); false with *error on failure.
  bool copy(void* dst, const void* src, size_t bytes, int kind, std::string* error);

 private:
  explicit DeviceMemory(const pcclGpuBackend_t* api) : api_(api) {}
  const pcclGpuBackend_t* api_;
  pcclGpuStream_t stream_ = nullptr;
  std::vector<void*> blocks_;
};

}  // namespace pccl::bench

#endif  // PCCL_BENCH_DEVICE_MEMORY_HPP_
