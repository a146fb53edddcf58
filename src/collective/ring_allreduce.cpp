#include "collective/ring_allreduce.hpp"

#include <fmt/format.h>

#include <utility>

#include "codec/reduce.hpp"

namespace pccl::collective {

RingAllReduce::RingAllReduce(const RingOpSpec& spec, Channels successor, Finished finished)
    : spec_(spec), successor_(std::move(successor)), finished_(std::move(finished)),
      elem_(codec::dtypeSize(spec.dtype)) {
  const uint32_t phases = phaseCount(spec_.world);
  first_slot_.resize(phases + 1);
  for (uint32_t p = 0; p < phases; ++p) {
    const size_t in = segmentsOf(recvChunk(spec_.rank, spec_.world, p));
    first_slot_[p + 1] = first_slot_[p] + in;
    send_expected_ += segmentsOf(sendChunk(spec_.rank, spec_.world, p));
  }
  recv_expected_ = first_slot_[phases];
  received_.assign(recv_expected_, 0);
}

size_t RingAllReduce::segmentsOf(uint32_t chunk_index) const {
  return segmentCount(chunk(chunk_index).count, spec_.segment_elems);
}

void RingAllReduce::start() {
  const size_t n = segmentsOf(sendChunk(spec_.rank, spec_.world, 0));
  for (size_t s = 0; s < n && !over_; ++s) sendSegment(0, s);
  maybeFinish();
}

// The connection with the least data waiting to be acknowledged (our queue plus the kernel's), so a
// connection slowed by a loss or a small congestion window gets fewer segments and none sits idle.
// Ties (e.g. all empty) rotate from segment + op id, spreading small concurrent operations.
std::shared_ptr<net::DataChannel>& RingAllReduce::pickConnection(size_t segment) {
  const size_t k = successor_.size();
  size_t best = (segment + spec_.op_id) % k;
  uint64_t best_load = successor_[best]->backlog();
  for (size_t i = 1; i < k && best_load > 0; ++i) {
    const size_t c = (segment + spec_.op_id + i) % k;
    const uint64_t load = successor_[c]->backlog();
    if (load < best_load) {
      best = c;
      best_load = load;
    }
  }
  return successor_[best];
}

void RingAllReduce::sendSegment(uint32_t phase, size_t segment) {
  const Span c = chunk(sendChunk(spec_.rank, spec_.world, phase));
  const Span s = segmentOf(c.count, spec_.segment_elems, segment);
  const uint8_t* base = phase == 0 ? spec_.input : spec_.output;
  const uint8_t* src = base + (c.offset + s.offset) * elem_;
  const uint32_t bytes = static_cast<uint32_t>(s.count * elem_);
  wire::DataHeader h{spec_.op_id, phase, s.offset};
  auto& ch = pickConnection(segment);
  std::weak_ptr<RingAllReduce> weak = weak_from_this();
  ch->send(h, src, bytes, [weak, bytes](const Status& st) {
    auto self = weak.lock();
    if (!self || self->over_) return;
    if (!st.isOk()) return self->fail(st);
    self->bytes_sent_ += bytes;
    ++self->send_done_;
    self->maybeFinish();
  });
}

Result<uint8_t*> RingAllReduce::placement(const wire::DataHeader& h, uint32_t bytes) {
  if (over_) return Status::internal("frame for a finished operation");
  if (h.phase >= phaseCount(spec_.world)) {
    return Status::protocol(fmt::format("op {}: phase {} out of range", spec_.op_id, h.phase));
  }
  const Span c = chunk(recvChunk(spec_.rank, spec_.world, h.phase));
  if (h.offset >= c.count || h.offset % spec_.segment_elems != 0) {
    return Status::protocol(fmt::format("op {} phase {}: bad segment offset {} (chunk of {} elements)", spec_.op_id,
                                        h.phase, h.offset, c.count));
  }
  const size_t segment = h.offset / spec_.segment_elems;
  const Span s = segmentOf(c.count, spec_.segment_elems, segment);
  if (bytes != s.count * elem_) {
    return Status::protocol(fmt::format("op {} phase {}: segment at {} carries {} bytes, expected {}", spec_.op_id,
                                        h.phase, h.offset, bytes, s.count * elem_));
  }
  uint8_t& seen = received_[first_slot_[h.phase] + segment];
  if (seen != 0) {
    return Status::protocol(fmt::format("op {} phase {}: segment at {} received twice", spec_.op_id, h.phase, h.offset));
  }
  seen = 1;
  return spec_.output + (c.offset + s.offset) * elem_;
}

void RingAllReduce::delivered(const wire::DataHeader& h) {
  if (over_) return;
  const uint32_t p = h.phase;
  const Span c = chunk(recvChunk(spec_.rank, spec_.world, p));
  const size_t segment = h.offset / spec_.segment_elems;
  const Span s = segmentOf(c.count, spec_.segment_elems, segment);
  const size_t at = (c.offset + s.offset) * elem_;
  bytes_received_ += s.count * elem_;
  ++recv_done_;
  if (isReducePhase(spec_.world, p)) {
    // Combine the predecessor's partial result with our input; the owner's last hop finalises avg.
    const bool last = isLastReducePhase(spec_.world, p);
    const uint32_t divisor = last && spec_.op == codec::RedOp::kAvg ? spec_.world : 1;
    codec::reduceInto(spec_.dtype, spec_.op, spec_.output + at, spec_.input + at, s.count, divisor);
    sendSegment(p + 1, segment);
  } else if (!isLastPhase(spec_.world, p)) {
    sendSegment(p + 1, segment);  // all-gather: pass the finished bytes on
  }
  maybeFinish();
}

void RingAllReduce::maybeFinish() {
  if (over_ || recv_done_ < recv_expected_ || send_done_ < send_expected_) return;
  auto self = shared_from_this();  // `finished` may drop the owner's reference
  over_ = true;
  Finished f = std::move(finished_);
  f(Status::ok());
}

void RingAllReduce::fail(const Status& why) {
  if (over_) return;
  auto self = shared_from_this();
  over_ = true;
  Finished f = std::move(finished_);
  f(why);
}

}  // namespace pccl::collective
