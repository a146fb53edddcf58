// Two rules of the two-level calls that the library follows and pccl-sim
// (bench/sim/two_level_schedules.cpp) predicts with, in one place. Pure.
#ifndef PCCL_COLLECTIVE_TWO_LEVEL_RULES_HPP_
#define PCCL_COLLECTIVE_TWO_LEVEL_RULES_HPP_

#include <algorithm>
#include <cstdint>

#include "collective/two_level_plan.hpp"

namespace pccl::collective {

// What one part of an all-reduce's or broadcast's `call` may send to `succ` before that member's
// hello: `eager_limit` shared by all our parts sending there (`lan_parts` per wave to our region
// successor, and the pieces). The library counts the parts it made (CompositeOp::eagerShareTo): for
// such a call, the same number.
inline uint64_t twoLevelEagerShare(const TwoLevelCall& call, uint32_t succ, uint32_t lan_parts,
                                   uint64_t eager_limit) {
  uint32_t sharing = 0;
  for (const auto& plan : call.parts) {
    if (plan.region_world > 1 && succ == plan.region_succ) sharing += lan_parts;
    for (const auto& p : plan.pieces) sharing += p.succ == succ ? 1 : 0;
  }
  return eager_limit / std::max<uint32_t>(sharing, 1);
}

// Whether an all-reduce of a two-level group gathers in two levels (docs/algorithms.md §12a): a leader
// sends the region's reduction (`wire_bytes`) to R - 1 other leaders within `gather_limit`, and a member
// receives at most world - 1 full-precision inputs (`raw_bytes` each) within `eager_limit`.
inline bool twoLevelGathers(uint64_t regions, uint64_t world, uint64_t wire_bytes, uint64_t raw_bytes,
                            uint64_t gather_limit, uint64_t eager_limit) {
  return (regions - 1) * wire_bytes <= gather_limit && (world - 1) * raw_bytes <= eager_limit;
}

}  // namespace pccl::collective

#endif  // PCCL_COLLECTIVE_TWO_LEVEL_RULES_HPP_
