// Which run a master leads, and how it takes a run back from the peers that come to it after they lost
// their master (docs/concepts.md "When the master dies", docs/protocol.md §8.8). Pure logic: no sockets,
// time from the caller.
//
// A master keeps nothing the peers cannot give back: each member remembers the run's id, the term of
// the master it followed, its own id, its last ring's epoch and members, and sends them in its
// JoinRequest when it comes back. The one thing a master may keep on disk (MasterConfig::state_file)
// is {run id, term}: so that a master restarted in place knows it is one and waits for the run to come
// back before it lets a newcomer start another, and so that its terms never repeat.
//
// Roles:  kLeader      leads a run (possibly still empty: a fresh master starts a run with its first peer)
//         kStandby     leads nothing: takes a run from the first peer that brings one back, and refuses
//                      newcomers (so that a newcomer with several master addresses finds the leader)
//         kRecovering  took a run back and waits for the rest of its last ring, at most `window`
// Thread: MasterServer's event loop only.
#ifndef PCCL_MASTER_RUN_RECOVERY_HPP_
#define PCCL_MASTER_RUN_RECOVERY_HPP_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "util/clock.hpp"
#include "wire/messages.hpp"

namespace pccl::master {

struct RunRecord {
  wire::Uuid run_id{};
  uint64_t term = 0;
  uint64_t epoch = 0;  // the newest epoch this master (or one before it) started: epochs never repeat
  // The members' ring keys: a member coming back proves it holds its own (a resume signature), so a
  // master that restarts or takes over knows whom to believe (docs/security.md).
  std::map<wire::Uuid, wire::SignKey> keys;
};

// Terms at or above this are refused (a resume, the state file, etcd's record): a master adds one to the
// highest term it hears of, which must not wrap.
inline constexpr uint64_t kMaxTerm = uint64_t{1} << 62;
// Members a record holds at most (a run's peers are capped by max_peers, at most this).
inline constexpr size_t kMaxRecordMembers = 65536;

// A run id as 32 lowercase hex digits (state file, etcd record), and back (false: not that).
std::string uuidHex(const wire::Uuid& id);
bool parseUuidHex(const std::string& s, wire::Uuid* id);
// A ring key as 64 lowercase hex digits, and back.
std::string signKeyHex(const wire::SignKey& k);
bool parseSignKeyHex(const std::string& s, wire::SignKey* k);

// MasterConfig::state_file: read at start (nullopt when the file does not exist), written atomically
// (a temporary file, fsync, rename) when the record changes.
Result<std::optional<RunRecord>> readRunRecord(const std::string& path);
Status writeRunRecord(const std::string& path, const RunRecord& r);

// kFollower: under etcd (etcd_leadership.hpp), another master holds the leadership; everyone is refused.
enum class MasterRole : uint8_t { kLeader = 0, kStandby = 1, kRecovering = 2, kFollower = 3 };
const char* masterRoleName(MasterRole r);

class RunRecovery {
 public:
  // `standby`: start as a standby. `stored`: the record a previous incarnation wrote (state_file):
  // the master waits `window` for that run's members before it lets newcomers start over.
  RunRecovery(bool standby, std::optional<RunRecord> stored, Millis window, TimePoint now);

  enum class Verdict {
    kJoin,        // a newcomer: join as a new pending peer (the first one starts the ring)
    kResume,      // a member coming back: take it back under its id
    kAdopt,       // take the run this peer brings back (then kResume it); the master was empty
    kSupersede,   // this peer followed a newer master of our run: drop our members, then adopt
    kRefuse,      // answer Error(code, reason) and close
  };
  struct Decision {
    Verdict verdict = Verdict::kJoin;
    Code code = Code::kOk;  // kRefuse: the Error's code
    std::string reason;
  };
  // A peer without a ring (epoch 0: pending) never makes a master take a run over (kAdopt,
  // kSupersede): it is refused until a member of the run's ring brought the run back.
  // `members`: how many peers the master holds now (accepted or pending).
  Decision decide(const wire::JoinRequest& m, size_t members) const;

