// The two-level reduce-scatter (docs/algorithms.md §12c), the all-gather's mirror: a composite of rings
// (composite_op.hpp), each a RingCollective reduce-scatter, on the region-sorted layout
// (two_level_plan.hpp, TwoLevelBlocks: region i's blocks are one span D_i, and fraction j / m_i of it
// is its member j's block):
//
//   part 2 + P + i  for every region i, a reduce-scatter of D_i on our region's ring: member j ends
//                 with fraction j of D_i reduced over our region, full precision (avg sums) (LAN)
//   part 2 + k    for each piece k we own, a reduce-scatter on the piece's ring of R owners of piece k
//                 of every region's data: region i's owner ends with piece k of D_i reduced over the
//                 group, in the call's wire format, avg dividing by the group's size (WAN)
//
// The pieces of fraction j of our own region's data are exactly our block: nothing moves after the
// WAN level. The pieces start when every region-level part has ended. When the group's ring is not
// sorted by region the input is first copied into the sorted layout. Every element's value is computed
// once, by its block's member. Thread: the communicator's io thread.
#ifndef PCCL_COLLECTIVE_TWO_LEVEL_REDUCE_SCATTER_HPP_
#define PCCL_COLLECTIVE_TWO_LEVEL_REDUCE_SCATTER_HPP_

#include <cstdint>

#include "collective/composite_op.hpp"
#include "collective/two_level_plan.hpp"

namespace pccl::collective {

class TwoLevelReduceScatter : public CompositeOp {
 public:
  // `base`: the reduce-scatter as the flat ring would run it (count = the group's layout, world x our
  // block; host buffers; not integer avg). `striper_to` has a striper to each of twoLevelPeers(ring,
  // base.rank).
  TwoLevelReduceScatter(const RingOpSpec& base, const TwoLevelRing& ring, const StriperTo& striper_to,
                        BufferPool* buffers, Finished finished);
  ~TwoLevelReduceScatter() override;

  void start() override;

 private:
  enum Kind : int { kRegion, kPiece };
  void addReduceScatter(uint32_t id, Kind kind, RingOpSpec spec, uint32_t pred, uint32_t succ,
                        const StriperTo& striper_to);
  void startKind(Kind kind);
  void partFinished(Part& p) override;

  TwoLevelBlocks blocks_;
  size_t elem_;
  BufferPool::Buffer sorted_in_;  // the input in the sorted layout, when it is not the input's
  BufferPool::Buffer partials_;   // our fractions reduced over our region, in the sorted layout
  BufferPool::Buffer scratch_;    // the blocks passing through, in the sorted layout
  const uint8_t* sorted_ = nullptr;
  size_t sharing_ = 1;
  size_t left_[2] = {0, 0};
};

}  // namespace pccl::collective

#endif  // PCCL_COLLECTIVE_TWO_LEVEL_REDUCE_SCATTER_HPP_
