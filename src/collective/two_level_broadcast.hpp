// The two-level broadcast (docs/algorithms.md §12b): a composite of rings (composite_op.hpp), each a
// RingCollective, over the pieces of the two-level all-reduce (two_level_plan.hpp), in the same waves
// (two_level_waves.hpp); in each wave:
//
//   root's region    a broadcast on the root's region ring from the root: every member of the root's
//                    region gets the whole wave (LAN)
//   pieces           for each piece k of our block, a broadcast on the piece's ring of R owners from the
//                    owner in the root's region: the WAN level, each member's WAN link carrying its own
//                    block, all pieces at once
//   other regions    an all-gather of the blocks on the region's ring (LAN)
//
// The root region's broadcast is the waves' first LAN part, the other regions' all-gather the second:
// elsewhere than in the root's region the pieces start at the call (they receive and forward). The
// bytes are the root's, copied: every member ends with the same bits. Thread: the communicator's io
// thread.
#ifndef PCCL_COLLECTIVE_TWO_LEVEL_BROADCAST_HPP_
#define PCCL_COLLECTIVE_TWO_LEVEL_BROADCAST_HPP_

#include <cstdint>

#include "collective/two_level_waves.hpp"

namespace pccl::collective {

class TwoLevelBroadcast : public TwoLevelWaves {
 public:
  // `base`: the broadcast as the flat ring would run it (root and rank in the group, host buffers; the
  // root reads `input`, everybody writes `output`). `call`: our part (twoLevelCall of `ring`);
  // `striper_to` has a striper to each of call.receivers().
  TwoLevelBroadcast(const RingOpSpec& base, const TwoLevelRing& ring, TwoLevelCall call, const StriperTo& striper_to,
                    BufferPool* buffers, Finished finished);

 private:
  void addWavePart(uint32_t wave, Kind kind, uint32_t slot, RingOpSpec spec, uint32_t pred, uint32_t succ,
                   const StriperTo& striper_to);
};

}  // namespace pccl::collective

#endif  // PCCL_COLLECTIVE_TWO_LEVEL_BROADCAST_HPP_
