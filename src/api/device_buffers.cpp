#include "api/device_buffers.hpp"

#include <fmt/format.h>

namespace pccl {

Result<codec::gpu::Engine*> DeviceBuffers::engineFor(const void* send, const void* recv) {
  std::lock_guard<std::mutex> lk(mu_);
  if (!engine_) {
    PCCL_ASSIGN_OR_RETURN(engine_, codec::gpu::Engine::open());
  }
  for (const void* p : {send, recv}) {
    PCCL_ASSIGN_OR_RETURN(int device, engine_->deviceOf(p));
    if (device < 0) {
      return Status::invalidArgument(
          fmt::format("location is device but the {} buffer is host memory", p == send ? "send" : "recv"));
    }
    PCCL_RETURN_IF_ERROR(engine_->bind(device));
  }
  return engine_.get();
}

Status DeviceBuffers::prepare(const void* send, void* recv, size_t bytes, collective::ReduceRequest& req) {
  PCCL_ASSIGN_OR_RETURN(req.device, engineFor(send, recv));
  if (send != recv) return Status::ok();
  // In place: the ring reads a copy of the input, kept on the GPU, so a failure can put it back.
  PCCL_ASSIGN_OR_RETURN(req.saved_device, req.device->device(bytes));
  uint8_t* saved = req.saved_device.data();
  PCCL_RETURN_IF_ERROR(req.device->runNow([&](codec::gpu::JobContext& ctx) {
    return ctx.check(ctx.api.memcpy_async(saved, recv, bytes, PCCL_GPU_COPY_D2D, ctx.stream),
                     "saving the in-place buffer");
  }));
  req.input = saved;
  return Status::ok();
}

}  // namespace pccl
