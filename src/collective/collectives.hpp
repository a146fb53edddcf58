// The peer's side of all-reduces (protocol 4, docs/algorithms.md §2): a call starts on the ring at once,
// without waiting for the master, and succeeds only when every peer of the ring holds its result.
//
//   submit: hello -> predecessor, data -> successor (at most wire::kEagerBytes before its hello; a
//           small operation gathers instead: data both ways, gather_allreduce.hpp),
//           OpAnnounce -> master (in passing)            state kRunning
//   all data in + successor's hello matched              state kPrepared: the commit round (commit_round.hpp)
//   every peer prepared (streaks, or a neighbour's commit) success; OpDone -> master (in passing)
//   a failure while kRunning: fail here and everywhere (a ring abort, or closing the ring), input restored
//   a failure while kPrepared: in doubt: OpState -> master, which asks every peer and answers OpOutcome
//
// An operation is named by (epoch, tag, seq), seq counting the calls of the tag on this ring: a peer's
// k-th call of a tag is call k whenever it is made, so a call that failed on the others before this
// peer made it (an abort from the master or the ring) fails here too, at once, when it is made. A
// frame of a call this peer has not made yet is kept (EarlyFrames), one of a call that ended is dropped.
// Also the DataSink of the ring's connections. Thread: the communicator's io thread.
#ifndef PCCL_COLLECTIVE_COLLECTIVES_HPP_
#define PCCL_COLLECTIVE_COLLECTIVES_HPP_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "codec/dtype.hpp"
#include "collective/buffer_pool.hpp"
#include "collective/commit_round.hpp"
#include "collective/gather_allreduce.hpp"
#include "collective/master_port.hpp"
#include "collective/op_book.hpp"
#include "collective/region_layout.hpp"
#include "collective/ring_collective.hpp"
#include "collective/two_level_plan.hpp"
#include "net/data_channel.hpp"
#include "util/clock.hpp"

namespace pccl::collective {

// One collective call (the name is the all-reduce's, the first of them). Buffers as RingOpSpec says.
struct ReduceRequest {
  wire::Collective kind = wire::Collective::kAllReduce;
  uint32_t root = 0;  // broadcast: the root's rank in the group's ring
  uint64_t tag = 0;
  const uint8_t* input = nullptr;  // for in-place operations: the saved copy of the user's buffer
  uint8_t* output = nullptr;
  size_t count = 0;  // elements of the ring layout (OpDesc::count); 0: a barrier
  codec::DType dtype = codec::DType::kFloat32;
  codec::RedOp op = codec::RedOp::kSum;
  codec::Quant quant = codec::Quant::kNone;
  int compress = 0;  // zstd level on the wire, 0 = off
  uint32_t segment_bytes = 1 << 20;
  Millis timeout{0};
  TimePoint submitted{};
  BufferPool::Buffer saved;  // in-place: the input's copy; restored on failure (below)
  uint8_t* restore_to = nullptr;  // where `saved` goes back: restore_bytes from saved + restore_from
  size_t restore_from = 0;
  size_t restore_bytes = 0;
  codec::gpu::Engine* device = nullptr;  // input and output are device memory of this engine
  codec::gpu::Block saved_device;        // device in-place: the input's copy, on the GPU (restored as `saved`)
};

struct ReduceOutcome {
  Status status;
  uint64_t tx_bytes = 0;
  uint64_t rx_bytes = 0;
  bool gathered = false;
  bool hierarchical = false;
  uint32_t world_size = 0;
  double seconds = 0;
};
using Completion = std::function<void(const ReduceOutcome&)>;

// How a failure before this peer was prepared reaches the others (Collectives::failOp); flags, combined
// with |.
enum class FailSpread : uint8_t {
  kHere = 0,               // the others learn it their own way (the master's abort, a ring abort, their leave)
  kRingAbort = 1 << 0,     // a ring abort both ways; the ring's connections are kept
  kCloseRing = 1 << 1,     // the ring's connections close instead (a connection broke, a deadline, a member left)
  kTellMaster = 1 << 2,    // OpFailed to the master, which aborts the call on every member
};
constexpr FailSpread operator|(FailSpread a, FailSpread b) {
  return static_cast<FailSpread>(static_cast<uint8_t>(a) | static_cast<uint8_t>(b));
}
constexpr bool has(FailSpread s, FailSpread flag) { return (static_cast<uint8_t>(s) & static_cast<uint8_t>(flag)) != 0; }

// Test hooks (tests only; never set in production): called on the io thread before the commit round's
// message of `kind` (wire::RingCtl::Kind) for `tag` is sent; returning false drops it.
using RingCtlHook = std::function<bool(uint64_t tag, uint8_t kind)>;

class Collectives : public net::DataSink {
 public:
  using Channels = RingCollective::Channels;
  using ResetRing = std::function<void(const Status&)>;

