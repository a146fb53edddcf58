// The all-reduce algorithms pccl runs, as pccl-sim schedules: the same cut of the buffer and the same
// sends as the library, from the library's own pure functions (src/collective/partition.hpp: chunks,
// segments, segmentElems, the ring's phase rules, the gather rule).
//   ring    src/collective/ring_collective.cpp: phase 0 sends our chunk's segments; a segment of phase p
//           that lands is combined and forwarded as phase p+1 at once; before the successor's hello at
//           most wire::kEagerBytes go out, the rest wait for it.
//   gather  src/collective/gather_allreduce.cpp: every input goes floor(N/2) hops towards the successor
//           and the rest towards the predecessor, forwarded as it lands.
// A new algorithm (the two-level all-reduce of issue 34) is one more Schedule and one more Algorithm.
#ifndef PCCL_SIM_SCHEDULES_HPP_
#define PCCL_SIM_SCHEDULES_HPP_

#include <cstddef>
#include <cstdint>
#include <string>

#include "operation.hpp"

namespace pccl::sim {

struct CallSpec {
  uint32_t world = 1;
  uint64_t count = 0;                // elements
  size_t elem_bytes = 4;             // float32
  size_t segment_bytes = 1u << 20;   // CommConfig::segment_bytes
};

enum class Algorithm { kRing, kGather };

const char* algorithmName(Algorithm a);
bool parseAlgorithm(const std::string& name, Algorithm* out);
// What the library picks (Collectives::chooseAlgo): gather when world - 1 inputs fit `gather_bytes`
// and the eager limit.
Algorithm libraryChoice(const CallSpec& spec, uint64_t gather_bytes);
// Whether the library can run `a` for this call at all (a gather needs world - 1 inputs within the
// eager limit: CommConfig::gather_bytes may not exceed it).
bool runnable(Algorithm a, const CallSpec& spec);
Operation::MakeSchedule makeSchedule(Algorithm a, const CallSpec& spec);

}  // namespace pccl::sim

#endif  // PCCL_SIM_SCHEDULES_HPP_
