// The master's decision in a shared-state sync (design.md §6): pure logic, no sockets.
//
//   candidates     peers whose strategy offers content: enforce-popular and send-only.
//   schema         the set of (name, dtype, count) a peer registered. The reference schema is the
//                  most common one among the candidates at the highest revision; a peer with another
//                  schema gets Mismatch (naming the first difference) and takes no further part.
//   revision       the highest revision among the candidates with the reference schema.
//   content        per key, the digest most candidates at that revision hold (ties: the smallest
//                  digest, so every master decides alike).
//   receivers      enforce-popular and receive-only peers whose digest of a key differs fetch that
//                  key; send-only peers never receive. Sources of a key: every peer with the
//                  reference schema that holds the elected digest that the receiver can dial (a
//                  receiver opens its transfer's connections: a holder that cannot be dialled,
//                  MemberInfo::inbound 0, serves only receivers on its host). A receiver that can
//                  dial no holder of a key gets Unsupported naming it (no relay yet).
// No candidate with the reference schema (e.g. everybody receive-only) is InvalidUsage for all.
#ifndef PCCL_MASTER_SYNC_ELECTION_HPP_
#define PCCL_MASTER_SYNC_ELECTION_HPP_

#include <string>
#include <vector>

#include "pccl/status.hpp"
#include "wire/sync_messages.hpp"

namespace pccl::master {

struct SyncParticipant {
  wire::Uuid id{};
  wire::SyncAnnounce announce;
  bool inbound = true;  // others can dial it (MemberInfo::inbound)
  std::string host;     // its ring host (wire::sameHost: a peer on its host dials it whatever inbound says)
};

struct SyncPeerPlan {
  Status status;                        // not OK: this peer takes no part (Mismatch, InvalidUsage)
  std::vector<wire::SyncFetch> fetches; // key indices into the peer's own announcement
};

struct SyncElection {
  uint64_t revision = 0;
  std::vector<SyncPeerPlan> plans;  // one per participant, in the same order
};

SyncElection electSharedState(const std::vector<SyncParticipant>& peers);

}  // namespace pccl::master

#endif  // PCCL_MASTER_SYNC_ELECTION_HPP_
