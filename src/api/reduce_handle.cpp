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

Status checkReduceArgs(const void* send, void* recv, size_t count, DataType dtype, RedOp op, const ReduceOptions& o) {
  if (!codec::isValidDType(static_cast<uint8_t>(dtype))) {
    return Status::invalidArgument(fmt::format("unknown data type {}", static_cast<int>(dtype)));
  }
  if (!codec::isValidRedOp(static_cast<uint8_t>(op))) {
    return Status::invalidArgument(fmt::format("unknown reduction op {}", static_cast<int>(op)));
  }
  if (!codec::isValidQuant(static_cast<uint8_t>(o.quant))) {
    return Status::invalidArgument(fmt::format("unknown quantization {}", static_cast<int>(o.quant)));
  }
  PCCL_RETURN_IF_ERROR(codec::checkQuant(static_cast<codec::Quant>(o.quant), static_cast<codec::DType>(dtype),
                                          static_cast<codec::RedOp>(op)));
  if (o.compress != 0 && (o.compress < codec::kMinZstdLevel || o.compress > codec::kMaxZstdLevel)) {
    return Status::invalidArgument(fmt::format("compress must be 0 (off) or a zstd level {}..{}, got {}",
                                               codec::kMinZstdLevel, codec::kMaxZstdLevel, o.compress));
  }
  if (o.location != BufferLocation::kHost && o.location != BufferLocation::kDevice) {
    return Status::invalidArgument(fmt::format("unknown buffer location {}", static_cast<int>(o.location)));
  }
  if (count == 0) return Status::ok();
  if (send == nullptr || recv == nullptr) return Status::invalidArgument("send and recv buffers must not be NULL");
  const size_t elem = codec::dtypeSize(static_cast<codec::DType>(dtype));
  if (count > SIZE_MAX / elem) return Status::invalidArgument(fmt::format("count {} overflows the address space", count));
  const auto* s = static_cast<const uint8_t*>(send);
  const auto* r = static_cast<const uint8_t*>(recv);
  const size_t bytes = count * elem;
  if (s != r && s < r + bytes && r < s + bytes) {
    return Status::invalidArgument("send and recv overlap without being the same buffer (in place needs send == recv)");
  }
  return Status::ok();
}

}  // namespace pccl
