#include "collective/gather_allreduce.hpp"

#include <fmt/format.h>

#include <cstring>
#include <utility>

#include "codec/quant.hpp"
#include "codec/reduce.hpp"

namespace pccl::collective {

namespace {
constexpr size_t kSlotAlign = 64;

bool codedSpec(const RingOpSpec& spec) { return spec.quant != codec::Quant::kNone || spec.compress > 0; }

// Coded: bytes per slot, one segment's wire bytes rounded up to the alignment.
size_t slotCapacity(const RingOpSpec& spec) {
  return (codec::wireBytes(spec.quant, spec.dtype, spec.segment_elems) + kSlotAlign - 1) / kSlotAlign * kSlotAlign;
}
}  // namespace

size_t gatherSegmentElems(const RingOpSpec& spec, size_t floor_bytes) {
  return segmentElems(spec.count, 1, codec::dtypeSize(spec.dtype), spec.desc.segment_bytes, floor_bytes);
}

size_t gatherSegmentFloor(bool one_host) {
  return one_host ? kSegmentFloorBytes : kWanSegmentFloorBytes;
}

size_t gatherRegionBytes(const RingOpSpec& spec) {
  if (!codedSpec(spec)) return static_cast<size_t>(spec.world) * spec.count * codec::dtypeSize(spec.dtype);
  return static_cast<size_t>(spec.world) * segmentCount(spec.count, spec.segment_elems) * slotCapacity(spec);
}

GatherAllReduce::GatherAllReduce(const RingOpSpec& spec, std::shared_ptr<Striper> successor,
                                 std::shared_ptr<Striper> predecessor, Finished finished)
    : RingOp(spec.op_id, spec.seq, {successor, predecessor}, std::move(finished)), spec_(spec),
      successor_(std::move(successor)), predecessor_(std::move(predecessor)), elem_(codec::dtypeSize(spec.dtype)) {
  const uint32_t n = spec_.world;
  segments_ = segmentCount(spec_.count, spec_.segment_elems);
  cw_ = n / 2;
  ccw_ = n - 1 - cw_;
  recv_expected_ = static_cast<size_t>(n - 1) * segments_;
  const size_t forwards = (cw_ - 1) + (ccw_ > 0 ? ccw_ - 1 : 0);
  send_expected_ = segments_ * ((ccw_ > 0 ? 2 : 1) + forwards);
  received_.assign(static_cast<size_t>(n) * segments_, 0);
  arrived_.assign(segments_, 0);
  lendableRegion(spec_.input, spec_.count * elem_);  // host memory (device inputs are staged)
  lendableRegion(spec_.wire, gatherRegionBytes(spec_));
  if (coded()) {
    slot_cap_ = slotCapacity(spec_);
    slot_len_.assign(received_.size(), 0);
    slot_flags_.assign(received_.size(), 0);
  }
}

uint8_t* GatherAllReduce::slot(uint32_t origin, size_t s) const {
  if (coded()) return spec_.wire + index(origin, s) * slot_cap_;
  return spec_.wire + origin * spec_.count * elem_ + segment(s).offset * elem_;
}

const uint8_t* GatherAllReduce::bytesOf(uint32_t origin, size_t s) const {
  if (!coded() && origin == spec_.rank) return spec_.input + segment(s).offset * elem_;  // our input as it is
  return slot(origin, s);
}

size_t GatherAllReduce::rawBytes(size_t s) const {
  return coded() ? codec::wireBytes(spec_.quant, spec_.dtype, segment(s).count) : segment(s).count * elem_;
}

void GatherAllReduce::start() {
  if (coded()) {
    // Our input in its wire format, once: we decode these bytes too, like everybody else.
    for (size_t s = 0; s < segments_; ++s) {
      const Span seg = segment(s);
      const size_t i = index(spec_.rank, s);
      uint8_t* dst = slot(spec_.rank, s);
      codec::encode(spec_.quant, spec_.dtype, spec_.input + seg.offset * elem_, seg.count, dst);
      const size_t raw = rawBytes(s);
      slot_len_[i] = static_cast<uint32_t>(raw);
      if (spec_.compress > 0) {
        raw_.resize(codec::Compressor::bound(raw));
        auto z = spec_.compressor->compress(dst, raw, raw_.data(), raw_.size(), spec_.compress);
        if (!z.isOk()) return fail(z.status());
        if (*z != 0) {
          std::memcpy(dst, raw_.data(), *z);
          slot_len_[i] = static_cast<uint32_t>(*z);
          slot_flags_[i] = wire::kDataCompressed;
        }
      }
    }
  }
  for (size_t s = 0; s < segments_ && !over(); ++s) {
    sendSlot(*successor_, spec_.rank, s);
    if (ccw_ > 0) sendSlot(*predecessor_, spec_.rank, s);
  }
  maybeFinish();
}

void GatherAllReduce::sendSlot(Striper& to, uint32_t origin, size_t s) {
  if (over()) return;
  wire::DataHeader h = wire::dataHeader(spec_.op_id, spec_.phase_base | origin, 0, segment(s).offset);
  h.seq = spec_.seq;
  h.desc = spec_.desc;
  uint32_t bytes = static_cast<uint32_t>(rawBytes(s));
  if (coded()) {
    bytes = slot_len_[index(origin, s)];
    h.flags = slot_flags_[index(origin, s)];
  }
  send(to, h, bytesOf(origin, s), bytes);
}

void GatherAllReduce::forward(uint32_t origin, size_t s) {
  const uint32_t n = spec_.world;
  const uint32_t behind = (spec_.rank + n - origin) % n;  // hops it came from the predecessor's side
  if (behind <= cw_) {
    if (behind < cw_) sendSlot(*successor_, origin, s);
  } else if (n - behind < ccw_) {
    sendSlot(*predecessor_, origin, s);
  }
}

Result<uint8_t*> GatherAllReduce::placement(const wire::DataHeader& h, uint32_t bytes) {
  if (over()) return Status::internal("frame for a finished operation");
  if (h.phase >= spec_.world || h.phase == spec_.rank) {
    return Status::protocol(fmt::format("op {}: input of rank {} in a ring of {} (we are rank {})", spec_.op_id,
                                        h.phase, spec_.world, spec_.rank));
  }
  if (h.offset >= spec_.count || h.offset % spec_.segment_elems != 0) {
    return Status::protocol(fmt::format("op {} rank {}: bad segment offset {} (input of {} elements)", spec_.op_id,
                                        h.phase, h.offset, spec_.count));
  }
  const size_t s = h.offset / spec_.segment_elems;
  const size_t raw = rawBytes(s);
  PCCL_RETURN_IF_ERROR(acceptSegment(h, bytes, raw, spec_.compress > 0, received_[index(h.phase, s)],
                                     "rank"));
  return slot(h.phase, s);
}

void GatherAllReduce::withdraw(uint32_t, const wire::DataHeader& h) {
  if (over() || h.phase >= spec_.world || h.phase == spec_.rank) return;
  if (h.offset >= spec_.count || h.offset % spec_.segment_elems != 0) return;
  received_[index(h.phase, h.offset / spec_.segment_elems)] = 0;
}

Status GatherAllReduce::delivered(const wire::DataHeader& h, uint32_t bytes) {
  if (over()) return Status::ok();
  const uint32_t origin = h.phase;
  const size_t s = h.offset / spec_.segment_elems;
  if (coded()) {
    slot_len_[index(origin, s)] = bytes;
    slot_flags_[index(origin, s)] = h.flags & wire::kDataCompressed;
  }
  bytes_received_ += bytes;
  ++recv_done_;
  forward(origin, s);
  if (++arrived_[s] + 1 == spec_.world && spec_.output != nullptr) {
    Status st = reduceSegment(s);
    if (!st.isOk()) {
      fail(st);
      return st;
    }
  }
  maybeFinish();
  return Status::ok();
}

Result<const uint8_t*> GatherAllReduce::elements(uint32_t origin, size_t s) {
  const uint8_t* p = bytesOf(origin, s);
  if (!coded()) return p;
  const size_t i = index(origin, s);
  const size_t raw = rawBytes(s);
  const auto where = [&] { return fmt::format("op {} rank {} segment {}", spec_.op_id, origin, s); };
  if ((slot_flags_[i] & wire::kDataCompressed) != 0) {
    raw_.resize(raw);
    PCCL_RETURN_IF_ERROR(spec_.compressor->decompress(p, slot_len_[i], raw_.data(), raw).withContext(where()));
    p = raw_.data();
  }
  PCCL_RETURN_IF_ERROR(codec::validateWire(spec_.quant, spec_.dtype, p, segment(s).count).withContext(where()));
  if (spec_.quant == codec::Quant::kNone) return p;
  decoded_.resize(segment(s).count * elem_);
  codec::decode(spec_.quant, spec_.dtype, p, segment(s).count, decoded_.data());
  return static_cast<const uint8_t*>(decoded_.data());
}

// Every input's segment s is here: x0 op x1 op ... in rank order, on every peer alike.
Status GatherAllReduce::reduceSegment(size_t s) {
  const uint32_t n = spec_.world;
  const size_t count = segment(s).count;
  uint8_t* out = spec_.output + segment(s).offset * elem_;
  if (spec_.partialSums()) {  // integer avg: exact sums, one division
    partials_.resize(count * codec::partialSumSize(spec_.dtype, n));
    for (uint32_t o = 0; o < n; ++o) {
      PCCL_ASSIGN_OR_RETURN(const uint8_t* x, elements(o, s));
      if (o == 0) {
        codec::widenToPartials(spec_.dtype, n, x, count, partials_.data());
      } else if (o + 1 < n) {
        codec::addToPartials(spec_.dtype, n, partials_.data(), x, count, partials_.data());
      } else {
        codec::finishPartials(spec_.dtype, n, partials_.data(), x, count, out);
      }
    }
    return Status::ok();
  }
  for (uint32_t o = 0; o < n; ++o) {
    PCCL_ASSIGN_OR_RETURN(const uint8_t* x, elements(o, s));
    if (o == 0) {
      std::memcpy(out, x, count * elem_);
      continue;
    }
    const uint32_t divisor = o + 1 == n && spec_.op == codec::RedOp::kAvg ? spec_.divisor() : 1;
    codec::reduceInto(spec_.dtype, spec_.op, out, x, count, divisor);
  }
  return Status::ok();
}

}  // namespace pccl::collective
