// Relays for ring links between members that cannot dial each other (issue 37, docs/concepts.md
// "Reachability"): two members that both cannot be dialled, on different hosts, have no direct link
// (wire::linkable). The ring order keeps them apart where it can; each ring link left between two such
// members runs through a relay, a member that can be dialled: both ends dial it and it copies the
// link's bytes, which stay end-to-end authenticated (and encrypted when the run is) between the two
// (docs/protocol.md §5.4.4). Pure.
// Thread: MasterServer's event loop only.
#ifndef PCCL_MASTER_RELAYS_HPP_
#define PCCL_MASTER_RELAYS_HPP_

#include <cstddef>
#include <vector>

#include "wire/messages.hpp"

namespace pccl::master {

// Sets MemberInfo::relay of every member of `ring` (global ring order, groups interleaved as they are)
// whose ring link to its group successor cannot be direct, and clears it on the others. The relay: a
// member that can be dialled, neither end of the link, with the fewest links to relay so far, then the
// first in ring order. Returns the links left without a relay (no member can be dialled).
size_t assignRelays(std::vector<wire::MemberInfo>& ring);

// Whether some member of `members` can be dialled: then every link can be relayed.
bool anyDialable(const std::vector<wire::MemberInfo>& members);

}  // namespace pccl::master

#endif  // PCCL_MASTER_RELAYS_HPP_
