// The two-level all-gather (docs/algorithms.md §12c): a composite of rings (composite_op.hpp), each a
// RingCollective all-gather, on the region-sorted layout (two_level_plan.hpp, TwoLevelBlocks: region
// r's blocks are one span D_r, and fraction j / m_r of it is its member j's block):
//
//   part 0        our region's all-gather of D_r on the region's ring: every member of the region holds
//                 the region's blocks (LAN)
//   part 2 + k    for each piece k we own, an all-gather on the piece's ring of R owners of piece k of
//                 every region's data: piece k of D_i comes from region i's owner (WAN, each member's
//                 link carrying its own pieces)
//   part 2 + P + i  for every other region i, an all-gather of D_i on our region's ring, member j
//                 contributing fraction j of D_i (the pieces it received) (LAN)
//
// Each level starts when the one before has ended. When the group's ring is not sorted by region the
// levels work in a scratch buffer in the sorted layout, copied into the output at the end. Every block
// is the bytes its member gave, copied. Thread: the communicator's io thread.
#ifndef PCCL_COLLECTIVE_TWO_LEVEL_ALLGATHER_HPP_
#define PCCL_COLLECTIVE_TWO_LEVEL_ALLGATHER_HPP_

#include <cstdint>

#include "collective/composite_op.hpp"
#include "collective/two_level_plan.hpp"

namespace pccl::collective {

class TwoLevelAllGather : public CompositeOp {
 public:
  // `base`: the all-gather as the flat ring would run it (count = the group's layout, world x our
  // block; host buffers). `striper_to` has a striper to each of twoLevelPeers(ring, base.rank).
  TwoLevelAllGather(const RingOpSpec& base, const TwoLevelRing& ring, const StriperTo& striper_to,
                    BufferPool* buffers, Finished finished);
  ~TwoLevelAllGather() override;

  void start() override;

 private:
  enum Kind : int { kOwnRegion, kPiece, kOtherRegion };
  void addAllGather(uint32_t id, Kind kind, RingOpSpec spec, uint32_t pred, uint32_t succ,
                    const StriperTo& striper_to);
  void startKind(Kind kind);  // every part of that kind (and what follows when there is none)
  void partFinished(Part& p) override;
  void copyOut();  // the sorted scratch into the output, once every part has ended

  TwoLevelBlocks blocks_;
  size_t elem_;
  BufferPool::Buffer scratch_;  // the sorted layout, when it is not the output's
  uint8_t* sorted_ = nullptr;
  size_t sharing_ = 1;          // our parts (they share the eager limit)
  size_t left_[3] = {0, 0, 0};  // parts of each kind not finished
  bool copied_ = false;
};

}  // namespace pccl::collective

#endif  // PCCL_COLLECTIVE_TWO_LEVEL_ALLGATHER_HPP_
