#include "ring_parts.hpp"

#include <utility>

namespace pccl::sim {

using collective::Span;

std::shared_ptr<const RingCut> ringCut(RingKind kind, size_t count, uint32_t world, size_t segment_elems,
                                       size_t elem_bytes, const std::vector<Span>& blocks, uint32_t root) {
  auto cut = std::make_shared<RingCut>();
  cut->world = world;
  cut->segment_elems = segment_elems;
  cut->elem_bytes = elem_bytes;
  const uint32_t phases = collective::phaseCount(world);
  cut->first_phase = kind == RingKind::kAllGather || kind == RingKind::kBroadcast ? world - 1 : 0;
  cut->end_phase = kind == RingKind::kReduceScatter ? world - 1 : phases;
  for (uint32_t c = 0; c < world; ++c) {
    switch (kind) {
      case RingKind::kAllReduce: cut->chunks.push_back(collective::chunkOf(count, world, c)); break;
      case RingKind::kBroadcast:
        cut->chunks.push_back(c == (root + 1) % world ? Span{0, count} : Span{0, 0});
        break;
      default: {
        const uint32_t owner = (c + world - 1) % world;
        cut->chunks.push_back(blocks.empty() ? collective::chunkOf(count, world, owner) : blocks[owner]);
        break;
      }
    }
  }
  return cut;
}

RingPart::RingPart(std::shared_ptr<const RingCut> cut, uint32_t rank, uint32_t self, uint32_t succ,
                   uint32_t phase_base, uint64_t eager_bytes)
    : cut_(std::move(cut)), rank_(rank), self_(self), succ_(succ), phase_base_(phase_base), eager_bytes_(eager_bytes) {
  for (uint32_t p = cut_->first_phase; p < cut_->end_phase; ++p) {
    recv_expected_ += cut_->segmentsOf(collective::recvChunk(rank_, cut_->world, p));
    send_expected_ += cut_->segmentsOf(collective::sendChunk(rank_, cut_->world, p));
  }
}

void RingPart::start(Ports& ports) {
  const uint32_t first = cut_->first_phase;
  const size_t n = cut_->segmentsOf(collective::sendChunk(rank_, cut_->world, first));
  for (size_t s = 0; s < n; ++s) sendSegment(ports, first, s);
}

void RingPart::ready(Ports& ports) {
  if (ready_) return;
  ready_ = true;
  std::vector<std::pair<uint32_t, uint64_t>> held = std::move(held_);
  held_.clear();
  for (const auto& [phase, segment] : held) sendSegment(ports, phase, segment);
}

void RingPart::delivered(Ports& ports, uint32_t phase, uint64_t segment) {
  ++recv_done_;
  // Reduce phase: combined with our input, then on as the next phase; all-gather: passed on.
  if (phase + 1 < cut_->end_phase) sendSegment(ports, phase + 1, segment);
}

void RingPart::sendSegment(Ports& ports, uint32_t phase, uint64_t segment) {
  const Span c = cut_->chunks[collective::sendChunk(rank_, cut_->world, phase)];
  const uint64_t bytes = collective::segmentOf(c.count, cut_->segment_elems, segment).count * cut_->elem_bytes;
  if (!ready_) {
    if (eager_sent_ + bytes > eager_bytes_) {
      held_.emplace_back(phase, segment);
      return;
    }
    eager_sent_ += bytes;
  }
  ports.send(self_, succ_, phase_base_ + phase, segment, bytes);
}

GatherPart::GatherPart(uint32_t world, uint32_t rank, uint32_t self, uint32_t succ, uint32_t pred, size_t count,
                       size_t segment_elems, size_t elem_bytes, uint32_t phase_base)
    : world_(world), rank_(rank), self_(self), succ_(succ), pred_(pred), phase_base_(phase_base), count_(count),
      segment_elems_(segment_elems), elem_bytes_(elem_bytes), segments_(collective::segmentCount(count, segment_elems)),
      cw_(world / 2), ccw_(world - 1 - cw_) {
  if (world < 2) return;  // alone: nothing moves
  recv_expected_ = static_cast<uint64_t>(world - 1) * segments_;
  const uint64_t forwards = (cw_ - 1) + (ccw_ > 0 ? ccw_ - 1 : 0);
  send_expected_ = segments_ * ((ccw_ > 0 ? 2 : 1) + forwards);
}

void GatherPart::start(Ports& ports) {
  if (world_ < 2) return;
  for (uint64_t s = 0; s < segments_; ++s) {
    sendSlot(ports, succ_, rank_, s);
    if (ccw_ > 0) sendSlot(ports, pred_, rank_, s);
  }
}

void GatherPart::delivered(Ports& ports, uint32_t origin, uint64_t segment) {
  ++recv_done_;
  const uint32_t behind = (rank_ + world_ - origin) % world_;  // hops it came from the predecessor's side
  if (behind <= cw_) {
    if (behind < cw_) sendSlot(ports, succ_, origin, segment);
  } else if (world_ - behind < ccw_) {
    sendSlot(ports, pred_, origin, segment);
  }
}

void GatherPart::sendSlot(Ports& ports, uint32_t to, uint32_t origin, uint64_t segment) {
  ports.send(self_, to, phase_base_ + origin, segment,
             collective::segmentOf(count_, segment_elems_, segment).count * elem_bytes_);
}

}  // namespace pccl::sim