  Collectives(asio::io_context& io, BufferPool* buffers, ResetRing reset_ring);
  ~Collectives() override;

  // The master (op_reports.cpp); a new session (after connect()) clears an old loss.
  void setMaster(MasterPort* master) {
    master_ = master;
    if (master != nullptr) master_gone_ = Status::ok();
  }
  void setName(std::string name) { name_ = std::move(name); }
  void setSelf(std::string short_id) { self_ = std::move(short_id); }
  void setCtlHook(RingCtlHook hook) { ctl_hook_ = std::move(hook); }
  // Told the bytes of each data frame read from a same-host neighbour's memory (net/lending.hpp).
  void setReadHook(std::function<void(uint64_t)> hook) { read_hook_ = std::move(hook); }
  // A new ring is installed: our rank and world within the group, and its connections (empty when
  // we are alone). Starts reading from them; the call numbers of every tag start again at 0.
  // `gather_bytes`: on this ring, operations gather (gather_allreduce.hpp) when (world - 1) x their
  // wire bytes is at most this (0: never); every peer of the ring must use the same value.
  void setRing(uint64_t epoch, uint32_t rank, uint32_t world, Channels successor, Channels predecessor,
               std::string predecessor_id, std::string successor_id, uint64_t gather_bytes);
  // The regions of the installed ring's members (region_layout.hpp), by group rank: set with each ring,
  // from its TopologyUpdate, so every peer of the ring holds the same layout.
  void setRegions(RegionLayout layout) { regions_ = std::move(layout); }
  // Whether every member of the installed ring is on one host (set with each ring, like the regions):
  // a gather's segments are cut finer across hosts (gatherSegmentFloor). Default: one host.
  void setOneHost(bool one_host) { one_host_ = one_host; }
  const RegionLayout& regions() const { return regions_; }
  // A two-level group (docs/algorithms.md §12), after setRing: its plan and the connections to the
  // members it exchanges data with besides the ring neighbours (two_level_calls.cpp). Large all-reduces
  // then run in two levels.
  struct PeerLink {
    uint32_t rank = 0;  // group rank
    std::string id;     // short id, for messages
    Channels channels;
  };
  void setTwoLevel(std::shared_ptr<const TwoLevelRing> plan, std::vector<PeerLink> links);
  // A rebuild started (or failed: `why`); the old connections are about to close.
  void clearRing(const Status& why = Status::ok());

  void submit(ReduceRequest req, Completion done);
  // From the master (op_reports.cpp).
  void onAbort(const wire::OpAbort& m, uint64_t epoch);
  void onQuery(const wire::OpQuery& m);
  void onOutcome(const wire::OpOutcome& m);
  void failAll(const Status& why);  // we are leaving: every operation in flight fails
  // The link to the master is gone for good: everything in flight fails, and so does every later
  // submit (with the same reason) instead of waiting for an answer that cannot come.
  void linkLost(const Status& why);
  // The peer reconnects to a master when it loses one (CommConfig::master_reconnect_ms > 0): operations
  // go on on the ring meanwhile, and a ring failure is a ring failure, whatever the master's state.
  void setReconnects(bool on) { reconnects_ = on; }
  // A master took the run back: it hears of every operation in flight again (the old one's books are
  // gone), and settles those in doubt.
  void masterBack();
  // Each link chooses how many of its connections carry data from what it measures
  // (connection_tuner.hpp; the choice is kept per peer across rings); `hook(active, changed)` hears the
  // count to the successor with each ring and each change. Off (the default): every connection does.
  using TuneHook = std::function<void(uint32_t active, bool changed)>;
  void setTuning(bool on, TuneHook hook) {
    tuning_ = on;
    tune_hook_ = std::move(hook);
  }
  // Tests: the successor link's tuner begins again at `start` connections.
  void restartTuningForTest(uint32_t start);
  // The installed ring can carry data (none installed and alone: trivially).
  bool ringUsable() const { return ring_broken_.isOk() && (world_ <= 1 || !successor_.empty()); }
  size_t active() const { return ops_.size(); }

