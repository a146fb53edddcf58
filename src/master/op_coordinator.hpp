// The master's books of all-reduces (protocol 4). Peers start an operation on the ring without
// waiting for the master and tell it in passing, and only about calls that take a while (protocol
// 6): OpAnnounce when a call is still running kAnnounceAfter after it was made (or fails or falls
// in doubt first), OpDone when an announced call committed, OpFailed when it failed. The master never holds an operation up; it aborts one that
// cannot go on, on every member (OpAbort): peers that announced different calls (naming who differs),
// a member announcing on a stale epoch or while a vote is open, a member that failed it or left, and
// tags that stay crossed for `announce_window` (tag_divergence.hpp). A peer that came back on a new
// connection announces its calls in flight again: the same call again is a no-op, a call aborted
// meanwhile hears its abort again, and a call of a tag ends the peer's earlier calls of it (reports lost
// with the old connection leave nothing behind; docs/protocol.md §5.3). Operations left in doubt by a
// failure during the peers' commit round are settled by OpResolver. An operation is named by
// (group, tag, seq). Pure logic, like Membership: time comes in through tick(). Thread: MasterServer's
// event loop.
#ifndef PCCL_MASTER_OP_COORDINATOR_HPP_
#define PCCL_MASTER_OP_COORDINATOR_HPP_

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "master/membership.hpp"
#include "util/clock.hpp"
#include "wire/messages.hpp"

namespace pccl::master {

class OpCoordinator {
 public:
  // At most `max_ops` operations in the books at once (MasterConfig::max_concurrent_ops): an
  // announcement beyond it is aborted (InvalidUsage) before anything is stored. `announce_window`
  // (MasterConfig::announce_window_ms): how long a tag may stay crossed before it fails; 0 = never.
  explicit OpCoordinator(size_t max_ops = 4096, Millis announce_window = Millis(30000))
      : max_ops_(max_ops), window_(announce_window) {}

  // `members`: the peers of the announcer's group in the current ring; `blocked`: why no collective
  // can run now (a vote is open, a ring is being built, a member left), or OK.
  Effects announce(const wire::Uuid& peer, uint32_t group, const std::vector<wire::Uuid>& members,
                   uint64_t epoch, const Status& blocked, const wire::OpAnnounce& a);
  // The operation committed on `peer` (a member). It leaves the books once every member that
  // announced it reported it done.
  Effects done(const wire::Uuid& peer, uint32_t group, const wire::OpDone& m);
  // It failed on `peer` (a member): aborted everywhere.
  Effects failed(const wire::Uuid& peer, uint32_t group, const wire::OpFailed& m);
  // Aborts every operation that involves `peer`.
  Effects peerGone(const wire::Uuid& peer, const std::string& why);
  // A vote started: operations not yet announced by every member cannot run any more.
  Effects voteStarted(const wire::Uuid& voter);
  // The master's periodic check, `now` from its clock: notes when pending tags became crossed, and
  // fails (Mismatch, naming the missing peers and the tags they wait in) every tag crossed for
  // `announce_window` or longer, on every member.
  Effects tick(TimePoint now);

  size_t pendingCount() const;  // not yet announced by every member
  size_t runningCount() const { return entries_.size() - pendingCount(); }

 private:
  struct Entry {
    uint64_t epoch = 0;
    std::vector<wire::Uuid> members;
    std::map<wire::Uuid, wire::OpAnnounce> announced;
    std::set<wire::Uuid> done;  // members that reported it done (each announced it first)
    std::optional<TimePoint> crossed_since;  // first tick that found it crossed; reset when it is not
    std::string crossed_why;                 // describeCrossedTag() at the last check
    bool pending() const { return announced.size() < members.size(); }
    bool isMember(const wire::Uuid& p) const;
  };
  using Key = std::tuple<uint32_t, uint64_t, uint32_t>;  // (group, tag, seq)

  struct Aborted {
    uint64_t epoch = 0;
    wire::OpAbort abort;
  };
  static constexpr size_t kKeepAborted = 1024;

  void abort(Effects& fx, const Key& key, Code code, const std::string& reason);
  const wire::OpAbort* abortedBefore(const Key& key, uint64_t epoch) const;  // null: not aborted
  void endEarlierCalls(const wire::Uuid& peer, uint32_t group, const wire::OpAnnounce& a);
  void checkCrossings(uint32_t group, TimePoint now);
  static std::string describe(const wire::OpAnnounce& a);

  std::map<Key, Entry> entries_;
  size_t max_ops_;
  Millis window_;
  std::set<uint32_t> changed_;  // groups whose pending tags changed since the last tick
  // The latest aborts, for a member that announces an aborted call again after it missed the abort.
  std::map<Key, Aborted> aborted_;
  std::deque<Key> aborted_order_;
};

}  // namespace pccl::master

#endif  // PCCL_MASTER_OP_COORDINATOR_HPP_
