#include "device_memory.hpp"

#include <cstdlib>

#include "codec/gpu/loader.hpp"
#include "pccl/pccl.h"

namespace pccl::bench {

std::unique_ptr<DeviceMemory> DeviceMemory::open(std::string* error) {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("PCCL_GPU_BACKEND"); env != nullptr && *env != '\0') {
    candidates.emplace_back(env);
  } else {
    for (const char* name : {"libpccl-gpu-hip.so", "libpccl-gpu-cuda.so"}) {
      candidates.push_back(codec::gpu::directoryOf(reinterpret_cast<const void*>(&pcclGetErrorString)) + name);
    }
  }
  std::string tried;
  for (const auto& c : candidates) {
    auto b = codec::gpu::loadBackend(c);
    if (!b.isOk()) {
      tried += b.status().message() + "; ";
      continue;
    }
    const pcclGpuBackend_t* api = *b;
    int count = 0;
    if (api->device_count(&count) != PCCL_GPU_OK || count <= 0) {
      tried += c + ": no GPU visible; ";
      continue;
    }
    std::unique_ptr<DeviceMemory> m(new DeviceMemory(api));
    if (api->set_device(0) != PCCL_GPU_OK || api->stream_create(&m->stream_) != PCCL_GPU_OK) {
      *error = std::string(api->name) + ": " + api->last_error();
      return nullptr;
    }
    return m;
  }
  *error = "no GPU backend: " + tried;
  return nullptr;
}

DeviceMemory::~DeviceMemory() {
  for (void* p : blocks_) api_->device_free(p);
  if (stream_ != nullptr) api_->stream_destroy(stream_);
}

void* DeviceMemory::alloc(size_t bytes, std::string* error) {
  void* p = nullptr;
  if (api_->device_alloc(&p, bytes) != PCCL_GPU_OK) {
    *error = std::string("device_alloc: ") + api_->last_error();
    return nullptr;
  }
  blocks_.push_back(p);
  return p;
}

bool DeviceMemory::copy(void* dst, const void* src, size_t bytes, int kind, std::string* error) {
  if (api_->memcpy_async(dst, src, bytes, kind, stream_) != PCCL_GPU_OK ||
      api_->stream_synchronize(stream_) != PCCL_GPU_OK) {
    *error = std::string("copy: ") + api_->last_error();
    return false;
  }
  return true;
}

}  // namespace pccl::bench
