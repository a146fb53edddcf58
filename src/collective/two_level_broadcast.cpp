#include "collective/two_level_broadcast.hpp"

#include <algorithm>
#include <memory>
#include <utility>

namespace pccl::collective {

TwoLevelBroadcast::TwoLevelBroadcast(const RingOpSpec& base, const TwoLevelRing& ring, TwoLevelCall call,
                                     const StriperTo& striper_to, BufferPool* buffers, Finished finished)
    : TwoLevelWaves(base, stripersTo(call.receivers(), striper_to), buffers, std::move(finished),
                    static_cast<uint32_t>(call.waves.size()), ring.pieces(), static_cast<uint32_t>(ring.pieces() + 2)) {
  const size_t elem = codec::dtypeSize(base_.dtype);
  const size_t segment_bytes = base_.desc.segment_bytes;
  const uint32_t root_region = ring.layout.region_of[base_.root];
  const uint32_t root_in_region = ring.layout.index_in_region[base_.root];
  for (uint32_t w = 0; w < waves_; ++w) {
    const TwoLevelPart& plan = call.parts[w];
    const Span wave = call.waves[w];
    uint8_t* output = base_.output + wave.offset * elem;
    const bool in_root_region = plan.region == root_region;
    RingOpSpec lan = lanLevel(base_);  // zstd on the WAN level only (never quantized in two levels)
    lan.world = plan.region_world;
    lan.rank = plan.region_rank;
    lan.count = wave.count;
    lan.segment_elems = segmentElems(wave.count, plan.region_world, elem, segment_bytes);
    if (plan.region_world > 1 && in_root_region) {
      RingOpSpec rb = lan;
      rb.root = root_in_region;
      rb.input = base_.rank == base_.root ? base_.input + wave.offset * elem : nullptr;
      rb.output = output;
      addWavePart(w, kFirstLan, 0, rb, plan.region_pred, plan.region_succ, striper_to);
    } else if (plan.region_world > 1) {
      RingOpSpec ag = lan;
      ag.kind = wire::Collective::kAllGather;
      ag.blocks = plan.blocks;
      ag.input = output + plan.block.offset * elem;
      ag.output = output;
      addWavePart(w, kSecondLan, 1, ag, plan.region_pred, plan.region_succ, striper_to);
    }
    // The WAN level: each piece of our block from its owner in the root's region, which holds the wave
    // (the root's input when the root is alone in its region).
    for (const auto& piece : plan.pieces) {
      RingOpSpec wan = base_;
      wan.world = plan.regions;
      wan.rank = plan.region;
      wan.root = root_region;
      wan.count = piece.span.count;
      wan.output = output + piece.span.offset * elem;
      wan.input = plan.region_world == 1 && base_.rank == base_.root
                      ? base_.input + (wave.offset + piece.span.offset) * elem
                      : wan.output;
      wan.segment_elems = segmentElems(piece.span.count, plan.regions, elem, segment_bytes, kWanSegmentFloorBytes);
      addWavePart(w, kPiece, pieceSlot(piece.id), wan, piece.pred, piece.succ, striper_to);
    }
  }
  for (const Part& p : parts_) {
    // A part sends to its successor before the successor's hello up to its share of the eager limit.
    if (p.pred != (base_.rank + base_.world - 1) % base_.world) helloFrom(p.pred);
  }
}

void TwoLevelBroadcast::addWavePart(uint32_t wave, Kind kind, uint32_t slot, RingOpSpec spec, uint32_t pred,
                                    uint32_t succ, const StriperTo& striper_to) {
  spec.kind = kind == kSecondLan ? wire::Collective::kAllGather : wire::Collective::kBroadcast;
  addWaveRing(wave, kind, slot, std::move(spec), pred, succ, striper_to);
}

}  // namespace pccl::collective
