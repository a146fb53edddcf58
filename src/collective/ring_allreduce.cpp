#include "collective/ring_allreduce.hpp"

#include <fmt/format.h>

#include <cstring>
#include <utility>

#include "codec/quant.hpp"
#include "codec/reduce.hpp"

namespace pccl::collective {

namespace {
constexpr size_t kSlotAlign = 64;

size_t slotCapacity(const RingOpSpec& spec) {
  const size_t raw = codec::wireBytes(spec.quant, spec.dtype, spec.segment_elems);
  return (raw + kSlotAlign - 1) / kSlotAlign * kSlotAlign;
}

size_t totalSegments(const RingOpSpec& spec) {
  size_t n = 0;
  for (uint32_t c = 0; c < spec.world; ++c) n += segmentCount(chunkOf(spec.count, spec.world, c).count, spec.segment_elems);
  return n;
}
}  // namespace

size_t wireRegionBytes(const RingOpSpec& spec) {
  return spec.coded() ? totalSegments(spec) * slotCapacity(spec) : 0;
}

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
  if (spec_.coded()) {
    first_seg_.resize(spec_.world + 1);
    for (uint32_t c = 0; c < spec_.world; ++c) first_seg_[c + 1] = first_seg_[c] + segmentsOf(c);
    slot_cap_ = slotCapacity(spec_);
    slot_len_.assign(first_seg_[spec_.world], 0);
    slot_flags_.assign(first_seg_[spec_.world], 0);
  }
}

size_t RingAllReduce::segmentsOf(uint32_t chunk_index) const {
  return segmentCount(chunk(chunk_index).count, spec_.segment_elems);
}

void RingAllReduce::start() {
  const uint32_t first = sendChunk(spec_.rank, spec_.world, 0);
  const size_t n = segmentsOf(first);
  for (size_t s = 0; s < n && !over_; ++s) {
    if (spec_.coded()) {
      const Span c = chunk(first);
      const Span seg = segmentOf(c.count, spec_.segment_elems, s);
      Status st = encodeSlot(slotIndex(first, s), spec_.input + (c.offset + seg.offset) * elem_, seg.count, nullptr);
      if (!st.isOk()) return fail(st);
    }
    sendSegment(0, s);
  }
  maybeFinish();
}

// Encodes count elements at src into the slot (then zstd, when that makes it smaller). The owner of
// a chunk passes adopt_into: the value it keeps is the decoded one, like everybody else's.
Status RingAllReduce::encodeSlot(size_t index, const uint8_t* src, size_t count, uint8_t* adopt_into) {
  uint8_t* dst = slot(index);
  const size_t raw = codec::wireBytes(spec_.quant, spec_.dtype, count);
  codec::encode(spec_.quant, spec_.dtype, src, count, dst);
  if (adopt_into != nullptr && spec_.quant != codec::Quant::kNone) {
    codec::decode(spec_.quant, spec_.dtype, dst, count, adopt_into);
  }
  slot_len_[index] = static_cast<uint32_t>(raw);
  slot_flags_[index] = 0;
  if (spec_.compress > 0) {
    raw_.resize(codec::Compressor::bound(raw));
    auto z = spec_.compressor->compress(dst, raw, raw_.data(), raw_.size(), spec_.compress);
    if (!z.isOk()) return z.status();
    if (*z != 0) {
      std::memcpy(dst, raw_.data(), *z);
      slot_len_[index] = static_cast<uint32_t>(*z);
      slot_flags_[index] = wire::kDataCompressed;
    }
  }
  return Status::ok();
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
  uint32_t bytes = static_cast<uint32_t>(s.count * elem_);
  wire::DataHeader h{spec_.op_id, phase, 0, s.offset};
  if (spec_.coded()) {
    const size_t index = slotIndex(sendChunk(spec_.rank, spec_.world, phase), segment);
    src = slot(index);
    bytes = slot_len_[index];
    h.flags = slot_flags_[index];
  }
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
  const size_t raw = codec::wireBytes(spec_.quant, spec_.dtype, s.count);
  if ((h.flags & wire::kDataCompressed) != 0) {
    if (spec_.compress == 0) {
      return Status::protocol(fmt::format("op {} phase {}: compressed segment in an operation without compression",
                                          spec_.op_id, h.phase));
    }
    if (bytes == 0 || bytes >= raw) {
      return Status::protocol(fmt::format("op {} phase {}: compressed segment at {} carries {} bytes, expected 1..{}",
                                          spec_.op_id, h.phase, h.offset, bytes, raw - 1));
    }
  } else if (bytes != raw) {
    return Status::protocol(fmt::format("op {} phase {}: segment at {} carries {} bytes, expected {}", spec_.op_id,
                                        h.phase, h.offset, bytes, raw));
  }
  uint8_t& seen = received_[first_slot_[h.phase] + segment];
  if (seen != 0) {
    return Status::protocol(fmt::format("op {} phase {}: segment at {} received twice", spec_.op_id, h.phase, h.offset));
  }
  seen = 1;
  if (spec_.coded()) return slot(slotIndex(recvChunk(spec_.rank, spec_.world, h.phase), segment));
  return spec_.output + (c.offset + s.offset) * elem_;
}

