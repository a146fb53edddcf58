#include "collective/ring_op.hpp"

#include <fmt/format.h>

#include <utility>

namespace pccl::collective {

RingOp::RingOp(uint64_t op_id, uint32_t seq, std::vector<std::shared_ptr<Striper>> stripers, Finished finished)
    : op_id_(op_id), seq_(seq), stripers_(std::move(stripers)), finished_(std::move(finished)) {}

void RingOp::lendableRegion(const uint8_t* base, size_t bytes) {
  if (base != nullptr && bytes > 0) lendable_.push_back({reinterpret_cast<uintptr_t>(base), bytes});
}

void RingOp::lendFrom(const std::vector<wire::LendRegion>& regions) {
  lendable_.insert(lendable_.begin(), regions.begin(), regions.end());  // send() takes the first that holds it
}

void RingOp::send(Striper& to, const wire::DataHeader& h, const uint8_t* payload, uint32_t bytes) {
  std::weak_ptr<RingOp> weak = weak_from_this();
  ++sends_issued_;
  wire::LendRegion region;
  for (const auto& r : lendable_) {
    if (r.contains(reinterpret_cast<uintptr_t>(payload), bytes)) {
      region = r;
      break;
    }
  }
  to.send(h, payload, bytes, [weak, bytes](const Status& st) {
    auto self = weak.lock();
    if (!self) return;
    ++self->send_done_;
    if (self->over_) {
      if (self->quiet_ && self->ownSendsInFlight() == 0) {
        auto quiet = std::move(self->quiet_);
        self->quiet_ = nullptr;
        quiet();
      }
      return;
    }
    if (!st.isOk()) return self->fail(st);
    self->bytes_sent_ += bytes;
    self->maybeFinish();
  }, region);
}

void RingOp::maybeFinish() {
  if (over_ || ownSendsInFlight() > 0 || !complete()) return;
  auto self = shared_from_this();  // `finished` may drop the owner's reference
  over_ = true;
  Finished f = std::move(finished_);
  f(Status::ok());
}

void RingOp::fail(const Status& why) {
  if (over_) return;
  auto self = shared_from_this();
  over_ = true;
  stopWork();
  Finished f = std::move(finished_);
  f(why);
}

void RingOp::whenQuiet(std::function<void()> quiet) {
  const Status why = Status::internal("the operation ended");
  auto self = shared_from_this();
  for (auto& s : stripers_) s->cancel(op_id_, seq_, why);
  if (ownSendsInFlight() == 0) return quiet();
  quiet_ = std::move(quiet);
}

Status RingOp::acceptSegment(const wire::DataHeader& h, uint32_t bytes, size_t raw, bool compress, uint8_t& seen,
                             const char* phase_name) {
  const auto where = [&] { return fmt::format("op {} {} {}", h.op_id, phase_name, h.phase); };
  if ((h.flags & wire::kDataCompressed) != 0) {
    if (!compress) {
      return Status::protocol(fmt::format("{}: compressed segment in an operation without compression", where()));
    }
    if (bytes == 0 || bytes >= raw) {
      return Status::protocol(fmt::format("{}: compressed segment at {} carries {} bytes, expected 1..{}", where(),
                                          h.offset, bytes, raw - 1));
    }
  } else if (bytes != raw) {
    return Status::protocol(fmt::format("{}: segment at {} carries {} bytes, expected {}", where(), h.offset, bytes, raw));
  }
  if (seen != 0) return Status::protocol(fmt::format("{}: segment at {} received twice", where(), h.offset));
  seen = 1;
  return Status::ok();
}

}  // namespace pccl::collective
