#include "api/reduce_handle.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>

#include "codec/compress.hpp"
#include "codec/dtype.hpp"
#include "codec/quant.hpp"

namespace pccl {

Result<ReduceInfo> ReduceHandle::wait() const {
  if (!state_) return Status::invalidUsage("wait() on an empty ReduceHandle");
  std::unique_lock<std::mutex> lk(state_->mu);
  // No deadline here on purpose: the io thread ends every operation by its op_timeout_ms deadline (and
  // the communicator's destruction ends the rest), and returning earlier would hand back buffers that
  // pccl may still write.
  state_->cv.wait(lk, [&] { return state_->done; });
  if (!state_->status.isOk()) return state_->status;
  return state_->info;
}

bool ReduceHandle::waitFor(std::chrono::milliseconds timeout) const {
  if (!state_) return true;
  // Bounded so that now() + timeout cannot overflow the clock (a century is "forever" here).
  constexpr std::chrono::milliseconds kLongest = std::chrono::hours(24 * 365 * 100);
  timeout = std::clamp(timeout, std::chrono::milliseconds(0), kLongest);
  std::unique_lock<std::mutex> lk(state_->mu);
  return state_->cv.wait_for(lk, timeout, [&] { return state_->done; });
}

bool ReduceHandle::test() const {
  if (!state_) return true;
  std::lock_guard<std::mutex> lk(state_->mu);
  return state_->done;
}

Status checkCallOptions(const CollectiveCall& c) {
  const ReduceOptions& o = c.options;
  if (!codec::isValidDType(static_cast<uint8_t>(c.dtype))) {
    return Status::invalidArgument(fmt::format("unknown data type {}", static_cast<int>(c.dtype)));
  }
  if (!codec::isValidRedOp(static_cast<uint8_t>(c.op))) {
    return Status::invalidArgument(fmt::format("unknown reduction op {}", static_cast<int>(c.op)));
  }
  if (!codec::isValidQuant(static_cast<uint8_t>(o.quant))) {
    return Status::invalidArgument(fmt::format("unknown quantization {}", static_cast<int>(o.quant)));
  }
  PCCL_RETURN_IF_ERROR(codec::checkQuant(static_cast<codec::Quant>(o.quant), static_cast<codec::DType>(c.dtype),
                                          static_cast<codec::RedOp>(c.op)));
  if (o.compress != 0 && (o.compress < codec::kMinZstdLevel || o.compress > codec::kMaxZstdLevel)) {
    return Status::invalidArgument(fmt::format("compress must be 0 (off) or a zstd level {}..{}, got {}",
                                               codec::kMinZstdLevel, codec::kMaxZstdLevel, o.compress));
  }
  if (o.location != BufferLocation::kHost && o.location != BufferLocation::kDevice) {
    return Status::invalidArgument(fmt::format("unknown buffer location {}", static_cast<int>(o.location)));
  }
  return Status::ok();
}

namespace {
bool overlap(const uint8_t* a, size_t a_bytes, const uint8_t* b, size_t b_bytes) {
  return a < b + b_bytes && b < a + a_bytes;
}
}  // namespace

Result<CallLayout> checkCallBuffers(const CollectiveCall& c, uint32_t rank, uint32_t world) {
  CallLayout l;
  const char* name = wire::collectiveName(c.kind);
  if (c.kind == wire::Collective::kBroadcast && c.root >= world) {
    return Status::invalidArgument(
        fmt::format("broadcast root {} is not a rank of this group's ring (group size {})", c.root, world));
  }
  if (c.count == 0) return l;
  const size_t elem = codec::dtypeSize(static_cast<codec::DType>(c.dtype));
  const bool blocks = c.kind == wire::Collective::kAllGather || c.kind == wire::Collective::kReduceScatter;
  const size_t limit = SIZE_MAX / elem / (blocks ? world : 1);
  if (c.count > limit) return Status::invalidArgument(fmt::format("count {} overflows the address space", c.count));
  const auto* s = static_cast<const uint8_t*>(c.send);
  auto* r = static_cast<uint8_t*>(c.recv);
  const size_t bytes = c.count * elem;
  // A quantized owner keeps the decoded value of its own block (its input, in place): only then does an
  // all-gather or a broadcast root write what it reads.
  const bool adopts = c.options.quant != Quant::kNone;
  switch (c.kind) {
    case wire::Collective::kAllReduce:
      l = CallLayout{c.count, bytes, bytes, s == r, r, 0, bytes};
      if (s == nullptr || r == nullptr) return Status::invalidArgument("send and recv buffers must not be NULL");
      if (s != r && overlap(s, bytes, r, bytes)) {
        return Status::invalidArgument(
            "send and recv overlap without being the same buffer (in place needs send == recv)");
      }
      return l;
    case wire::Collective::kBroadcast: {
      const bool root = c.root == rank;
      if (r == nullptr) return Status::invalidArgument("the broadcast's recv buffer must not be NULL");
      if (root && s == nullptr) return Status::invalidArgument("the broadcast root's send buffer must not be NULL");
      if (root && s != r && overlap(s, bytes, r, bytes)) {
        return Status::invalidArgument(
            "send and recv overlap without being the same buffer (in place needs send == recv)");
      }
      // A non-root's recv is restored on failure; a root's in-place buffer only needs it when it adopts.
      l = CallLayout{c.count, root ? bytes : 0, bytes, root ? s == r && adopts : true, r, 0, bytes};
      return l;
    }
    case wire::Collective::kAllGather: {
      if (s == nullptr || r == nullptr) return Status::invalidArgument("send and recv buffers must not be NULL");
      const size_t out = bytes * world;
      uint8_t* own = r + rank * bytes;
      if (s != own && overlap(s, bytes, r, out)) {
        return Status::invalidArgument(fmt::format(
            "all-gather: send overlaps recv without being this rank's block of it (in place needs send == recv + "
            "rank x count elements, rank {})",
            rank));
      }
      l = CallLayout{c.count * world, bytes, out, s == own && adopts, own, 0, bytes};
      return l;
    }
    case wire::Collective::kReduceScatter: {
      if (s == nullptr || r == nullptr) return Status::invalidArgument("send and recv buffers must not be NULL");
      const size_t in = bytes * world;
      const uint8_t* own = s + rank * bytes;
      if (r != own && overlap(s, in, r, bytes)) {
        return Status::invalidArgument(fmt::format(
            "reduce-scatter: recv overlaps send without being this rank's block of it (in place needs recv == send "
            "+ rank x count elements, rank {})",
            rank));
      }
      l = CallLayout{c.count * world, in, bytes, r == own, r, rank * bytes, bytes};
      return l;
    }
    case wire::Collective::kBarrier:
      return l;
  }
  return Status::invalidArgument(fmt::format("unknown collective {}", name));
}

}  // namespace pccl