  // net::DataSink
  Result<net::Placement> place(net::DataChannel& ch, const wire::DataHeader& h, uint32_t bytes) override;
  Status deliver(net::DataChannel& ch, const wire::DataHeader& h, const uint8_t* data, uint32_t bytes) override;
  void channelClosed(net::DataChannel& ch, const Status& why) override;
  void abandoned(net::DataChannel& ch, const wire::DataHeader& h) override;

 private:
  enum class State { kRunning, kPrepared, kInDoubt, kFailing };
  struct Op {
    Op(asio::io_context& io, uint32_t ring_world) : commit(ring_world), timer(io) {}
    ReduceRequest req;
    Completion done;
    State state = State::kRunning;
    OpKey key;
    wire::OpDesc desc;
    uint32_t world = 1;
    bool data_in = false;        // every segment arrived and every send completed
    bool successor_ok = false;   // the successor's hello matched our call
    bool announced = false;      // the master was told of it (OpAnnounce; op_reports.cpp)
    TimePoint doubt_deadline{};  // kInDoubt: when it stops waiting for the master's answer
    CommitRound commit;
    std::shared_ptr<RingOp> ring;
    BufferPool::Buffer wire;  // coded operations: the segments' wire bytes; gather: every input
    BufferPool::Buffer scratch;  // reduce-scatter: the blocks passing through
    BufferPool::Buffer staged_in, staged_out;  // gather with device buffers: input and result in host memory
    codec::gpu::Block wire_pinned, wire_device;  // device buffers: the wire bytes, pinned and on the GPU
    codec::gpu::Block scratch_device;            // device reduce-scatter: the blocks passing through
    asio::steady_timer timer;
  };

  // collectives.cpp: the life of an operation on the ring.
  Status startRing(Op& op);
  Status startGather(Op& op, RingOpSpec spec);
  // two_level_calls.cpp: the two-level side.
  Status startTwoLevel(Op& op, const RingOpSpec& spec);
  Status startTwoLevelGather(Op& op, const RingOpSpec& spec);  // a small call of a two-level group
  Status linksTo(const std::vector<uint32_t>& receivers) const;  // an internal error if one is missing
  bool twoLevel(const ReduceRequest& r) const;  // the call runs in two levels
  // A small all-reduce of a two-level group gathers in two levels (docs/algorithms.md §12a).
  bool twoLevelGathers(const ReduceRequest& r) const;
  // The group rank at the other end of one of the ring's connections (-1: none of them).
  int64_t rankOf(const net::DataChannel& ch) const { return rankOfChannel(&ch); }
  int64_t rankOfChannel(const void* ch) const;
  std::string rankName(uint32_t rank) const;  // its short id
  std::shared_ptr<Striper> striperTo(uint32_t rank) const;
  // The call's hello to every peer that sends us its data, besides the predecessor.
  void helloOthers(const Op& op, const wire::RingCtl& hello);
  // A hello from `from` (not our successor) for a two-level call.
  Status onOtherHello(const OpKey& key, uint32_t from, const wire::OpDesc& desc);
  wire::Algo chooseAlgo(const ReduceRequest& r) const;
  void ringFinished(const OpKey& key, const Status& s);
  void maybePrepared(Op& op);
  void applyCommit(Op& op, const CommitRound::Sends& s);
  void commitOp(Op& op);
  // A failure before this peer was prepared: the operation fails here, and everywhere as `spread` says.
  void failOp(Op& op, const Status& why, FailSpread spread);
  void endFailed(Op& op, const Status& why);
  void finishOp(Op& op, const Status& s);
  Status deviceCopy(codec::gpu::Engine& e, void* dst, const void* src, size_t bytes, int kind = PCCL_GPU_COPY_D2D);
  void timedOut(const OpKey& key);
  Op* find(const OpKey& key);
  OpKey keyOf(const wire::DataHeader& h) const { return OpKey{epoch_, h.op_id, h.seq}; }
  bool isFuture(const OpKey& k) const;
  std::string mismatch(const wire::OpDesc& theirs, const std::string& who, const wire::OpDesc& ours,
                       const OpKey& k) const;
  // op_reports.cpp: what the master hears of our calls. A call still running kAnnounceAfter after it
  // was made is announced (so the master can abort what cannot go on); one that ends sooner, the
  // common case on fast links, costs the master nothing. A call is announced before it is reported
  // failed or in doubt, and only an announced one is reported done.
  static constexpr std::chrono::milliseconds kAnnounceAfter{5};
  void queueAnnounce(const OpKey& key);
  void announceWaiting();
  void announce(Op& op);
  void reportDone(const Op& op);
  void reportFailed(const OpKey& key, const Status& why, bool ring_closed);
  // op_reports.cpp: a call in doubt, settled by the master.
  void inDoubt(Op& op, const std::string& why);
  void askOutcome(Op& op);  // in doubt, the master reachable: announce it and report it prepared
  // In doubt, the op's timer asks the master again every kAskAgainEvery until doubt_deadline (the op's
  // deadline, at least kDoubtGrace after it fell in doubt); then the call fails with Timeout.
  static constexpr Millis kAskAgainEvery{1000};
  static constexpr Millis kDoubtGrace{10000};
  void armDoubtTimer(Op& op);
  void stillInDoubt(const OpKey& key);
  // ring_frames.cpp: frames of the ring.
  void sendCtl(const OpKey& k, bool to_successor, const wire::RingCtl& c);
  Status onCtl(const net::DataChannel& ch, const wire::DataHeader& h, const wire::RingCtl& c);
  bool onHello(Op& op, const wire::OpDesc& theirs);  // false: the operation failed on a mismatch
  void onRingAbort(const OpKey& k, const wire::RingCtl& c, bool from_predecessor);
  Status replayBeforeCall(Op& op);
  Result<uint8_t*> placeData(Op& op, const std::string& from, uint32_t from_rank, const wire::DataHeader& h,
                             uint32_t bytes);
  bool ours(const net::DataChannel& ch, const Channels& list) const;
  // The call has ended here (committed, or quiet after a failure), before its buffers go back: every
  // connection of the ring forgets what it kept of them (lent regions, frames kept for resending).
  void operationEnded(const OpKey& key);
  // Connections we send striped frames on: TCP_NOTSENT_LOWAT and pacing (docs/algorithms.md §1).
  static void tuneForStriping(const Channels& channels);
  // Hands `striper` (to the peer `peer_id`) its tuner when tuning is on; `successor`: report its count.
  void tune(Striper& striper, const std::string& peer_id, bool successor);
  // Sends a control frame on the least loaded of `list`.
  void sendCtlOn(const Channels& list, const OpKey& k, const wire::RingCtl& c);

