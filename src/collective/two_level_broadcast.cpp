#include "collective/two_level_broadcast.hpp"

#include <algorithm>
#include <memory>
#include <utility>

namespace pccl::collective {

TwoLevelBroadcast::TwoLevelBroadcast(const RingOpSpec& base, const TwoLevelRing& ring, TwoLevelCall call,
                                     const StriperTo& striper_to, BufferPool* buffers, Finished finished)
    : CompositeOp(base, stripersTo(call.receivers(), striper_to), buffers, std::move(finished)),
      call_(std::move(call)),
      pieces_(ring.pieces()),
      root_region_(ring.layout.region_of[base.root]) {
  const size_t elem = codec::dtypeSize(base_.dtype);
  const size_t segment_bytes = base_.desc.segment_bytes;
  const uint32_t root_in_region = ring.layout.index_in_region[base_.root];
  pieces_left_.assign(call_.waves.size(), 0);
  for (uint32_t w = 0; w < call_.waves.size(); ++w) {
    const TwoLevelPart& plan = call_.parts[w];
    const Span wave = call_.waves[w];
    const uint32_t base_id = w * static_cast<uint32_t>(pieces_ + 2);
    uint8_t* output = base_.output + wave.offset * elem;
    in_root_region_ = plan.region == root_region_;
    RingOpSpec lan = base_;
    lan.compress = 0;  // zstd on the WAN level only (a broadcast in two levels is never quantized)
    lan.compressor = nullptr;
    lan.world = plan.region_world;
    lan.rank = plan.region_rank;
    lan.count = wave.count;
    lan.segment_elems = segmentElems(wave.count, plan.region_world, elem, segment_bytes);
    if (plan.region_world > 1 && in_root_region_) {
      RingOpSpec rb = lan;
      rb.root = root_in_region;
      rb.input = base_.rank == base_.root ? base_.input + wave.offset * elem : nullptr;
      rb.output = output;
      addWavePart(base_id, w, kRootRegion, rb, plan.region_pred, plan.region_succ, striper_to);
    } else if (plan.region_world > 1) {
      RingOpSpec ag = lan;
      ag.kind = wire::Collective::kAllGather;
      ag.blocks = plan.blocks;
      ag.input = output + plan.block.offset * elem;
      ag.output = output;
      addWavePart(base_id + 1, w, kAllGather, ag, plan.region_pred, plan.region_succ, striper_to);
    }
    // The WAN level: each piece of our block from its owner in the root's region, which holds the wave
    // (the root's input when the root is alone in its region).
    for (const auto& piece : plan.pieces) {
      RingOpSpec wan = base_;
      wan.world = plan.regions;
      wan.rank = plan.region;
      wan.root = root_region_;
      wan.count = piece.span.count;
      wan.output = output + piece.span.offset * elem;
      wan.input = plan.region_world == 1 && base_.rank == base_.root
                      ? base_.input + (wave.offset + piece.span.offset) * elem
                      : wan.output;
      wan.segment_elems = segmentElems(piece.span.count, plan.regions, elem, segment_bytes);
      addWavePart(base_id + 2 + piece.id, w, kPiece, wan, piece.pred, piece.succ, striper_to);
      ++pieces_left_[w];
    }
  }
  for (const Part& p : parts_) {
    // A part sends to its successor before the successor's hello up to its share of the eager limit.
    if (p.pred != (base_.rank + base_.world - 1) % base_.world) helloFrom(p.pred);
  }
}

void TwoLevelBroadcast::addWavePart(uint32_t id, uint32_t wave, Kind kind, RingOpSpec spec, uint32_t pred,
                                    uint32_t succ, const StriperTo& striper_to) {
  spec.kind = wire::Collective::kBroadcast;
  if (kind == kAllGather) spec.kind = wire::Collective::kAllGather;
  uint32_t sharing = 0;  // the parts of this call that send to `succ` (this one among them)
  for (const auto& plan : call_.parts) {
    if (plan.region_world > 1 && succ == plan.region_succ) sharing += 1;
    for (const auto& p : plan.pieces) sharing += p.succ == succ ? 1 : 0;
  }
  spec.eager_bytes = wire::kEagerBytes / std::max<uint32_t>(sharing, 1);
  CompositeOp::addRing(id, wave, kind, std::move(spec), pred, succ, striper_to(succ));
}

void TwoLevelBroadcast::start() {
  if (Part* rb = find(0, kRootRegion)) {
    startPart(*rb);  // the waves' pieces follow it
  } else {
    for (uint32_t w = 0; w < call_.waves.size() && !over(); ++w) startPieces(w);
  }
  maybeFinish();
}

void TwoLevelBroadcast::startPieces(uint32_t wave) {
  for (Part& q : parts_) {
    if (q.group == wave && q.kind == kPiece && !over()) startPart(q);
  }
  if (pieces_left_[wave] == 0 && !over()) {
    if (Part* ag = find(wave, kAllGather)) startPart(*ag);
  }
}

void TwoLevelBroadcast::partFinished(Part& p) {
  const uint32_t wave = p.group;
  switch (p.kind) {
    case kRootRegion:
      if (Part* next = find(wave + 1, kRootRegion)) startPart(*next);
      startPieces(wave);
      break;
    case kPiece:
      if (--pieces_left_[wave] == 0 && !over()) {
        if (Part* ag = find(wave, kAllGather)) startPart(*ag);
      }
      break;
    default:
      break;
  }
}

}  // namespace pccl::collective
