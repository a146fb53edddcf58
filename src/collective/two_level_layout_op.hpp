// What the two-level all-gather and reduce-scatter share (docs/algorithms.md §12c): the region-sorted
// layout (two_level_plan.hpp, TwoLevelBlocks: region r's blocks are one span D_r, and fraction j / m_r
// of it is its member j's block), cut into waves (TwoLevelBlocks::wave: wave w holds the w-th sub-block
// of every member's block, in a wave-major buffer), run by TwoLevelWaves. In each wave a member's parts
// are rings of RingCollectives of the collective's kind:
//   region i   on our region's ring, about region i's data D_i of the wave: slot regionSlot(i)
//   piece k    for each piece k we own, on the piece's ring of R owners, about piece k of every
//              region's data: slot pieceSlot(k)
// The subclass says which region parts exist and what each level reads and writes.
// Thread: the communicator's io thread.
#ifndef PCCL_COLLECTIVE_TWO_LEVEL_LAYOUT_OP_HPP_
#define PCCL_COLLECTIVE_TWO_LEVEL_LAYOUT_OP_HPP_

#include <cstdint>
#include <functional>
#include <vector>

#include "collective/two_level_waves.hpp"

namespace pccl::collective {

class TwoLevelLayoutOp : public TwoLevelWaves {
 protected:
  // `base`: the collective as the flat ring would run it (count = the group's layout, world x our
  // block; host buffers). `striper_to` has a striper to each of twoLevelPeers(ring, base.rank).
  TwoLevelLayoutOp(const RingOpSpec& base, const TwoLevelRing& ring, const StriperTo& striper_to,
                   BufferPool* buffers, Finished finished);

  // Whether the wave-major buffer is the group's layout itself (one wave, a ring sorted by region).
  bool identity() const { return waves_ == 1 && all_.identity; }
  TwoLevelBlocks waveBlocks(uint32_t w) const { return all_.wave(w, waves_); }
  size_t waveOffset(uint32_t w) const { return all_.waveOffset(w, waves_); }  // elements
  Span sub(uint32_t w) const { return cutOf(all_.block, waves_, w); }         // of a member's block

  // `spec` (the collective's kind, buffers relative to the wave's data D_i) on our region's ring about
  // D_i of `wave`: world, rank, count and blocks (the fractions of D_i) set.
  RingOpSpec regionSpec(RingOpSpec spec, const TwoLevelBlocks& wave, uint32_t i) const;
  // Each piece k we own of `wave` that is not empty: `f(k, spec, pred, succ)` with `spec` (from `wan`)
  // on the piece's ring: world, rank, count (the wave's) and blocks (piece k of each region's data,
  // relative to the wave) set.
  void forOwnedPieces(const TwoLevelRing& ring, const RingOpSpec& wan, const TwoLevelBlocks& wave,
                      const std::function<void(uint32_t k, RingOpSpec spec, uint32_t pred, uint32_t succ)>& f) const;
  // The segment size of a part's spec, as the flat ring cuts it (at least `floor_bytes`).
  void segment(RingOpSpec& spec, size_t floor_bytes = kSegmentFloorBytes) const;

  TwoLevelBlocks all_;
  TwoLevelPart plan_;  // our region, rank in it and its ring (count-independent)
  size_t elem_;
};

}  // namespace pccl::collective

#endif  // PCCL_COLLECTIVE_TWO_LEVEL_LAYOUT_OP_HPP_
