// The two-level all-reduces of a group in several regions (docs/algorithms.md §12, §12a), as pccl-sim
// schedules: every member runs the parts the library would give it, each a part of ring_parts.hpp on
// its sub-ring, started by the library's rules.
//   two-level         TwoLevelAllReduce (src/collective/two_level_allreduce.cpp) in TwoLevelWaves: per
//                     wave (twoLevelCall's cut) a reduce-scatter on the region's ring (the region's
//                     blocks), one all-reduce per piece of our block on the piece's ring of R owners,
//                     an all-gather on the region's ring. Wave w's reduce-scatter starts when w-1's
//                     ended (wave 0's at the call), its pieces when its reduce-scatter ended (at the
//                     call without one), its all-gather when its pieces ended. Each part's sends to a
//                     member before that member's hello are limited to its share of the eager limit
//                     (twoLevelEagerShare); a member sends its hello to every member that sends it data.
//   two-level-gather  TwoLevelGather (src/collective/two_level_gather.cpp, twoLevelGatherPlan): a gather
//                     on the region's ring; the leaders (each region's first member) gather the regions'
//                     reductions on piece 0's ring once their region's gather ended; a broadcast from the
//                     leader on the region's ring once the leaders' gather ended (the other members run
//                     it from the call: they receive and forward).
// Frames of a part that has not started wait for it (CompositeOp's deferred frames). The commit round
// is the flat ring's (operation.hpp). Thread: the engine's.
#ifndef PCCL_SIM_TWO_LEVEL_SCHEDULES_HPP_
#define PCCL_SIM_TWO_LEVEL_SCHEDULES_HPP_

#include <memory>

#include "operation.hpp"
#include "schedules.hpp"

namespace pccl::sim {

// `spec.regions` must have levels (runnable()).
std::unique_ptr<Schedule> makeTwoLevelAllReduce(Ports& ports, const CallSpec& spec);
std::unique_ptr<Schedule> makeTwoLevelGather(Ports& ports, const CallSpec& spec);

}  // namespace pccl::sim

#endif  // PCCL_SIM_TWO_LEVEL_SCHEDULES_HPP_
