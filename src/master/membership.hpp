// The master's membership and ring-building state machine. Pure logic: no sockets; time comes from a
// clock the owner may replace (tests). Each input returns the messages to send (Effects); MasterServer
// delivers them.
//
// Per peer:   (joined) -> kPending -> kAccepted -> (removed)      kPending -> (removed)
// Run phase:  kStable --all accepted voted / first peer--> kBuilding(epoch+1)
//             kStable --all accepted voted optimise (or update, automatic mode)--> kMeasuring
//             kMeasuring --every round reported--> kBuilding(epoch+1), ring ordered by the links
//             kMeasuring --a participant left, a round timed out--> kStable, stale (TopologyFailed)
//             kBuilding --every member sent P2PReady--> kStable (TopologyReady)
//             kBuilding --a member left or sent P2PFailed--> kStable, stale (TopologyFailed)
//             kStable --all voted, not all the same kind--> kStable, stale (TopologyFailed: Mismatch)
// docs/architecture.md documents these transitions.
// Thread: MasterServer's event loop only.
#ifndef PCCL_MASTER_MEMBERSHIP_HPP_
#define PCCL_MASTER_MEMBERSHIP_HPP_

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "master/link_survey.hpp"
#include "pccl/status.hpp"
#include "wire/messages.hpp"

namespace pccl::master {

class Membership {
 public:
  enum class PeerPhase { kPending, kAccepted };
  enum class RunPhase { kStable, kMeasuring, kBuilding };

  // Link surveys (docs/protocol.md §5.7): their budget, and whether a plain update also measures the
  // links it lacks and orders the ring by them (automatic mode).
  void configureSurveys(const SurveyConfig& config, bool auto_optimize);
  void setClock(std::function<TimePoint()> now) { now_ = std::move(now); }

  // A new authenticated peer. `info.id` must be unique. Admitted at once when nobody is accepted.
  Effects join(const wire::MemberInfo& info);
  // An accepted peer asks for a topology update (`optimize`: a measured one); the update runs when every
  // accepted peer has asked, and all must ask for the same kind.
  Effects vote(const wire::Uuid& id, bool optimize = false);
  // A participant's report of a survey round.
  Effects probeReport(const wire::Uuid& id, const wire::ProbeReport& r);
  // A member whose control connection broke came back on a new one, to this master (which held its
  // place): what it may have missed meanwhile. A report of the survey round it may have lost (or whose
  // plan it never got) counts as nothing measured, so the round goes on and its links are measured
  // again after the last round (LinkSurvey); a ring being built is sent again (it answers with its
  // outcome again); how the last build ended is repeated.
  Effects returned(const wire::Uuid& id);
  // Fails a survey whose round is overdue.
  Effects tick();
  Effects withdrawVote(const wire::Uuid& id);
  Effects p2pReady(const wire::Uuid& id, uint64_t epoch);
  Effects p2pFailed(const wire::Uuid& id, uint64_t epoch, Code code, const std::string& reason);
  // Graceful leave, heartbeat timeout, broken connection. Unknown ids are ignored.
  Effects remove(const wire::Uuid& id, wire::LeaveReason reason, const std::string& detail);

  // Taking a run back (run_recovery.hpp): while held, nobody is admitted and no ring is built.
  void hold() { held_ = true; }
  // A member of the run came back to this master: accepted at once, under its id, at `position` of the
  // ring order (its place in the ring it held).
  Effects rejoin(const wire::MemberInfo& info, uint64_t position);
  // The recovery ended: the run goes on at `epoch` with `ring` (the members that came back); `stale_why`
  // non-empty: that ring cannot be used as it is and every member must vote. Releases the hold.
  Effects resume(uint64_t epoch, std::vector<wire::MemberInfo> ring, const std::string& stale_why);

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

  const LinkBook& links() const { return book_; }
  uint64_t surveys() const { return surveys_; }               // completed
  uint64_t linksMeasured() const { return links_measured_; }  // over all surveys
  // The installed (or building) ring's predicted bottleneck and the join-order ring's over the same
  // links, bytes/s; 0 when some link of the ring was not measured.
  double predictedBottleneck() const { return predicted_; }
  double joinOrderBottleneck() const { return join_predicted_; }
  std::vector<wire::MemberInfo> joinOrder() const;  // every peer, accepted or pending

 private:
  enum class Vote : uint8_t { kNone, kUpdate, kOptimize };
  // How the build of `epoch` ended (TopologyReady or TopologyFailed), repeated to a member that comes
  // back on a new control connection (returned()).
  struct Outcome {
    uint64_t epoch = 0;
    std::vector<uint8_t> frame;
  };
  Outcome last_outcome_;

  struct Record {
    wire::MemberInfo info;  // as it joined: `region` is the declared one (ring_ holds the effective ones)
    PeerPhase phase = PeerPhase::kPending;
    uint64_t join_seq = 0;
    Vote vote = Vote::kNone;
    bool ready = false;
  };

  void maybeStartBuild(Effects& fx);
  // The members the next ring takes (join order): all but those master::withheld() keeps pending,
  // each logged when it starts waiting.
  std::vector<wire::MemberInfo> admissible();
  std::vector<size_t> withheldNow(const std::vector<wire::MemberInfo>& all) const;  // indices into `all`
  // Measures `pairs` among `members` (join order), then builds; builds at once when there is nothing to measure.
  void startSurvey(Effects& fx, const std::vector<wire::MemberInfo>& members, std::vector<ProbePair> pairs);
  // A ring of `members` (join order), ordered by the links the book holds where it can.
  void startBuild(Effects& fx, const std::vector<wire::MemberInfo>& members);
  // The effective regions of ring_ (master/regions.hpp) from `members` (join order, declared regions)
  // and the links; logged when they changed.
  void placeRegions(const std::vector<wire::MemberInfo>& members);
  // Flat or two-level per group (levels.hpp), after the regions; logged when a group's choice changes.
  void placeLevels(const std::vector<wire::MemberInfo>& members);
  void noteRegions(const std::string& how);
  void failBuild(Effects& fx, Code code, const std::string& reason);
  void clearVotes();
  void sendToAccepted(Effects& fx, const std::vector<uint8_t>& frame) const;

  std::map<wire::Uuid, Record> peers_;
  std::vector<wire::MemberInfo> ring_;
  std::map<wire::Uuid, std::string> regions_;  // ring_'s regions as last logged
  std::map<uint32_t, std::string> levels_;     // each group's levels as last logged
  std::set<wire::Uuid> withheld_;              // pending peers kept out of the last ring (logged once)
  uint64_t next_seq_ = 0;
  uint64_t epoch_ = 0;
  RunPhase phase_ = RunPhase::kStable;
  bool held_ = false;
  bool stale_ = false;
  std::string stale_reason_;
  // Links.
  SurveyConfig survey_config_;
  bool auto_optimize_ = false;
  LinkSurvey survey_;
  LinkBook book_;
  uint64_t surveys_ = 0;
  uint64_t links_measured_ = 0;
  double predicted_ = 0;
  double join_predicted_ = 0;
  std::function<TimePoint()> now_ = [] { return Clock::now(); };
};


}  // namespace pccl::master

#endif  // PCCL_MASTER_MEMBERSHIP_HPP_
