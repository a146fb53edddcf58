// The master's view of collectives: every peer of a group announces (tag, count, dtype, op, quant,
// epoch); when all have, the master starts the operation under a fresh op_id, or aborts it with a
// message saying who differs and how. An operation completes only when every participant reports
// done (so either all peers succeed or all fail), and fails everywhere when one participant fails
// or leaves. Tags that diverge (members waiting in different tags: tag_divergence.hpp) fail after
// `announce_window`. Pure logic, like Membership: time comes in through tick(). Thread:
// MasterServer's event loop.
#ifndef PCCL_MASTER_OP_COORDINATOR_HPP_
#define PCCL_MASTER_OP_COORDINATOR_HPP_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "master/membership.hpp"
#include "util/clock.hpp"
#include "wire/messages.hpp"

namespace pccl::master {

class OpCoordinator {
 public:
  // At most `max_ops` operations announced or running at once (MasterConfig::max_concurrent_ops): an
  // announcement beyond it is refused (InvalidUsage) before anything is stored. `announce_window`
  // (MasterConfig::announce_window_ms): how long a tag may stay crossed before it fails; 0 = never.
  explicit OpCoordinator(size_t max_ops = 4096, Millis announce_window = Millis(30000))
      : max_ops_(max_ops), window_(announce_window) {}

  // `members`: the peers of the announcer's group in the current ring; `blocked`: why no collective
  // can run now (a vote is open, a ring is being built, a member left), or OK.
  Effects announce(const wire::Uuid& peer, uint32_t group, const std::vector<wire::Uuid>& members,
                   uint64_t epoch, const Status& blocked, const wire::OpAnnounce& a);
  Effects done(const wire::Uuid& peer, uint64_t op_id);
  // A participant failed running op_id; the operation is aborted everywhere. Returns true in `aborted`
  // when a running operation was aborted (its ring may hold partial data: the run needs a new ring).
  Effects failed(const wire::Uuid& peer, uint64_t op_id, Code code, const std::string& reason, bool* aborted);
  // A peer withdrew its announcement of `tag` before the operation started (its deadline passed).
  Effects withdraw(const wire::Uuid& peer, uint32_t group, uint64_t tag, Code code, const std::string& reason);
  // Aborts every pending or running operation that involves `peer`.
  Effects peerGone(const wire::Uuid& peer, const std::string& why);
  // A vote started: pending announcements cannot be matched any more.
  Effects voteStarted(const wire::Uuid& voter);
  // The master's periodic check, `now` from its clock: notes when pending tags became crossed, and
  // fails (Mismatch, naming the missing peers and the tags they wait in) every tag crossed for
  // `announce_window` or longer, on every member that announced it.
  Effects tick(TimePoint now);

  size_t pendingCount() const { return pending_.size(); }
  size_t runningCount() const { return running_.size(); }

 private:
  struct Pending {
    std::vector<wire::Uuid> members;
    std::map<wire::Uuid, wire::OpAnnounce> announced;
    std::optional<TimePoint> crossed_since;  // first tick that found it crossed; reset when it is not
    std::string crossed_why;                 // describeCrossedTag() at the last check
  };
  struct Running {
    uint64_t tag = 0;
    std::vector<wire::Uuid> members;
    std::set<wire::Uuid> done;
  };
  using Key = std::pair<uint32_t, uint64_t>;  // (group, tag)

  void abortPending(Effects& fx, const Key& key, Code code, const std::string& reason);
  void abortRunning(Effects& fx, uint64_t op_id, Code code, const std::string& reason);
  void checkCrossings(uint32_t group, TimePoint now);
  static std::string describe(const wire::OpAnnounce& a);

  std::map<Key, Pending> pending_;
  std::map<uint64_t, Running> running_;
  uint64_t next_op_id_ = 0;
  size_t max_ops_;
  Millis window_;
  std::set<uint32_t> changed_;  // groups whose pending tags changed since the last tick
};

}  // namespace pccl::master

#endif  // PCCL_MASTER_OP_COORDINATOR_HPP_
