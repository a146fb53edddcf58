// The two-level all-gather (docs/algorithms.md §12c), in waves (two_level_layout_op.hpp); in each
// wave, on the w-th sub-block of every member's block:
//
//   first LAN   our region's all-gather of its data D_r on the region's ring: every member of the region
//               holds the region's sub-blocks
//   pieces      for each piece k we own, an all-gather on the piece's ring of R owners of piece k of
//               every region's data: piece k of D_i comes from region i's owner (WAN, each member's link
//               carrying its own pieces)
//   second LAN  for every other region i, an all-gather of D_i on our region's ring, member j
//               contributing fraction j of D_i (the pieces it received)
//
// Unless the wave-major buffer is the output itself (one wave, a ring sorted by region), the levels
// work in a scratch buffer, and each wave is copied into the output when its last part has ended. Every
// block is the bytes its member gave, copied. Thread: the communicator's io thread.
#ifndef PCCL_COLLECTIVE_TWO_LEVEL_ALLGATHER_HPP_
#define PCCL_COLLECTIVE_TWO_LEVEL_ALLGATHER_HPP_

#include <cstdint>

#include "collective/two_level_layout_op.hpp"

namespace pccl::collective {

class TwoLevelAllGather : public TwoLevelLayoutOp {
 public:
  // `base`: the all-gather as the flat ring would run it (count = the group's layout, world x our
  // block; host buffers). `striper_to` has a striper to each of twoLevelPeers(ring, base.rank).
  TwoLevelAllGather(const RingOpSpec& base, const TwoLevelRing& ring, const StriperTo& striper_to,
                    BufferPool* buffers, Finished finished);

  void start() override;

 private:
  void waveDone(uint32_t wave) override;  // its blocks into the output

  uint8_t* sorted_ = nullptr;  // the wave-major layout: the output, or a buffer of our own (own())
};

}  // namespace pccl::collective

#endif  // PCCL_COLLECTIVE_TWO_LEVEL_ALLGATHER_HPP_
