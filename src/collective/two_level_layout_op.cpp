#include "collective/two_level_layout_op.hpp"

#include <utility>

namespace pccl::collective {

TwoLevelLayoutOp::TwoLevelLayoutOp(const RingOpSpec& base, const TwoLevelRing& ring, const StriperTo& striper_to,
                                   BufferPool* buffers, Finished finished)
    : TwoLevelWaves(base, stripersTo(twoLevelPeers(ring, base.rank), striper_to), buffers, std::move(finished),
                    twoLevelLayoutWaves(ring, base.count * codec::dtypeSize(base.dtype)), ring.pieces(),
                    static_cast<uint32_t>(ring.pieces() + 2 + ring.layout.regions())),
      all_(twoLevelBlocks(ring.layout, base.count / base.world)),
      plan_(twoLevelPart(ring, base.rank, 0)),
      elem_(codec::dtypeSize(base.dtype)) {}

void TwoLevelLayoutOp::segment(RingOpSpec& spec, size_t floor_bytes) const {
  spec.segment_elems = segmentElems(spec.count, spec.world, elem_, base_.desc.segment_bytes, floor_bytes);
}

RingOpSpec TwoLevelLayoutOp::regionSpec(RingOpSpec spec, const TwoLevelBlocks& wave, uint32_t i) const {
  const uint32_t m = plan_.region_world;
  spec.world = m;
  spec.rank = plan_.region_rank;
  spec.count = wave.data[i].count;
  spec.blocks.clear();
  for (uint32_t b = 0; b < m; ++b) spec.blocks.push_back(cutOf(spec.count, m, b));
  segment(spec);
  return spec;
}

void TwoLevelLayoutOp::forOwnedPieces(
    const TwoLevelRing& ring, const RingOpSpec& wan, const TwoLevelBlocks& wave,
    const std::function<void(uint32_t k, RingOpSpec spec, uint32_t pred, uint32_t succ)>& f) const {
  const uint32_t region = plan_.region, regions = plan_.regions;
  for (size_t k = 0; k < ring.pieces(); ++k) {
    const auto& owners = ring.owner[k];
    if (owners[region] != base_.rank) continue;
    RingOpSpec spec = wan;
    spec.world = regions;
    spec.rank = region;
    spec.count = wave.count();
    spec.blocks = wave.pieceBlocks(ring, k);
    if (spec.blocks.empty()) continue;
    segment(spec, kWanSegmentFloorBytes);
    f(static_cast<uint32_t>(k), std::move(spec), owners[(region + regions - 1) % regions],
      owners[(region + 1) % regions]);
  }
}

}  // namespace pccl::collective
