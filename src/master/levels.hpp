// Flat or two-level (docs/algorithms.md §12): how each group's all-reduces run, decided by the master
// at every ring build, after the regions, and sent in the TopologyUpdate (wire::MemberInfo::levels,
// the same for every member of a group). Per group:
//   - flat when a member asked for flat (JoinRequest::levels), when two members cannot link directly
//     (neither can be dialled, wire::linkable: two levels might pair them), or when two levels have
//     nothing to work with: one region, or no region with more than one member;
//   - else two-level when a member asked for it;
//   - else (every member asked auto) the cost model below, over the measured links; without a
//     measured link for every pair it needs, two-level (members declared or were found in regions
//     because the links between regions are the slow ones).
// The cost model predicts an all-reduce of S bytes (bandwidth and one-way delays, LevelsRule):
//   flat       2(N-1)/N x S over the ring's slowest link, plus 2(N-1)/N of the ring's one-way delays
//              summed (a segment crosses 2(N-1) consecutive links: on average that share of the ring);
//   two-level  the reduce-scatter and the all-gather in the slowest region, (m-1)/m x S each over its
//              slowest link + (m-1) delays each; plus, across regions, 2(R-1)/R x S/m over the slowest
//              link from each region's members to other regions' (the region with the fewest members m
//              carries the most) + 2(R-1) of the slowest such delays (protocol 15 added 4 more: the
//              pieces' links reopened their congestion windows at each call, two round trips; protocol
//              16's striper spreads a burst over the restarted windows instead, docs/algorithms.md §1).
// Two-level when it predicts at most `margin` x the flat ring's time at `model_bytes`; then calls from
// `two_level_bytes` up run in two levels: the smallest size of 64 KiB x 2^k from which the model
// predicts two levels within the margin at every larger size up to 1 GiB.
// Pure: no I/O, no clocks.
// Thread: MasterServer's event loop only.
#ifndef PCCL_MASTER_LEVELS_HPP_
#define PCCL_MASTER_LEVELS_HPP_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "master/link_survey.hpp"
#include "wire/messages.hpp"

namespace pccl::master {

struct LevelsRule {
  uint64_t model_bytes = 64ull << 20;
  double margin = 0.9;  // two-level must win by at least 10 %
};

struct LevelsChoice {
  wire::Levels levels = wire::Levels::kFlat;
  uint64_t two_level_bytes = 0;  // two-level: calls of fewer bytes run flat (0: every size)
  std::string why;  // for the master's log
};

// `ring`: the ring's members in ring order with their effective regions (every group); `asked`: what
// each asked for, by member id. One choice per group.
std::map<uint32_t, LevelsChoice> decideLevels(const std::vector<wire::MemberInfo>& ring,
                                              const std::map<wire::Uuid, uint8_t>& asked, const LinkBook& book,
                                              const LevelsRule& rule = {});

}  // namespace pccl::master

#endif  // PCCL_MASTER_LEVELS_HPP_
