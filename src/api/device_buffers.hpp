// Device buffers on the API side: the communicator's GPU engine, created on first use, and the
// preparation of a device all-reduce (pointer checks; the in-place input saved on the GPU).
#ifndef PCCL_API_DEVICE_BUFFERS_HPP_
#define PCCL_API_DEVICE_BUFFERS_HPP_

#include <memory>
#include <mutex>

#include "codec/gpu/engine.hpp"
#include "collective/collectives.hpp"

namespace pccl {

class DeviceBuffers {
 public:
  // Fills req.device (and, in place, req.saved_device / req.input) for send/recv of `bytes` bytes.
  // Unsupported without a GPU backend; InvalidArgument for host memory or a second GPU.
  Status prepare(const void* send, void* recv, size_t bytes, collective::ReduceRequest& req);

 private:
  Result<codec::gpu::Engine*> engineFor(const void* send, const void* recv);

  std::mutex mu_;
  std::unique_ptr<codec::gpu::Engine> engine_;
};

}  // namespace pccl

#endif  // PCCL_API_DEVICE_BUFFERS_HPP_
