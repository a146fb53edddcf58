// The all-reduce algorithms pccl runs, as pccl-sim schedules: the same cut of the buffer and the same
// sends as the library, from the library's own pure functions (src/collective/partition.hpp: chunks,
// segments, segmentElems, the ring's phase rules, the gather rule; two_level_plan.hpp: regions, pieces,
// waves), each ring of the library a part of ring_parts.hpp.
//   ring              src/collective/ring_collective.cpp: phase 0 sends our chunk's segments; a segment
//                     of phase p that lands is combined and forwarded as phase p+1 at once; before the
//                     successor's hello at most wire::kEagerBytes go out, the rest wait for it.
//   gather            src/collective/gather_allreduce.cpp: every input goes floor(N/2) hops towards the
//                     successor and the rest towards the predecessor, forwarded as it lands.
//   two-level         src/collective/two_level_allreduce.cpp (two_level_schedules.hpp)
//   two-level-gather  src/collective/two_level_gather.cpp (two_level_schedules.hpp)
#ifndef PCCL_SIM_SCHEDULES_HPP_
#define PCCL_SIM_SCHEDULES_HPP_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "collective/two_level_plan.hpp"
#include "operation.hpp"

namespace pccl::sim {

struct CallSpec {
  uint32_t world = 1;
  uint64_t count = 0;                // elements
  size_t elem_bytes = 4;             // float32
  size_t segment_bytes = 1u << 20;   // CommConfig::segment_bytes
  // The group's regions over its ring (twoLevelRing of regionLayout); null: no regions known.
  std::shared_ptr<const collective::TwoLevelRing> regions;
  bool two_level_group = false;      // the master's decision for the group (Topology::hierarchical)
};

enum class Algorithm { kRing, kGather, kTwoLevel, kTwoLevelGather };

const char* algorithmName(Algorithm a);
bool parseAlgorithm(const std::string& name, Algorithm* out);
// The regions of the ring's members, by group rank, as the library plans them (regionLayout over the
// ring's order, then twoLevelRing).
std::shared_ptr<const collective::TwoLevelRing> twoLevelRingOf(const std::vector<std::string>& region_by_rank);
// What the library picks (Collectives::chooseAlgo): in a two-level group two-level-gather when
// twoLevelGathers, else the gather when `gathers` (world - 1 inputs within `gather_bytes` and the eager
// limit), else two-level from the regions' min_bytes on (the master's two_level_bytes) and the ring below;
// in a flat group the gather or the ring.
Algorithm libraryChoice(const CallSpec& spec, uint64_t gather_bytes);
// Whether the library can run `a` for this call at all: a gather needs world - 1 inputs within the eager
// limit (CommConfig::gather_bytes may not exceed it), the two-level gather too; both two-level
// algorithms need regions with something to work with (RegionLayout::flat false) and at most
// kMaxTwoLevelPieces pieces.
bool runnable(Algorithm a, const CallSpec& spec);
Operation::MakeSchedule makeSchedule(Algorithm a, const CallSpec& spec);

}  // namespace pccl::sim

#endif  // PCCL_SIM_SCHEDULES_HPP_
