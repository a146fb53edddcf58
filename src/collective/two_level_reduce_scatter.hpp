// The two-level reduce-scatter (docs/algorithms.md §12c), the all-gather's mirror, in waves
// (two_level_layout_op.hpp); in each wave, on the w-th sub-block of every member's block:
//
//   first LAN   for every region i, a reduce-scatter of D_i on our region's ring: member j ends with
//               fraction j of D_i reduced over our region, full precision (avg sums)
//   pieces      for each piece k we own, a reduce-scatter on the piece's ring of R owners of piece k of
//               every region's data: region i's owner ends with piece k of D_i reduced over the group,
//               in the call's wire format, avg dividing by the group's size (WAN)
//
// The pieces of fraction j of our own region's data are exactly our sub-block: nothing moves after the
// WAN level. Unless the wave-major buffer is the input itself (one wave, a ring sorted by region), the
// input is first copied into it. The partials and the scratch are one wave-major buffer each, taken
// when a part first needs it (a same-host successor reads payloads from a bounded number of buffers
// per operation). Every element's value is computed once, by its block's member. Thread: the
// communicator's io thread.
#ifndef PCCL_COLLECTIVE_TWO_LEVEL_REDUCE_SCATTER_HPP_
#define PCCL_COLLECTIVE_TWO_LEVEL_REDUCE_SCATTER_HPP_

#include <cstdint>
#include <vector>

#include "collective/two_level_layout_op.hpp"

namespace pccl::collective {

class TwoLevelReduceScatter : public TwoLevelLayoutOp {
 public:
  // `base`: the reduce-scatter as the flat ring would run it (count = the group's layout, world x our
  // block; host buffers; not integer avg). `striper_to` has a striper to each of twoLevelPeers(ring,
  // base.rank).
  TwoLevelReduceScatter(const RingOpSpec& base, const TwoLevelRing& ring, const StriperTo& striper_to,
                        BufferPool* buffers, Finished finished);

  void start() override;

 private:
  // Where a part reads and writes, relative to its wave's buffers (elements).
  struct At {
    size_t input = 0;    // in the wave-major input, from the wave's start
    size_t scratch = 0;  // in the wave's scratch
    size_t output = 0;   // region parts: in the wave's partials; pieces: in our output block
  };
  void addLevel(uint32_t wave, Kind kind, uint32_t slot, RingOpSpec spec, At at, uint32_t pred, uint32_t succ,
               const StriperTo& striper_to);
  uint8_t* partialsOf(uint32_t wave);
  uint8_t* scratchOf(uint32_t wave);

  uint8_t* sorted_in_ = nullptr;  // the input in the wave-major layout, when it is not the input's (own())
  const uint8_t* sorted_ = nullptr;
  uint8_t* partials_ = nullptr;  // wave-major: our fractions reduced over our region (own())
  uint8_t* scratch_ = nullptr;   // wave-major: the blocks passing through (own())
};

}  // namespace pccl::collective

#endif  // PCCL_COLLECTIVE_TWO_LEVEL_REDUCE_SCATTER_HPP_
