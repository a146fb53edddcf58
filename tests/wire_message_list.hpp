// Every message type of the wire protocol, as a type list, for tests and fuzz harnesses that must
// cover them all (a new message type is added here, and the tests check the list is complete).
#ifndef PCCL_TESTS_WIRE_MESSAGE_LIST_HPP_
#define PCCL_TESTS_WIRE_MESSAGE_LIST_HPP_

#include <tuple>

#include "wire/messages.hpp"
#include "wire/sync_messages.hpp"

namespace pccl::wire {

template <typename T>
struct Tag {
  using type = T;
};

using AllMessages =
    std::tuple<Hello, HelloReply, AuthProof, AuthOk, Error, JoinRequest, JoinAccepted, Heartbeat, VoteUpdate,
               WithdrawVote, Leave, P2PAccept, TopologyUpdate, P2PReady, TopologyReady, TopologyFailed, P2PFailed,
               QueryStatus, MembershipStatus, PeerLeft, P2PHello, OpAnnounce, OpAbort, OpDone, OpFailed,
               OpState, OpQuery, OpOutcome, SyncAnnounce, SyncPlan, SyncDone, SyncComplete, VoteOptimize,
               ProbePlan, ProbeReport, LinkQuery, LinkReport, RunResumed, RelayHello, RelayReady>;

template <typename... Ms, typename F>
void forEachImpl(std::tuple<Ms...>*, F& f) {
  (f(Tag<Ms>{}), ...);
}
// Calls f(Tag<M>{}) for every message type M.
template <typename F>
void forEachMessage(F&& f) {
  forEachImpl(static_cast<AllMessages*>(nullptr), f);
}

}  // namespace pccl::wire

#endif  // PCCL_TESTS_WIRE_MESSAGE_LIST_HPP_
