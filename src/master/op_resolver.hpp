// Settles all-reduces left in doubt (docs/algorithms.md §2). A peer that held all its data when a
// failure cut the peers' commit round short cannot tell whether another peer committed; it sends
// OpState(prepared). The master asks every connected peer of its group (OpQuery): a peer that is still
// waiting for data fails the operation on the spot and answers "failed", one that holds its data
// answers "prepared", one that finished answers from its history. Once every peer asked has answered
// or left: the operation committed unless some peer failed it, since no peer can commit before every
// peer held its data. Everyone asked hears the outcome (OpOutcome). A peer in doubt asks again while
// it waits (docs/protocol.md §8.7): each time, the peers not yet heard from are asked again, so a query
// or an answer lost with a connection (a peer that came back on a new one) costs one round, not the
// operation. Pure logic. Thread: MasterServer's event loop.
#ifndef PCCL_MASTER_OP_RESOLVER_HPP_
#define PCCL_MASTER_OP_RESOLVER_HPP_

#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "master/membership.hpp"
#include "wire/messages.hpp"

namespace pccl::master {

class OpResolver {
 public:
  // `peer`'s state of an operation (unasked with kPrepared: it is in doubt; else the answer to our
  // query). `group_peers`: the connected peers of its group. `*failed_outcome` is set when this
  // settles an operation as failed (some peers closed their rings: the run needs a new one).
  Effects state(const wire::Uuid& peer, uint32_t group, const wire::OpState& m,
                const std::vector<wire::Uuid>& group_peers, bool* failed_outcome);
  // `peer` left: it is not waited for any more.
  Effects peerGone(const wire::Uuid& peer, bool* failed_outcome);

  size_t openCount() const { return open_.size(); }

 private:
  using Key = std::tuple<uint32_t, uint64_t, uint64_t, uint32_t>;  // (group, epoch, tag, seq)
  struct Open {
    std::set<wire::Uuid> asked;
    std::set<wire::Uuid> waiting;
    bool failed = false;
    bool committed = false;
    wire::Uuid failed_by{};
  };
  void decideIfReady(Effects& fx, const Key& key, bool* failed_outcome);

  std::map<Key, Open> open_;
  std::map<Key, wire::OpOutcome> decided_;  // the latest outcomes, for late askers
  std::deque<Key> decided_order_;
};

}  // namespace pccl::master

#endif  // PCCL_MASTER_OP_RESOLVER_HPP_
