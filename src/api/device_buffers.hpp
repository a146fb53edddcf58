// Device buffers on the API side: the communicator's GPU engine, created on first use, and the
// preparation of a collective on device buffers (pointer checks; an in-place input saved on the GPU).
#ifndef PCCL_API_DEVICE_BUFFERS_HPP_
#define PCCL_API_DEVICE_BUFFERS_HPP_

#include <memory>
#include <mutex>

#include "api/reduce_handle.hpp"
#include "codec/gpu/engine.hpp"
#include "collective/collectives.hpp"

namespace pccl {

class DeviceBuffers {
 public:
  // Fills req.device for req.input/req.output (a broadcast's non-root: both its recv buffer) and, for
  // a call of `layout` in place, req.saved_device, req.input and what a failure restores. Unsupported
  // without a GPU backend; InvalidArgument for host memory or a second GPU.
  Status prepare(const CallLayout& layout, collective::ReduceRequest& req);

 private:
  Result<codec::gpu::Engine*> engineFor(const void* send, const void* recv);

  std::mutex mu_;
  std::unique_ptr<codec::gpu::Engine> engine_;
};

}  // namespace pccl

#endif  // PCCL_API_DEVICE_BUFFERS_HPP_
