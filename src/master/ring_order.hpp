// The order of the next ring (docs/algorithms.md §10): per peer group, the measured best ring when the
// master holds every link among the group's members, else the previous ring's order with newcomers
// appended in join order. Members that cannot be dialled (MemberInfo::inbound 0, docs/concepts.md
// "Reachability") are never ring neighbours of each other when another order exists: the solver sees
// their links as relayed (master/relays.hpp: half the slower hop through the best relay), the join
// order puts a dialable member after each of them. Pure.
// Thread: MasterServer's event loop only.
#ifndef PCCL_MASTER_RING_ORDER_HPP_
#define PCCL_MASTER_RING_ORDER_HPP_

#include <string>
#include <vector>

#include "master/link_survey.hpp"
#include "wire/messages.hpp"

namespace pccl::master {

struct RingOrder {
  std::vector<wire::MemberInfo> ring;  // every member, groups one after another
  bool measured = false;   // some group's order came from the solver
  // The slowest link of the chosen ring and of the join-order ring, over groups of two or more, when
  // every link they use was measured (bytes/s); 0 when not known.
  double bottleneck = 0;
  double join_bottleneck = 0;
  std::string summary;     // for the master's log: each solved group's ring and its prediction
};

// `joined`: every member in join order. `previous`: the ring being replaced.
RingOrder orderRing(const std::vector<wire::MemberInfo>& joined, const std::vector<wire::MemberInfo>& previous,
                    const LinkBook& book, const SolveOptions& options = {});

// Of `joined` (join order), the members that wait pending (indices): when no member of the run can be
// dialled (then no link between two of them can be relayed), every pending member of a group beyond
// its first. `pending[i]`: joined[i] is not a member of the current ring (members already in it are
// never withheld). One member alone is always placeable.
std::vector<size_t> withheld(const std::vector<wire::MemberInfo>& joined, const std::vector<bool>& pending);

// The links to measure so that orderRing can solve every group of three or more among `joined`:
// every ordered pair within a group that can have a direct link (wire::linkable; all of them when `all`,
// else those not in the book), as indices into `joined`.
std::vector<ProbePair> linksToMeasure(const std::vector<wire::MemberInfo>& joined, const LinkBook& book, bool all);

}  // namespace pccl::master

#endif  // PCCL_MASTER_RING_ORDER_HPP_
