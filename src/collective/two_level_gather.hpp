// The small two-level all-reduce (docs/algorithms.md §12a): a composite (composite_op.hpp) of three
// parts, for the calls that gather on a flat ring (everything a member can receive fits the eager
// limit, so nothing waits for a hello):
//
//   part 0  region    a GatherAllReduce on our region's ring: every member's input reaches every member
//                     of the region (half the ring each way) and each reduces them in region order
//                     (full precision, avg sums): the region's reduction
//   part 1  across    the regions' leaders only (each region's first member): a GatherAllReduce of the
//                     regions' reductions on the leaders' ring (piece 0's), reduced in region order,
//                     quantized and compressed as the call asks, avg dividing by the group's size:
//                     the result, in the leader's output
//   part 2  broadcast a RingCollective broadcast of the result on our region's ring, from the leader
//
// ceil((m - 1) / 2) LAN hops, ceil((R - 1) / 2) WAN hops, m - 1 LAN hops, where the flat ring's gather
// pays ceil((N - 1) / 2) hops that cross regions up to R times. The leader starts part 1 when part 0 has
// finished and part 2 when part 1 has; the other members start parts 0 and 2 at once (their part 2
// only receives and forwards). A region of one member runs part 1 alone. Every element's value is
// computed by the leaders alone, from the same bytes in the same order, and copied to the others:
// every member ends with the same bits. Thread: the communicator's io thread.
#ifndef PCCL_COLLECTIVE_TWO_LEVEL_GATHER_HPP_
#define PCCL_COLLECTIVE_TWO_LEVEL_GATHER_HPP_

#include <cstdint>

#include "collective/composite_op.hpp"
#include "collective/two_level_plan.hpp"

namespace pccl::collective {

class TwoLevelGather : public CompositeOp {
 public:
  // `base`: the call as the flat ring would gather it (op id, seq, descriptor, host buffers, dtype, op,
  // quant, compress, compressor, rank and world in the group); not integer avg. `striper_to` has a
  // striper to each of plan.receivers().
  TwoLevelGather(const RingOpSpec& base, const TwoLevelGatherPlan& plan, const StriperTo& striper_to,
                 BufferPool* buffers, Finished finished);

  void start() override;

 private:
  enum Kind : int { kRegion = 0, kAcross = 1, kBroadcast = 2 };  // also the part ids
  void partFinished(Part& p) override;

  TwoLevelGatherPlan plan_;
  uint8_t* reduced_ = nullptr;  // the region's reduction (part 0's output, part 1's input)
};

}  // namespace pccl::collective

#endif  // PCCL_COLLECTIVE_TWO_LEVEL_GATHER_HPP_