  asio::io_context& io_;
  BufferPool* buffers_;  // scratch buffers (the communicator's, thread-safe)
  codec::Compressor compressor_;  // zstd contexts of this io thread
  ResetRing reset_ring_;
  uint64_t gather_bytes_ = 0;
  bool one_host_ = true;
  bool ready() const { return master_ != nullptr && master_->ready(); }  // reports may go to the master
  MasterPort* master_ = nullptr;
  bool reconnects_ = false;
  Status master_gone_;  // why the master cannot be reached any more (OK while it can)
  std::string name_ = "peer=?";
  std::string self_ = "?";
  uint64_t epoch_ = 0;
  uint32_t rank_ = 0;
  uint32_t world_ = 1;
  RegionLayout regions_;
  Channels successor_;
  Channels predecessor_;
  std::shared_ptr<Striper> striper_;       // our frames over successor_
  std::shared_ptr<Striper> back_striper_;  // gather: our frames over predecessor_
  struct Link {
    PeerLink peer;
    std::shared_ptr<Striper> striper;
  };
  std::shared_ptr<const TwoLevelRing> two_level_;  // null: flat
  std::vector<Link> links_;                        // two-level: to the other members we exchange data with
  std::string predecessor_id_, successor_id_;  // short ids, for messages
  Status ring_broken_;  // why the current ring can no longer carry data
  Status failing_all_;  // while failAll() runs: its reason (OK otherwise)
  std::map<OpKey, std::unique_ptr<Op>> ops_;
  std::unordered_map<uint64_t, const Op*> by_tag_;   // the tags in flight
  std::unordered_map<uint64_t, uint32_t> next_seq_;  // per tag: the next call's number on this ring
  OpHistory history_;
  EarlyFrames before_call_;  // frames and hellos of calls this peer has not made yet
  RingCtlHook ctl_hook_;
  std::function<void(uint64_t)> read_hook_;
  std::vector<OpKey> unannounced_;  // calls made since the announce timer was armed
  asio::steady_timer announce_timer_;
  bool announce_armed_ = false;
  bool tuning_ = false;
  TuneHook tune_hook_;
  std::map<std::string, std::shared_ptr<ConnectionTuner>> tuners_;  // per peer (short id)
};

}  // namespace pccl::collective

#endif  // PCCL_COLLECTIVE_COLLECTIVES_HPP_
