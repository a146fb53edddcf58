#include "collective/two_level_allreduce.hpp"

#include <algorithm>
#include <optional>
#include <utility>

namespace pccl::collective {

TwoLevelAllReduce::TwoLevelAllReduce(const RingOpSpec& base, const TwoLevelRing& ring, TwoLevelCall call,
                                     const StriperTo& striper_to, BufferPool* buffers, Finished finished)
    : TwoLevelWaves(base, stripersTo(call.receivers(), striper_to), buffers, std::move(finished),
                    static_cast<uint32_t>(call.waves.size()), ring.pieces(), static_cast<uint32_t>(ring.pieces() + 2)),
      call_(std::move(call)),
      elem_(codec::dtypeSize(base.dtype)) {
  size_t partials = 0;
  for (uint32_t w = 0; w < waves_; ++w) {
    partial_at_.push_back(partials);
    partials += std::max<size_t>(call_.parts[w].block.count, 1);
  }
  partial_at_.push_back(partials);
  for (uint32_t w = 0; w < waves_; ++w) addWave(w, striper_to);
  for (uint32_t r : call_.senders()) helloFrom(r);
}

uint8_t* TwoLevelAllReduce::partialOf(uint32_t wave) {
  if (partials_ == nullptr) partials_ = own(partial_at_.back() * elem_);
  return partials_ + partial_at_[wave] * elem_;
}

uint8_t* TwoLevelAllReduce::scratchOf(uint32_t wave) {
  size_t largest = 1;
  for (const Span& w : call_.waves) largest = std::max(largest, w.count);
  if (scratches_ == nullptr) scratches_ = own((waves_ > 1 ? 2 : 1) * largest * elem_);
  return scratches_ + (wave % 2) * largest * elem_;
}

void TwoLevelAllReduce::addWave(uint32_t w, const StriperTo& striper_to) {
  const TwoLevelPart& plan = call_.parts[w];
  const Span wave = call_.waves[w];
  const size_t segment_bytes = base_.desc.segment_bytes;
  const uint8_t* input = base_.input + wave.offset * elem_;
  uint8_t* output = base_.output + wave.offset * elem_;
  if (plan.region_world > 1) {
    // The LAN level: full precision, and avg sums (the WAN level divides by the group's size).
    RingOpSpec lan = lanLevel(base_);
    lan.world = plan.region_world;
    lan.rank = plan.region_rank;
    lan.count = wave.count;
    lan.blocks = plan.blocks;
    lan.segment_elems = segmentElems(wave.count, plan.region_world, elem_, segment_bytes);
    RingOpSpec rs = lan;
    rs.kind = wire::Collective::kReduceScatter;
    rs.input = input;
    addWavePart(partId(w, kFirstLan), w, kFirstLan, rs, plan.region_pred, plan.region_succ, striper_to);
    RingOpSpec ag = lan;
    ag.kind = wire::Collective::kAllGather;
    ag.input = output + plan.block.offset * elem_;
    ag.output = output;
    addWavePart(partId(w, kSecondLan), w, kSecondLan, ag, plan.region_pred, plan.region_succ, striper_to);
  }
  // The WAN level: one all-reduce per piece of our block, over the R owners of the piece, reading the
  // wave's partial, or our input when we are our region's only member.
  for (const auto& piece : plan.pieces) {
    RingOpSpec wan = base_;
    wan.kind = wire::Collective::kAllReduce;
    wan.world = plan.regions;
    wan.rank = plan.region;
    wan.input = plan.region_world > 1 ? nullptr : input + piece.span.offset * elem_;
    wan.output = output + piece.span.offset * elem_;
    wan.count = piece.span.count;
    wan.avg_divisor = base_.world;
    wan.segment_elems = segmentElems(piece.span.count, plan.regions, elem_, segment_bytes, kWanSegmentFloorBytes);
    const auto partial = plan.region_world > 1 ? std::optional<size_t>(piece.span.offset - plan.block.offset)
                                               : std::nullopt;
    addWavePart(partId(w, pieceSlot(piece.id)), w, kPiece, wan, piece.pred, piece.succ, striper_to, partial);
  }
}

void TwoLevelAllReduce::addWavePart(uint32_t id, uint32_t wave, Kind kind, RingOpSpec spec, uint32_t pred,
                                    uint32_t succ, const StriperTo& striper_to, std::optional<size_t> partial) {
  spec.phase_base = id << kPartShift;
  auto striper = striper_to(succ);
  const size_t wire_at = reserveWire(spec);
  addPart(id, wave, kind, pred, succ, [this, spec = std::move(spec), striper, partial, wire_at](Part& p) {
    RingOpSpec s = spec;
    s.eager_bytes = std::min(s.eager_bytes, eagerShareTo(p.succ));
    if (p.kind == kFirstLan) {
      s.output = partialOf(p.group);
      s.scratch = scratchOf(p.group);
    }
    if (partial) s.input = partialOf(p.group) + *partial * elem_;
    s.wire = wireAt(wire_at);
    return std::make_shared<RingCollective>(s, striper, partDone(p.id));
  });
}

}  // namespace pccl::collective
