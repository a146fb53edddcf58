// The master's membership and ring-building state machine. Pure logic: no sockets, no clocks.
// Each input returns the messages to send (Effects); MasterServer delivers them.
//
// Per peer:   (joined) -> kPending -> kAccepted -> (removed)      kPending -> (removed)
// Run phase:  kStable --all accepted voted / first peer--> kBuilding(epoch+1)
//             kBuilding --every member sent P2PReady--> kStable (TopologyReady)
//             kBuilding --a member left or sent P2PFailed--> kStable, stale (TopologyFailed)
// docs/architecture.md documents these transitions.
// Thread: MasterServer's event loop only.
#ifndef PCCL_MASTER_MEMBERSHIP_HPP_
#define PCCL_MASTER_MEMBERSHIP_HPP_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "pccl/status.hpp"
#include "wire/messages.hpp"

namespace pccl::master {

struct Outgoing {
  wire::Uuid to{};
  std::vector<uint8_t> frame;
};
using Effects = std::vector<Outgoing>;

class Membership {
 public:
  enum class PeerPhase { kPending, kAccepted };
  enum class RunPhase { kStable, kBuilding };

  // A new authenticated peer. `info.id` must be unique. Admitted at once when nobody is accepted.
  Effects join(const wire::MemberInfo& info);
  // An accepted peer asks for a topology update; the update runs when every accepted peer has asked.
  Effects vote(const wire::Uuid& id);
  Effects withdrawVote(const wire::Uuid& id);
  Effects p2pReady(const wire::Uuid& id, uint64_t epoch);
  Effects p2pFailed(const wire::Uuid& id, uint64_t epoch, Code code, const std::string& reason);
  // Graceful leave, heartbeat timeout, broken connection. Unknown ids are ignored.
  Effects remove(const wire::Uuid& id, wire::LeaveReason reason, const std::string& detail);

  // The current ring can no longer be used (a collective was aborted mid-transfer): the next
  // arePeersPending() answers true so that every peer calls updateTopology(). `why` completes
  // "the ring of epoch E lost ...".
  void markStale(const std::string& why);

  uint64_t epoch() const { return epoch_; }
  RunPhase runPhase() const { return phase_; }
  bool contains(const wire::Uuid& id) const { return peers_.count(id) != 0; }
  bool isAccepted(const wire::Uuid& id) const;
  size_t acceptedCount() const;
  size_t pendingCount() const;
  size_t size() const { return peers_.size(); }
  const std::vector<wire::MemberInfo>& ring() const { return ring_; }
  wire::MembershipStatus status() const;
  // While stale: why no collective can run until the next ring is built (the latest cause: a member
  // removed, a ring build that failed and why, a transfer aborted). Empty when not stale.
  const std::string& staleReason() const { return stale_reason_; }

 private:
  struct Record {
    wire::MemberInfo info;
    PeerPhase phase = PeerPhase::kPending;
    uint64_t join_seq = 0;
    bool voted = false;
    bool ready = false;
  };

  void maybeStartBuild(Effects& fx);
  void startBuild(Effects& fx);
  void failBuild(Effects& fx, Code code, const std::string& reason);
  void sendToAccepted(Effects& fx, const std::vector<uint8_t>& frame) const;

  std::map<wire::Uuid, Record> peers_;
  std::vector<wire::MemberInfo> ring_;
  uint64_t next_seq_ = 0;
  uint64_t epoch_ = 0;
  RunPhase phase_ = RunPhase::kStable;
  bool stale_ = false;
  std::string stale_reason_;
};


}  // namespace pccl::master

#endif  // PCCL_MASTER_MEMBERSHIP_HPP_