  // Takes the run `m` brings back: a new term above both ours and the peer's; waits for the members
  // of its ring (or, when it brings none, for `window`). The caller drops its old members first.
  void adopt(const wire::JoinRequest& m, TimePoint now);
  // A member of the run came back (kResume while recovering): remembered for the rebuild.
  void noteReturn(const wire::MemberInfo& info, const wire::JoinRequest& m);
  // A returned member was lost again before the rebuild.
  void forget(const wire::Uuid& id) { returned_.erase(id); }

  // A resume of member `m.peer_id` of our run, already signed with `m.ring_key`: refused when the run
  // knows another key for that member; a key the run does not know yet is pinned while recovering (the
  // first proof wins, every later claim must match it).
  Status proveMember(const wire::JoinRequest& m);
  // The run's members and their keys as the leader holds them now (accepted and pending): the record
  // follows (while recovering, keys are only added: members not back yet keep theirs).
  void setMembers(std::map<wire::Uuid, wire::SignKey> keys);
  // Whether the run knows member `id` (a key is on record for it).
  bool knows(const wire::Uuid& id) const { return run_.keys.count(id) != 0; }
  // kRecovering: every member of the last ring is back, or the window closed.
  bool due(TimePoint now) const;

  // The end of a recovery: the ring the run goes on with, and whether it can be used as it is.
  struct Rebuild {
    uint64_t epoch = 0;                   // the newest epoch any member held
    std::vector<wire::MemberInfo> ring;   // the returned members, in that ring's order (others appended)
    bool stale = false;                   // not everyone is back, or not everyone holds that ring
    std::string why;                      // stale: what is missing
  };
  Rebuild finish();

  // The master lost every member of its run without a Leave: it becomes a standby for the run.
  void stepDown() { role_ = MasterRole::kStandby; }
  // Under etcd: another master leads (`leader`, empty when unknown); every peer is sent there.
  void follow(std::string leader) {
    etcd_ = true;
    role_ = MasterRole::kFollower;
    leader_hint_ = std::move(leader);
  }
  // Under etcd: elected with `record` (term already the new one). A recorded run is taken back from
  // its peers (kRecovering, as after a restart); no run recorded yet: a new one starts here.
  void elect(const RunRecord& record, TimePoint now);
  // A standby that a newcomer with no other master chose starts the run (kLeader, a new term).
  void lead();
  // The run reached `epoch` (a ring build started): remembered, so that a successor continues above it.
  void noteEpoch(uint64_t epoch) {
    if (epoch > run_.epoch) {
      run_.epoch = epoch;
      ++changes_;
    }
  }

  MasterRole role() const { return role_; }
  const RunRecord& run() const { return run_; }
  // Bumped whenever the record changes (adopt, lead): the owner persists it.
  uint64_t changes() const { return changes_; }
  TimePoint windowEnd() const { return window_end_; }
  size_t expectedCount() const { return expected_.size(); }
  size_t returnedCount() const { return returned_.size(); }

 private:
  Decision decideRun(const wire::JoinRequest& m, size_t members) const;  // decide() before the ring rule
  struct Returned {
    wire::MemberInfo info;
    uint64_t epoch = 0;
    bool ring_up = false;
  };
  MasterRole role_;
  RunRecord run_;
  bool etcd_ = false;  // leadership and terms come from etcd: the run is the recorded one, never adopted
  std::string leader_hint_;
  Millis window_;
  TimePoint window_end_{};
  uint64_t epoch_ = 0;                  // the newest epoch brought back
  std::vector<wire::Uuid> expected_;    // that epoch's ring, in order
  std::map<wire::Uuid, Returned> returned_;
  uint64_t changes_ = 0;
};

}  // namespace pccl::master

#endif  // PCCL_MASTER_RUN_RECOVERY_HPP_
