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
      const char* which = p == send && send != recv ? "send" : "recv";
      return Status::invalidArgument(fmt::format("location is device but the {} buffer is host memory", which));
    }
    PCCL_RETURN_IF_ERROR(engine_->bind(device));
  }
  return engine_.get();
}

Status DeviceBuffers::prepare(const CallLayout& layout, collective::ReduceRequest& req) {
  PCCL_ASSIGN_OR_RETURN(req.device, engineFor(req.input, req.output));
  if (!layout.in_place) return Status::ok();
  // The ring reads a copy of the input, kept on the GPU, so a failure can put the buffer back.
  const size_t bytes = layout.input_bytes > 0 ? layout.input_bytes : layout.output_bytes;
  PCCL_ASSIGN_OR_RETURN(req.saved_device, req.device->device(bytes));
  uint8_t* saved = req.saved_device.data();
  const uint8_t* from = req.input;
  PCCL_RETURN_IF_ERROR(req.device->runNow([&](codec::gpu::JobContext& ctx) {
    return ctx.check(ctx.api.memcpy_async(saved, from, bytes, PCCL_GPU_COPY_D2D, ctx.stream),
                     "saving the in-place buffer");
  }));
  req.input = saved;
  req.restore_to = layout.restore_to;
  req.restore_from = layout.restore_from;
  req.restore_bytes = layout.restore_bytes;
  return Status::ok();
}

}  // namespace pccl
