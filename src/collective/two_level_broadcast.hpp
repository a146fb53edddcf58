// The two-level broadcast (docs/algorithms.md §12b): a composite of rings (composite_op.hpp), each a
// RingCollective, over the pieces of the two-level all-reduce (two_level_plan.hpp). The call is cut into
// the same waves; in each wave:
//
//   root's region    a broadcast on the root's region ring from the root: every member of the root's
//                    region gets the whole wave (LAN)
//   pieces           for each piece k of our block, a broadcast on the piece's ring of R owners from the
//                    owner in the root's region: the WAN level, each member's WAN link carrying its own
//                    block, all pieces at once
//   other regions    an all-gather of the blocks on the region's ring (LAN)
//
// In the root's region, wave w's broadcast starts when wave w-1's has finished (wave 0's at once) and
// its pieces when it has finished; elsewhere the pieces start at once (they receive and forward) and a
// wave's all-gather when its pieces have finished. Part ids as the all-reduce's: wave x (pieces + 2) + 0
// (the root region's broadcast), 1 (an all-gather) or 2 + k (piece k). The bytes are the root's,
// copied: every member ends with the same bits. Thread: the communicator's io thread.
#ifndef PCCL_COLLECTIVE_TWO_LEVEL_BROADCAST_HPP_
#define PCCL_COLLECTIVE_TWO_LEVEL_BROADCAST_HPP_

#include <cstdint>
#include <vector>

#include "collective/composite_op.hpp"
#include "collective/two_level_plan.hpp"

namespace pccl::collective {

class TwoLevelBroadcast : public CompositeOp {
 public:
  // `base`: the broadcast as the flat ring would run it (root and rank in the group, host buffers; the
  // root reads `input`, everybody writes `output`). `call`: our part (twoLevelCall of `ring`);
  // `striper_to` has a striper to each of call.receivers().
  TwoLevelBroadcast(const RingOpSpec& base, const TwoLevelRing& ring, TwoLevelCall call, const StriperTo& striper_to,
                    BufferPool* buffers, Finished finished);

  void start() override;

 private:
  enum Kind : int { kRootRegion, kAllGather, kPiece };
  void addWavePart(uint32_t id, uint32_t wave, Kind kind, RingOpSpec spec, uint32_t pred, uint32_t succ,
                   const StriperTo& striper_to);
  void startPieces(uint32_t wave);  // and the all-gather when they are done
  void partFinished(Part& p) override;

  TwoLevelCall call_;
  size_t pieces_ = 0;
  uint32_t root_region_ = 0;
  bool in_root_region_ = false;
  std::vector<size_t> pieces_left_;  // per wave
};

}  // namespace pccl::collective

#endif  // PCCL_COLLECTIVE_TWO_LEVEL_BROADCAST_HPP_
