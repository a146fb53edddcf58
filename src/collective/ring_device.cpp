// RingCollective with device buffers: every segment's codec work is one job on the communicator's GPU
// engine (codec/gpu/engine.hpp). The io thread submits a step when a segment's input is ready (our own
// at the start, a received one when it arrives); the worker uploads what arrived, runs the kernels,
// downloads what leaves and zstds it; the completion comes back to the io thread, which sends it on.
// Only wire bytes cross PCIe; full-precision values stay on the GPU. Every collective uses the same
// steps (docs/gpu.md, "Device buffers"):
//   all-reduce       kEncodeInput at phase 0, kReduce in phases 0..N-2, kGather in N-1..2N-3
//   reduce-scatter   kEncodeInput, kReduce (the owner's last hop keeps the result, nothing leaves)
//   all-gather       kOwnBlock for our block, kGather for the others'
//   broadcast        kOwnBlock on the root, kGather elsewhere
#include <fmt/format.h>

#include <cstring>

#include "codec/quant.hpp"
#include "collective/ring_collective.hpp"

namespace pccl::collective {

void RingCollective::submitDevice(const DeviceStep& step) {
  ++jobs_open_;
  {
    std::lock_guard<std::mutex> lk(jobs_->mu);
    ++jobs_->running;
  }
  auto self = std::static_pointer_cast<RingCollective>(shared_from_this());
  auto result = std::make_shared<std::pair<uint32_t, uint32_t>>(0, 0);
  spec_.device->submit(
      [self, step, result](codec::gpu::JobContext& ctx) -> Status {
        if (self->jobs_->cancelled.load()) return Status::ok();  // the operation failed meanwhile
        return runDeviceStep(self->spec_, self->slot_cap_, step, ctx, &result->first, &result->second);
      },
      [self, step, result](const Status& st) {
        self->spec_.post([self, step, result, st] { self->deviceDone(step, st, result->first, result->second); });
        std::lock_guard<std::mutex> lk(self->jobs_->mu);
        --self->jobs_->running;
        self->jobs_->cv.notify_all();
      });
}

// On the engine's worker. `spec` and `slot_cap` never change after the ring is built, so reading them
// here races with nothing.
Status RingCollective::runDeviceStep(const RingOpSpec& spec, size_t slot_cap, const DeviceStep& step,
                                    codec::gpu::JobContext& ctx, uint32_t* len, uint32_t* flags) {
  const pcclGpuBackend_t& api = ctx.api;
  uint8_t* hslot = spec.wire + step.index * slot_cap;
  uint8_t* dslot = spec.device_wire + step.index * slot_cap;
  const auto where = [&] { return fmt::format("op {} phase {} segment {}", spec.op_id, step.phase, step.segment); };
  if (step.kind == DeviceStep::kReduce || step.kind == DeviceStep::kGather) {
    const size_t in_raw = phaseBytes(spec, step.phase, step.count);
    const uint8_t* src = hslot;
    if ((step.rx_flags & wire::kDataCompressed) != 0) {
      PCCL_ASSIGN_OR_RETURN(uint8_t* tmp, ctx.scratch(in_raw));
      PCCL_RETURN_IF_ERROR(ctx.compressor->decompress(hslot, step.rx_bytes, tmp, in_raw).withContext(where()));
      src = tmp;
    }
    PCCL_RETURN_IF_ERROR(codec::validateWire(spec.quant, spec.dtype, src, step.count).withContext(where()));
    // A plain all-gather segment is final as it is: straight into the output.
    const bool plain = spec.quant == codec::Quant::kNone;
    uint8_t* up = plain && step.kind == DeviceStep::kGather ? step.out : dslot;
    PCCL_RETURN_IF_ERROR(ctx.check(api.memcpy_async(up, src, in_raw, PCCL_GPU_COPY_H2D, ctx.stream), "upload"));
  }
  const uint8_t* down = nullptr;  // what leaves for the next hop
  PCCL_RETURN_IF_ERROR(runDeviceKernels(spec, step, ctx, dslot, &down));
  const size_t out_raw = down != nullptr ? phaseBytes(spec, step.send_phase, step.count) : 0;
  if (down != nullptr) {
    PCCL_RETURN_IF_ERROR(ctx.check(api.memcpy_async(hslot, down, out_raw, PCCL_GPU_COPY_D2H, ctx.stream), "download"));
  }
  PCCL_RETURN_IF_ERROR(ctx.check(api.stream_synchronize(ctx.stream), "stream_synchronize").withContext(where()));
  *len = static_cast<uint32_t>(out_raw);
  *flags = 0;
  if (down != nullptr && spec.compress > 0) {
    const size_t cap = codec::Compressor::bound(out_raw);
    PCCL_ASSIGN_OR_RETURN(uint8_t* tmp, ctx.scratch(cap));
    PCCL_ASSIGN_OR_RETURN(size_t z, ctx.compressor->compress(hslot, out_raw, tmp, cap, spec.compress));
    if (z != 0) {
      std::memcpy(hslot, tmp, z);
      *len = static_cast<uint32_t>(z);
      *flags = wire::kDataCompressed;
    }
  }
  return Status::ok();
}

// The kernels of one step, queued on the job's stream; *down := what to download for the next hop
// (nullptr: nothing leaves).
Status RingCollective::runDeviceKernels(const RingOpSpec& spec, const DeviceStep& step, codec::gpu::JobContext& ctx,
                                       uint8_t* dslot, const uint8_t** down) {
  const pcclGpuBackend_t& api = ctx.api;
  const int q = static_cast<int>(spec.quant);
  const int dt = static_cast<int>(spec.dtype);
  const bool plain = spec.quant == codec::Quant::kNone;
  const uint8_t* in = step.in;
  uint8_t* out = step.out;
  const size_t n = step.count;
  *down = dslot;
  switch (step.kind) {
    case DeviceStep::kEncodeInput:
      if (spec.partialSums()) {
        return ctx.check(api.widen_partials(dt, spec.world, in, n, dslot, ctx.stream), "widen_partials");
      }
      if (plain) {
        *down = in;
        return Status::ok();
      }
      return ctx.check(api.encode(q, dt, in, n, dslot, ctx.stream), "encode");
    case DeviceStep::kOwnBlock:
      // Final as it is; quantized, the owner encodes it once and keeps the decoded value, like the others.
      if (plain) {
        *down = in;
        if (in == out) return Status::ok();
        return ctx.check(api.memcpy_async(out, in, n * codec::dtypeSize(spec.dtype), PCCL_GPU_COPY_D2D, ctx.stream),
                         "copy of our block");
      }
      PCCL_RETURN_IF_ERROR(ctx.check(api.encode(q, dt, in, n, dslot, ctx.stream), "encode"));
      return ctx.check(api.decode(q, dt, dslot, n, out, ctx.stream), "decode");
    case DeviceStep::kReduce:
      if (spec.partialSums() && step.last) {  // the owner's last hop: divide once, send the elements
        *down = step.forward ? out : nullptr;
        return ctx.check(api.finish_partials(dt, spec.world, dslot, in, n, out, ctx.stream), "finish_partials");
      }
      if (spec.partialSums()) {
        return ctx.check(api.add_partials(dt, spec.world, dslot, in, n, dslot, ctx.stream), "add_partials");
      }
      PCCL_RETURN_IF_ERROR(ctx.check(
          api.decode_reduce(q, dt, static_cast<int>(spec.op), dslot, n, in, out, step.divisor, ctx.stream),
          "decode_reduce"));
      if (!step.forward) {  // a reduce-scatter's owner: the full-precision result stays
        *down = nullptr;
        return Status::ok();
      }
      if (plain) {
        *down = out;
        return Status::ok();
      }
      PCCL_RETURN_IF_ERROR(ctx.check(api.encode(q, dt, out, n, dslot, ctx.stream), "encode"));
      // The owner's last hop keeps the decoded value, like everybody else who receives it.
      if (step.last) return ctx.check(api.decode(q, dt, dslot, n, out, ctx.stream), "decode");
      return Status::ok();
    case DeviceStep::kGather:
      *down = nullptr;
      if (!plain) return ctx.check(api.decode(q, dt, dslot, n, out, ctx.stream), "decode");
      return Status::ok();
  }
  return Status::internal("unknown device step");
}

void RingCollective::deviceDone(const DeviceStep& step, const Status& st, uint32_t len, uint32_t flags) {
  --jobs_open_;
  if (over()) return;
  if (!st.isOk()) return fail(st);
  if (step.forward) {
    slot_len_[step.index] = len;
    slot_flags_[step.index] = flags;
    sendSegment(step.send_phase, step.segment);
  }
  maybeFinish();
}

void RingCollective::quiesce() {
  jobs_->cancelled = true;
  std::unique_lock<std::mutex> lk(jobs_->mu);
  jobs_->cv.wait(lk, [this] { return jobs_->running == 0; });
}

}  // namespace pccl::collective
