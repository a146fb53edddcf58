// The master's side of shared-state syncs (wire/sync_messages.hpp): one sync at a time per group.
// Every accepted member of the group announces; then the master elects the content
// (sync_election.hpp) and sends each peer its SyncPlan. Peers whose plan is an error are out; the
// others fetch and report SyncDone; when all have, SyncComplete (code 0) goes to all of them. A
// failed SyncDone, a participant leaving, or a topology vote aborts the sync everywhere.
// Pure logic, like OpCoordinator. Thread: MasterServer's event loop.
#ifndef PCCL_MASTER_SYNC_COORDINATOR_HPP_
#define PCCL_MASTER_SYNC_COORDINATOR_HPP_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "master/membership.hpp"
#include "wire/sync_messages.hpp"

namespace pccl::master {

class SyncCoordinator {
 public:
  // `membership`: where the participants' reachability is read (MemberInfo::inbound and host; null:
  // every one can be dialled). Must outlive this.
  explicit SyncCoordinator(const Membership* membership = nullptr) : membership_(membership) {}
  // `members`: the accepted peers of the announcer's group in the current ring; `blocked`: why no
  // collective can run now, or OK.
  Effects announce(const wire::Uuid& peer, uint32_t group, const std::vector<wire::Uuid>& members,
                   uint64_t epoch, const Status& blocked, const wire::SyncAnnounce& a);
  // sync_id 0: the peer withdraws its announcement (aborts its group's pending sync).
  Effects done(const wire::Uuid& peer, const wire::SyncDone& d);
  Effects peerGone(const wire::Uuid& peer, const std::string& why);
  Effects voteStarted(const wire::Uuid& voter);
  // The peer came back on a new control connection (the master held its place): what it may have
  // missed of its sync, again: its plan while the sync runs (it answers with its SyncDone again if it
  // had sent one), or the SyncComplete of its last sync. A lost announcement it sends again itself.
  Effects returned(const wire::Uuid& peer) const;

  size_t pendingCount() const { return pending_.size(); }
  size_t runningCount() const { return running_.size(); }

 private:
  struct Pending {
    std::vector<wire::Uuid> members;
    std::map<wire::Uuid, wire::SyncAnnounce> announced;
  };
  struct Running {
    std::vector<wire::Uuid> members;  // those with an OK plan
    std::set<wire::Uuid> done;
    std::map<wire::Uuid, std::vector<uint8_t>> plans;  // each member's SyncPlan frame (returned())
  };

  Effects start(uint32_t group, uint64_t epoch);
  // Error plans (sync_id 0) to everyone who announced in `group`'s pending sync, which is dropped.
  void abortPending(Effects& fx, uint32_t group, Code code, const std::string& reason);
  void abortRunning(Effects& fx, uint64_t sync_id, Code code, const std::string& reason);

  std::map<uint32_t, Pending> pending_;   // by group
  std::map<uint64_t, Running> running_;   // by sync id
  std::map<wire::Uuid, std::vector<uint8_t>> completed_;  // the SyncComplete of each peer's last sync
  uint64_t next_sync_id_ = 0;
  const Membership* membership_ = nullptr;
};

}  // namespace pccl::master

#endif  // PCCL_MASTER_SYNC_COORDINATOR_HPP_
