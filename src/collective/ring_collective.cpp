#include "collective/ring_collective.hpp"

#include <fmt/format.h>

#include <cstring>
#include <utility>

#include "codec/quant.hpp"
#include "codec/reduce.hpp"

namespace pccl::collective {

size_t phaseBytes(const RingOpSpec& spec, uint32_t phase, size_t count) {
  if (spec.partialSums() && isReducePhase(spec.world, phase)) {
    return count * codec::partialSumSize(spec.dtype, spec.world);
  }
  return codec::wireBytes(spec.quant, spec.dtype, count);
}

namespace {
constexpr size_t kSlotAlign = 64;

size_t slotCapacity(const RingOpSpec& spec) {
  const size_t reduce = phaseBytes(spec, 0, spec.segment_elems);
  const size_t gather = phaseBytes(spec, phaseCount(spec.world) - 1, spec.segment_elems);
  const size_t raw = reduce > gather ? reduce : gather;
  return (raw + kSlotAlign - 1) / kSlotAlign * kSlotAlign;
}

// The ring's chunks of the collective's layout. The all-reduce's chunk c is chunkOf(c) (owned by rank
// c-1); the other collectives name blocks by their owner instead: block b is chunk b+1.
std::vector<Span> ringChunks(const RingOpSpec& spec) {
  std::vector<Span> out(spec.world);
  for (uint32_t c = 0; c < spec.world; ++c) {
    switch (spec.kind) {
      case wire::Collective::kAllReduce:
        out[c] = chunkOf(spec.count, spec.world, c);
        break;
      case wire::Collective::kBroadcast:
        out[c] = c == (spec.root + 1) % spec.world ? Span{0, spec.count} : Span{0, 0};
        break;
      default:
        out[c] = spec.blocks.empty() ? chunkOf(spec.count, spec.world, (c + spec.world - 1) % spec.world)
                                     : spec.blocks[(c + spec.world - 1) % spec.world];
        break;
    }
  }
  return out;
}

size_t totalSegments(const RingOpSpec& spec) {
  size_t n = 0;
  for (const Span& c : ringChunks(spec)) n += segmentCount(c.count, spec.segment_elems);
  return n;
}
}  // namespace

size_t wireRegionBytes(const RingOpSpec& spec) {
  return spec.coded() ? totalSegments(spec) * slotCapacity(spec) : 0;
}

RingCollective::RingCollective(const RingOpSpec& spec, std::shared_ptr<Striper> successor, Finished finished)
    : RingOp(spec.op_id, spec.seq, {successor}, std::move(finished)), spec_(spec), successor_(std::move(successor)),
      elem_(codec::dtypeSize(spec.dtype)), chunks_(ringChunks(spec)) {
  const uint32_t phases = phaseCount(spec_.world);
  first_phase_ = spec_.kind == wire::Collective::kAllGather || spec_.kind == wire::Collective::kBroadcast
                     ? spec_.world - 1
                     : 0;
  end_phase_ = spec_.kind == wire::Collective::kReduceScatter ? spec_.world - 1 : phases;
  first_slot_.resize(end_phase_ - first_phase_ + 1);
  for (uint32_t p = first_phase_; p < end_phase_; ++p) {
    const size_t in = segmentsOf(recvChunk(spec_.rank, spec_.world, p));
    first_slot_[p - first_phase_ + 1] = first_slot_[p - first_phase_] + in;
    send_expected_ += segmentsOf(sendChunk(spec_.rank, spec_.world, p));
  }
  recv_expected_ = first_slot_.back();
  received_.assign(recv_expected_, 0);
  // What our frames may be lent from: the host buffers, by their sizes in the call's layout (device
  // buffers are never sent from: their segments go through the pinned wire slots).
  if (spec_.device == nullptr) {
    const size_t all = spec_.count * elem_;
    const uint32_t own = sendChunk(spec_.rank, spec_.world, first_phase_);
    lendableRegion(spec_.input, spec_.reduces() ? all : chunk(own).count * elem_);
    const bool rs = spec_.kind == wire::Collective::kReduceScatter;
    lendableRegion(spec_.output, rs ? chunk((spec_.rank + 1) % spec_.world).count * elem_ : all);
    lendableRegion(spec_.scratch, all);
  }
  lendableRegion(spec_.wire, wireRegionBytes(spec_));
  if (spec_.coded()) {
    first_seg_.resize(spec_.world + 1);
    for (uint32_t c = 0; c < spec_.world; ++c) first_seg_[c + 1] = first_seg_[c] + segmentsOf(c);
    slot_cap_ = slotCapacity(spec_);
    slot_len_.assign(first_seg_[spec_.world], 0);
    slot_flags_.assign(first_seg_[spec_.world], 0);
  }
}

size_t RingCollective::segmentsOf(uint32_t chunk_index) const {
  return segmentCount(chunk(chunk_index).count, spec_.segment_elems);
}

const uint8_t* RingCollective::inputAt(uint32_t c, size_t at) const {
  // An all-gather's or broadcast's input is our own block alone.
  if (!spec_.reduces()) return spec_.input + at * elem_;
  return spec_.input + (chunks_[c].offset + at) * elem_;
}

uint8_t* RingCollective::outputAt(uint32_t c, size_t at) const {
  if (spec_.kind == wire::Collective::kReduceScatter) {
    // Our block is the output; the others only pass through.
    if (c == (spec_.rank + 1) % spec_.world) return spec_.output + at * elem_;
    return spec_.scratch + (chunks_[c].offset + at) * elem_;
  }
  return spec_.output + (chunks_[c].offset + at) * elem_;
}

// All-gather and broadcast: our block (a broadcast's root: the whole buffer; the others: nothing) is
// final as it is, so it goes to our output and out to the successor at once. Quantized, the owner
// encodes it once and keeps the decoded value, like everybody else.
void RingCollective::startGather() {
  const uint32_t own = sendChunk(spec_.rank, spec_.world, first_phase_);
  const Span c = chunk(own);
  const bool adopt = spec_.quant != codec::Quant::kNone;
  if (c.count > 0 && !adopt && spec_.device == nullptr && inputAt(own, 0) != outputAt(own, 0)) {
    std::memcpy(outputAt(own, 0), inputAt(own, 0), c.count * elem_);
  }
  const size_t n = segmentsOf(own);
  for (size_t s = 0; s < n && !over(); ++s) {
    if (spec_.device != nullptr) {  // copied (or encoded and adopted) on the GPU, then sent
      const Span seg = segmentOf(c.count, spec_.segment_elems, s);
      DeviceStep step;
      step.kind = DeviceStep::kOwnBlock;
      step.send_phase = first_phase_;
      step.segment = s;
      step.index = slotIndex(own, s);
      step.in = inputAt(own, seg.offset);
      step.out = outputAt(own, seg.offset);
      step.count = seg.count;
      submitDevice(step);
      continue;
    }
    if (spec_.coded()) {
      const Span seg = segmentOf(c.count, spec_.segment_elems, s);
      const uint8_t* src = adopt ? inputAt(own, seg.offset) : outputAt(own, seg.offset);
      Status st = encodeSlot(slotIndex(own, s), src, seg.count, adopt ? outputAt(own, seg.offset) : nullptr);
      if (!st.isOk()) return fail(st);
    }
    sendSegment(first_phase_, s);
  }
}

void RingCollective::start() {
  if (first_phase_ != 0) {
    startGather();
    return maybeFinish();
  }
  const uint32_t first = sendChunk(spec_.rank, spec_.world, 0);
  const size_t n = segmentsOf(first);
  for (size_t s = 0; s < n && !over(); ++s) {
    if (spec_.device != nullptr) {
      const Span c = chunk(first);
      const Span seg = segmentOf(c.count, spec_.segment_elems, s);
      DeviceStep step;
      step.segment = s;
      step.index = slotIndex(first, s);
      step.in = inputAt(first, seg.offset);
      step.count = seg.count;
      submitDevice(step);
      continue;
    }
    if (spec_.coded()) {
      const Span c = chunk(first);
      const Span seg = segmentOf(c.count, spec_.segment_elems, s);
      Status st = encodeInput(slotIndex(first, s), inputAt(first, seg.offset), seg.count);
      if (!st.isOk()) return fail(st);
    }
    sendSegment(0, s);
  }
  maybeFinish();
}

// Encodes count elements at src into the slot (then zstd, when that makes it smaller). The owner of
// a chunk passes adopt_into: the value it keeps is the decoded one, like everybody else's.
Status RingCollective::encodeSlot(size_t index, const uint8_t* src, size_t count, uint8_t* adopt_into) {
  codec::encode(spec_.quant, spec_.dtype, src, count, slot(index));
  if (adopt_into != nullptr && spec_.quant != codec::Quant::kNone) {
    codec::decode(spec_.quant, spec_.dtype, slot(index), count, adopt_into);
  }
  return compressSlot(index, codec::wireBytes(spec_.quant, spec_.dtype, count));
}

// Phase 0: our input segment into its slot, in the reduce-scatter's format.
Status RingCollective::encodeInput(size_t index, const uint8_t* src, size_t count) {
  if (!spec_.partialSums()) return encodeSlot(index, src, count, nullptr);
  codec::widenToPartials(spec_.dtype, spec_.world, src, count, slot(index));
  return compressSlot(index, count * codec::partialSumSize(spec_.dtype, spec_.world));
}

// The slot holds `raw` wire bytes: with compression, zstd them in place when that makes them smaller.
Status RingCollective::compressSlot(size_t index, size_t raw) {
  uint8_t* dst = slot(index);
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

// Integer avg: our input added to the partial sums that arrived (`raw`) and passed on; the owner's
// last hop divides once and passes on the elements.
Status RingCollective::reducePartials(size_t index, const uint8_t* raw, const uint8_t* in, uint8_t* out, size_t count,
                                     bool last, bool forward) {
  if (last) {
    codec::finishPartials(spec_.dtype, spec_.world, raw, in, count, out);
    return forward ? encodeSlot(index, out, count, nullptr) : Status::ok();
  }
  codec::addToPartials(spec_.dtype, spec_.world, raw, in, count, slot(index));
  return compressSlot(index, count * codec::partialSumSize(spec_.dtype, spec_.world));
}

void RingCollective::sendSegment(uint32_t phase, size_t segment) {
  const uint32_t ci = sendChunk(spec_.rank, spec_.world, phase);
  const Span c = chunk(ci);
  const Span s = segmentOf(c.count, spec_.segment_elems, segment);
  const uint8_t* src = phase == 0 ? inputAt(ci, s.offset) : outputAt(ci, s.offset);
  uint32_t bytes = static_cast<uint32_t>(s.count * elem_);
  wire::DataHeader h = wire::dataHeader(spec_.op_id, spec_.phase_base + phase, 0, s.offset);
  h.seq = spec_.seq;
  h.desc = spec_.desc;
  if (spec_.coded()) {
    const size_t index = slotIndex(sendChunk(spec_.rank, spec_.world, phase), segment);
    src = slot(index);
    bytes = slot_len_[index];
    h.flags = slot_flags_[index];
  }
  if (!successor_ready_) {
    if (eager_sent_ + bytes > spec_.eager_bytes) {
      held_.emplace_back(phase, segment);
      return;
    }
    eager_sent_ += bytes;
  }
  send(*successor_, h, src, bytes);
}

void RingCollective::successorReady() {
  if (successor_ready_) return;
  successor_ready_ = true;
  std::vector<std::pair<uint32_t, size_t>> held = std::move(held_);
  held_.clear();
  for (const auto& [phase, segment] : held) {
    if (over()) return;
    sendSegment(phase, segment);
  }
}

Result<uint8_t*> RingCollective::placement(const wire::DataHeader& h, uint32_t bytes) {
  if (over()) return Status::internal("frame for a finished operation");
  if (!inWindow(h.phase)) {
    return Status::protocol(fmt::format("op {}: phase {} out of range", spec_.op_id, h.phase));
  }
  const uint32_t ci = recvChunk(spec_.rank, spec_.world, h.phase);
  const Span c = chunk(ci);
  if (h.offset >= c.count || h.offset % spec_.segment_elems != 0) {
    return Status::protocol(fmt::format("op {} phase {}: bad segment offset {} (chunk of {} elements)", spec_.op_id,
                                        h.phase, h.offset, c.count));
  }
  const size_t segment = h.offset / spec_.segment_elems;
  const Span s = segmentOf(c.count, spec_.segment_elems, segment);
  const size_t raw = phaseBytes(spec_, h.phase, s.count);
  PCCL_RETURN_IF_ERROR(acceptSegment(h, bytes, raw, spec_.compress > 0,
                                     received_[first_slot_[h.phase - first_phase_] + segment], "phase"));
  if (spec_.coded()) return slot(slotIndex(ci, segment));
  return outputAt(ci, s.offset);
}

void RingCollective::withdraw(uint32_t, const wire::DataHeader& h) {
  if (over() || !inWindow(h.phase)) return;
  const Span c = chunk(recvChunk(spec_.rank, spec_.world, h.phase));
  if (h.offset >= c.count || h.offset % spec_.segment_elems != 0) return;
  received_[first_slot_[h.phase - first_phase_] + h.offset / spec_.segment_elems] = 0;
}

Status RingCollective::delivered(const wire::DataHeader& h, uint32_t bytes) {
  if (over()) return Status::ok();
  if (spec_.coded()) {
    Status st = deliveredCoded(h, bytes);
    if (!st.isOk()) fail(st);
    return st;
  }
  const uint32_t p = h.phase;
  const uint32_t ci = recvChunk(spec_.rank, spec_.world, p);
  const Span c = chunk(ci);
  const size_t segment = h.offset / spec_.segment_elems;
  const Span s = segmentOf(c.count, spec_.segment_elems, segment);
  bytes_received_ += s.count * elem_;
  ++recv_done_;
  if (isReducePhase(spec_.world, p)) {
    // Combine the predecessor's partial result with our input; the owner's last hop finalises avg.
    const bool last = isLastReducePhase(spec_.world, p);
    const uint32_t divisor = last && spec_.op == codec::RedOp::kAvg ? spec_.divisor() : 1;
    codec::reduceInto(spec_.dtype, spec_.op, outputAt(ci, s.offset), inputAt(ci, s.offset), s.count, divisor);
    if (inWindow(p + 1)) sendSegment(p + 1, segment);
  } else if (inWindow(p + 1)) {
    sendSegment(p + 1, segment);  // all-gather: pass the finished bytes on
  }
  maybeFinish();
  return Status::ok();
}

Status RingCollective::deliveredCoded(const wire::DataHeader& h, uint32_t bytes) {
  const uint32_t p = h.phase;
  const uint32_t ci = recvChunk(spec_.rank, spec_.world, p);
  const Span c = chunk(ci);
  const size_t segment = h.offset / spec_.segment_elems;
  const Span s = segmentOf(c.count, spec_.segment_elems, segment);
  const size_t index = slotIndex(ci, segment);
  const size_t raw_bytes = phaseBytes(spec_, p, s.count);
  const bool forward = inWindow(p + 1);
  bytes_received_ += bytes;
  ++recv_done_;
  if (spec_.device != nullptr) {
    DeviceStep step;
    step.phase = p;
    step.send_phase = p + 1;
    step.segment = segment;
    step.index = index;
    step.in = inputAt(ci, s.offset);
    step.out = outputAt(ci, s.offset);
    step.count = s.count;
    step.rx_bytes = bytes;
    step.rx_flags = h.flags;
    if (isReducePhase(spec_.world, p)) {
      // A reduce-scatter's owner keeps its full-precision result: nothing leaves its last hop.
      const bool last = isLastReducePhase(spec_.world, p);
      step.kind = DeviceStep::kReduce;
      step.forward = forward;
      step.last = last;
      step.divisor = last && spec_.op == codec::RedOp::kAvg ? spec_.divisor() : 1;
    } else {
      step.forward = false;
      // Forwarded as it came while the GPU decodes it.
      step.kind = DeviceStep::kGather;
      slot_len_[index] = bytes;
      slot_flags_[index] = h.flags;
      if (inWindow(p + 1)) sendSegment(p + 1, segment);
    }
    submitDevice(step);
    return Status::ok();
  }
  const uint8_t* raw = slot(index);
  if ((h.flags & wire::kDataCompressed) != 0) {
    raw_.resize(raw_bytes);
    PCCL_RETURN_IF_ERROR(spec_.compressor->decompress(raw, bytes, raw_.data(), raw_bytes)
                             .withContext(fmt::format("op {} phase {} segment at {}", spec_.op_id, p, h.offset)));
    raw = raw_.data();
  }
  PCCL_RETURN_IF_ERROR(codec::validateWire(spec_.quant, spec_.dtype, raw, s.count)
                           .withContext(fmt::format("op {} phase {} segment at {}", spec_.op_id, p, h.offset)));
  const uint8_t* in = inputAt(ci, s.offset);
  uint8_t* out = outputAt(ci, s.offset);
  if (isReducePhase(spec_.world, p) && spec_.partialSums()) {
    PCCL_RETURN_IF_ERROR(reducePartials(index, raw, in, out, s.count, isLastReducePhase(spec_.world, p), forward));
    if (forward) sendSegment(p + 1, segment);
  } else if (isReducePhase(spec_.world, p)) {
    // Our input combined with the decoded partial result, in full precision; then re-encoded for the
    // next hop. The owner's last hop finalises avg and adopts what the others will decode (a
    // reduce-scatter's owner keeps its full-precision result: nobody else receives it).
    const bool last = isLastReducePhase(spec_.world, p);
    const uint32_t divisor = last && spec_.op == codec::RedOp::kAvg ? spec_.divisor() : 1;
    codec::decodeReduce(spec_.quant, spec_.dtype, spec_.op, raw, s.count, in, out, divisor);
    if (forward) {
      PCCL_RETURN_IF_ERROR(encodeSlot(index, out, s.count, last ? out : nullptr));
      sendSegment(p + 1, segment);
    }
  } else {
    codec::decode(spec_.quant, spec_.dtype, raw, s.count, out);
    slot_len_[index] = bytes;  // forwarded exactly as it came
    slot_flags_[index] = h.flags;
    if (forward) sendSegment(p + 1, segment);
  }
  maybeFinish();
  return Status::ok();
}

// ---- the end ------------------------------------------------------------------------------------

bool RingCollective::complete() const {
  return recv_done_ >= recv_expected_ && sendsDone() >= send_expected_ && jobs_open_ == 0;
}

void RingCollective::stopWork() {
  if (spec_.device != nullptr) quiesce();
}

}  // namespace pccl::collective