Status RingAllReduce::delivered(const wire::DataHeader& h, uint32_t bytes) {
  if (over_) return Status::ok();
  if (spec_.coded()) {
    Status st = deliveredCoded(h, bytes);
    if (!st.isOk()) fail(st);
    return st;
  }
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
  return Status::ok();
}

Status RingAllReduce::deliveredCoded(const wire::DataHeader& h, uint32_t bytes) {
  const uint32_t p = h.phase;
  const uint32_t ci = recvChunk(spec_.rank, spec_.world, p);
  const Span c = chunk(ci);
  const size_t segment = h.offset / spec_.segment_elems;
  const Span s = segmentOf(c.count, spec_.segment_elems, segment);
  const size_t index = slotIndex(ci, segment);
  const size_t at = (c.offset + s.offset) * elem_;
  const size_t raw_bytes = codec::wireBytes(spec_.quant, spec_.dtype, s.count);
  bytes_received_ += bytes;
  ++recv_done_;
  const uint8_t* raw = slot(index);
  if ((h.flags & wire::kDataCompressed) != 0) {
    raw_.resize(raw_bytes);
    PCCL_RETURN_IF_ERROR(spec_.compressor->decompress(raw, bytes, raw_.data(), raw_bytes)
                             .withContext(fmt::format("op {} phase {} segment at {}", spec_.op_id, p, h.offset)));
    raw = raw_.data();
  }
  PCCL_RETURN_IF_ERROR(codec::validateWire(spec_.quant, spec_.dtype, raw, s.count)
                           .withContext(fmt::format("op {} phase {} segment at {}", spec_.op_id, p, h.offset)));
  if (isReducePhase(spec_.world, p)) {
    // Our input combined with the decoded partial result, in full precision; then re-encoded for the
    // next hop. The owner's last hop finalises avg and adopts what the others will decode.
    const bool last = isLastReducePhase(spec_.world, p);
    const uint32_t divisor = last && spec_.op == codec::RedOp::kAvg ? spec_.world : 1;
    codec::decodeReduce(spec_.quant, spec_.dtype, spec_.op, raw, s.count, spec_.input + at, spec_.output + at, divisor);
    PCCL_RETURN_IF_ERROR(encodeSlot(index, spec_.output + at, s.count, last ? spec_.output + at : nullptr));
    sendSegment(p + 1, segment);
  } else {
    codec::decode(spec_.quant, spec_.dtype, raw, s.count, spec_.output + at);
    slot_len_[index] = bytes;  // forwarded exactly as it came
    slot_flags_[index] = h.flags;
    if (!isLastPhase(spec_.world, p)) sendSegment(p + 1, segment);
  }
  maybeFinish();
  return Status::ok();
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
