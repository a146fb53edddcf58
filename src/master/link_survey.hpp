// What the master knows of the links between peers, and how it measures them (docs/protocol.md §5.7,
// docs/algorithms.md §10). Pure logic: no sockets; times are passed in.
//
// LinkBook: the last measurement of each ordered pair of peers (A->B and B->A are separate), kept until
// one of the two leaves. LinkSurvey: one measurement, in rounds. In a round each peer sends to at most
// one peer and receives from at most one (scheduleRounds), so no link shares a sender's uplink or a
// receiver's downlink with another link being measured. A round ends when every peer in it reported.
// A link that did not work is measured once more after the planned rounds (a fault of the network
// that healed); one that fails again is recorded unusable.
// Thread: MasterServer's event loop only.
#ifndef PCCL_MASTER_LINK_SURVEY_HPP_
#define PCCL_MASTER_LINK_SURVEY_HPP_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "master/ring_solver.hpp"
#include "util/clock.hpp"
#include "wire/messages.hpp"

namespace pccl::master {

struct Outgoing {
  wire::Uuid to{};
  std::vector<uint8_t> frame;
};
using Effects = std::vector<Outgoing>;

struct MeasuredLink {
  uint64_t bandwidth = 0;  // bytes/s; 0: unusable (nothing came through)
  uint64_t rtt_us = 0;
};

class LinkBook {
 public:
  // Both directions then hold the smaller of their two round trips (a round trip is one for both).
  void record(const wire::Uuid& from, const wire::Uuid& to, MeasuredLink link);
  void forget(const wire::Uuid& peer);  // it left: its links go
  const MeasuredLink* find(const wire::Uuid& from, const wire::Uuid& to) const;
  bool has(const wire::Uuid& from, const wire::Uuid& to) const { return find(from, to) != nullptr; }
  size_t size() const { return links_.size(); }
  std::vector<wire::LinkEntry> entries() const;  // ordered by (from, to)
  // The solver's matrix over `members` (index i is members[i]); links not in the book are unusable.
  LinkMatrix matrix(const std::vector<wire::Uuid>& members) const;

 private:
  std::map<std::pair<wire::Uuid, wire::Uuid>, MeasuredLink> links_;
};

// An ordered pair of members to measure: (sender index, receiver index).
using ProbePair = std::pair<size_t, size_t>;

// Splits `pairs` into rounds in which every index sends at most once and receives at most once. The
// pairs of every ordered pair among n peers take n-1 rounds (round s: i -> i+s mod n).
std::vector<std::vector<ProbePair>> scheduleRounds(std::vector<ProbePair> pairs, size_t n);

struct SurveyConfig {
  uint32_t budget_ms = 2000;           // a sender sends this long at most, per round
  uint64_t max_bytes = 256ull << 20;   // ... or this many bytes
  uint32_t slack_ms = 10000;           // a round fails when a report is this late past the budget
};

class LinkSurvey {
 public:
  // Plans for the first round of measuring `pairs` among `members`. Each round gets a probe id of its
  // own, never reused by a later survey of this object.
  Effects begin(std::vector<wire::MemberInfo> members, std::vector<ProbePair> pairs, const SurveyConfig& config,
                TimePoint now);
  bool active() const { return active_; }
  bool involves(const wire::Uuid& id) const;
  bool awaits(const wire::Uuid& id) const;  // the current round still needs its report
  uint64_t probeId() const { return probe_id_; }
  size_t round() const { return round_; }
  // A peer's report for the current round; the next round's plans once this round is complete. Sets
  // *finished when the last round completed (the book then holds every measured link).
  Effects report(const wire::Uuid& id, const wire::ProbeReport& r, LinkBook* book, TimePoint now, bool* finished);
  // OK, or Timeout naming the peers whose reports are overdue.
  Status check(TimePoint now) const;
  void cancel() { active_ = false; }

  const std::vector<wire::MemberInfo>& members() const { return members_; }
  size_t rounds() const { return rounds_.size(); }
  size_t pairs() const { return total_pairs_; }
  TimePoint startedAt() const { return started_; }

 private:
  struct Pending {
    bool tx = false;  // the sender's report arrived
    bool rx = false;  // the receiver's
    MeasuredLink link;
  };
  Effects startRound(TimePoint now);

  bool active_ = false;
  std::vector<wire::MemberInfo> members_;
  SurveyConfig config_;
  std::vector<std::vector<ProbePair>> rounds_;
  size_t round_ = 0;
  size_t total_pairs_ = 0;
  uint64_t probe_id_ = 0;  // the current round's
  uint64_t next_probe_id_ = 1;
  TimePoint started_{};
  TimePoint round_started_{};
  std::map<ProbePair, Pending> pending_;
  std::set<size_t> awaiting_;  // members whose report the round still needs
  std::vector<ProbePair> failed_;  // links that did not work in the planned rounds
  bool retried_ = false;           // the rounds measuring them again were added
};

}  // namespace pccl::master

#endif  // PCCL_MASTER_LINK_SURVEY_HPP_
