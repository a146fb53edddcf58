// One collective call on every member of a group, as the library lives it (docs/algorithms.md §2), with
// the data movement left to a Schedule (schedules.hpp: the ring, the gather; a two-level all-reduce is
// one more Schedule). What every algorithm shares lives here, as in src/collective/collectives.cpp:
//   - each member calls at its own time and sends a hello to its predecessor (and to every other member
//     its schedule's helloTo names, as Collectives::helloOthers);
//   - frames that reach a member before it calls wait there and are used when it calls;
//   - a member is prepared once its schedule says every frame is in and every send completed, and its
//     successor's hello arrived;
//   - the commit round is the library's own collective::CommitRound: prepared streaks to both
//     neighbours, a commit passed on both ways; a member's call returns when it commits.
// Members are group ranks (the ring's order); the engine maps them to the network's peers.
// Thread: the engine's.
#ifndef PCCL_SIM_OPERATION_HPP_
#define PCCL_SIM_OPERATION_HPP_

#include <cstdint>
#include <functional>
#include <memory>
#include <unordered_map>
#include <vector>

#include "collective/commit_round.hpp"
#include "engine.hpp"

namespace pccl::sim {

// What a schedule may do: send a data frame from one member to another (any two: a ring schedule sends
// to the successor, a gather to both neighbours, a two-level schedule to region neighbours and
// counterparts), and ask how many of a member's sends have completed.
class Ports {
 public:
  virtual ~Ports() = default;
  virtual void send(uint32_t from, uint32_t to, uint32_t phase, uint64_t segment, uint64_t bytes) = 0;
  virtual uint64_t sendsDone(uint32_t rank) const = 0;
};

// One algorithm's data movement on every member, as reactions: the call, a frame landing, a send
// completing, a hello (for the eager limit). It keeps its own per-member books.
class Schedule {
 public:
  virtual ~Schedule() = default;
  virtual void start(uint32_t rank) = 0;
  virtual void delivered(uint32_t rank, uint32_t phase, uint64_t segment, uint64_t bytes) = 0;
  // The last byte of a data frame `rank` sent has left.
  virtual void sent(uint32_t /*rank*/, uint32_t /*phase*/, uint64_t /*segment*/) {}
  // `from`'s hello reached `rank` (the flat ring's: from its successor): it called, so what `rank`
  // sends it is no longer held by the eager limit.
  virtual void readyFrom(uint32_t /*rank*/, uint32_t /*from*/) {}
  // Whom `rank` sends its hello to besides its predecessor (the library's RingOp::helloTo: a two-level
  // call's every member that sends it data).
  virtual std::vector<uint32_t> helloTo(uint32_t /*rank*/) const { return {}; }
  // Every frame the member expects is in and every send it makes has completed.
  virtual bool complete(uint32_t rank) const = 0;
};

struct MemberTimes {
  Time start = -1;     // the call
  Time data_in = -1;   // every frame in, every send completed
  Time prepared = -1;  // data in and the successor's hello
  Time end = -1;       // committed: the call returns
};

class Operation : public Listener, private Ports {
 public:
  using MakeSchedule = std::function<std::unique_ptr<Schedule>(Ports&)>;
  using Ended = std::function<void(uint32_t rank, Time t)>;

  // `peers`: the network's peer of each group rank (the ring's order).
  Operation(Engine& engine, std::vector<uint32_t> peers, const MakeSchedule& make, Ended ended = nullptr);

  void callAt(uint32_t rank, Time t);  // the member makes the call at t
  const std::vector<MemberTimes>& times() const { return times_; }
  const std::vector<uint64_t>& sentBytes() const { return sent_bytes_; }  // payload per member
  // Payload per ordered pair of group ranks that exchanged data: (from * world + to, bytes).
  const std::unordered_map<uint64_t, uint64_t>& pairBytes() const { return pair_bytes_; }
  uint32_t world() const { return world_; }

  // Listener
  void sent(const Frame& f, Time t) override;
  void delivered(const Frame& f, Time t) override;
  void timer(uint32_t rank, uint64_t token, Time t) override;

 private:
  enum Kind : uint32_t { kData = 0, kHello = 1, kPrepared = 2, kCommit = 3 };
  // A control frame's b: which way it went on the ring, or to another member (a two-level hello).
  enum Way : uint64_t { kToPredecessor = 0, kToSuccessor = 1, kToOther = 2 };
  struct Member {
    explicit Member(uint32_t world) : commit(world) {}
    bool called = false, hello = false, data_in = false, prepared = false, committed = false;
    uint64_t sends_done = 0;
    std::vector<Frame> early;  // data frames that arrived before the call
    std::vector<uint32_t> early_hellos;  // others' hellos (not the successor's) before the call
    collective::CommitRound commit;
  };

  // Ports
  void send(uint32_t from, uint32_t to, uint32_t phase, uint64_t segment, uint64_t bytes) override;
  uint64_t sendsDone(uint32_t rank) const override { return members_[rank].sends_done; }

  uint32_t successor(uint32_t r) const { return (r + 1) % world_; }
  uint32_t predecessor(uint32_t r) const { return (r + world_ - 1) % world_; }
  Frame frame(uint32_t from, uint32_t to, Kind kind, uint32_t a, uint64_t b) const;
  void call(uint32_t rank, Time t);
  void control(uint32_t from, bool to_successor, Kind kind, uint32_t value);
  void helloArrived(uint32_t rank, Time t);
  void maybeDataIn(uint32_t rank, Time t);
  void maybePrepared(uint32_t rank, Time t);
  void apply(uint32_t rank, const collective::CommitRound::Sends& s, Time t);

  Engine& engine_;
  uint32_t index_;
  uint32_t world_;
  std::unique_ptr<Schedule> schedule_;
  Ended ended_;
  std::vector<Member> members_;
  std::vector<MemberTimes> times_;
  std::vector<uint64_t> sent_bytes_;
  std::unordered_map<uint64_t, uint64_t> pair_bytes_;
};

}  // namespace pccl::sim

#endif  // PCCL_SIM_OPERATION_HPP_
