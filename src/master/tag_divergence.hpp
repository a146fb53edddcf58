// Tags that can never start because the members of a group wait in different tags (docs/algorithms.md
// §9). A pending tag T is *crossed* when a member m that has not announced T has itself announced a
// tag U that some announcer a of T has not announced: m waits for a in U while a waits for m in T.
// A member that announced nothing (still computing, a straggler) never makes a tag crossed.
// Pure logic: no sockets, no clock. Thread: MasterServer's event loop (through OpCoordinator).
#ifndef PCCL_MASTER_TAG_DIVERGENCE_HPP_
#define PCCL_MASTER_TAG_DIVERGENCE_HPP_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "wire/messages.hpp"

namespace pccl::master {

// A member that has not announced a crossed tag and why: it waits in `waits_in`, which `not_called_by`
// (an announcer of the crossed tag) has not announced. `waits_in` is 0 with `waiting` false for a
// missing member that waits in no tag (it is only slow).
struct MissingMember {
  wire::Uuid peer{};
  bool waiting = false;
  uint64_t waits_in = 0;
  wire::Uuid not_called_by{};
};

struct CrossedTag {
  uint64_t tag = 0;
  std::vector<MissingMember> missing;  // every member that has not announced `tag`, in `members` order
};

// `announced`: per pending tag of one group, who announced it; `members`: the group, in ring order.
// Returns the crossed tags, in tag order. Cost O(M² · tags) for M members.
std::vector<CrossedTag> findCrossedTags(const std::map<uint64_t, std::set<wire::Uuid>>& announced,
                                        const std::vector<wire::Uuid>& members);

// "tag 10 was called by peer 1a2b3c4d (rank 0) but not by peer 5e6f7a8b (rank 1, waiting in tag 0,
// which 1a2b3c4d did not call)": names every peer involved (at most 8 per list) with its rank in
// `members` (the group rank).
std::string describeCrossedTag(const CrossedTag& t, const std::set<wire::Uuid>& announcers,
                               const std::vector<wire::Uuid>& members);

}  // namespace pccl::master

#endif  // PCCL_MASTER_TAG_DIVERGENCE_HPP_
