// How many of a link's connections carry its data, chosen from what the link measures (docs/algorithms.md
// §13). The ring builds a pool of connections to each neighbour; the striper hands frames only to the
// first active() of them. Every few round trips the striper reports a sample: how long the link had
// frames waiting for a connection (it was the bottleneck) and how many bytes the remote acknowledged.
// Only samples in which the link was the bottleneck say anything about its connections; the others are
// dropped, and so are samples while a connection is still in its first slow start (no loss seen yet:
// its rate then says nothing of the path's loss). The tuner walks a ladder of counts (1, 2, 4, 8, 16,
// 32, ... up to the pool), each rung judged on the mean of a few samples, and the bottleneck's queue
// (the round trip above the path's least) says which way to look: up while the path shows no standing
// queue and each step up carries more; down while a standing queue shows and fewer carry as much; then it
// holds, looking again every few samples, and starts over from where it is when the rate moves or
// the path gets shorter (a reroute, a path that got better or worse). A sample after a change is
// dropped: the new connections' windows are still opening.
// Thread: whoever owns it (the communicator's io thread).
#ifndef PCCL_COLLECTIVE_CONNECTION_TUNER_HPP_
#define PCCL_COLLECTIVE_CONNECTION_TUNER_HPP_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace pccl::collective {

struct TunerSample {
  double seconds = 0;    // the interval's length
  double busy = 0;       // the share of it during which frames waited for a connection (0..1)
  uint64_t bytes = 0;    // bytes the remote acknowledged over it, all connections of the link
  uint32_t srtt_us = 0;     // the active connections' smoothed round trip (mean); 0 when unknown
  uint32_t min_rtt_us = 0;  // their smallest round trip seen: the path without a queue; 0 when unknown
  bool warming = false;     // a connection has not left its first slow start (the sample is dropped)
};

class ConnectionTuner {
 public:
  // A sample counts when frames waited for a connection at least this share of it.
  static constexpr double kBusyEnough = 0.8;
  // A step up must carry this much more to be kept; a step down this share of it.
  static constexpr double kUpGain = 1.02;
  // The samples a rung is judged on (fewer when one leaves no doubt).
  static constexpr uint32_t kSamples = 3;
  static constexpr double kDownKeep = 0.97;
  // While holding: a rate this far off (either way) for three samples starts over.
  static constexpr double kMoved = 0.35;
  // While holding: valid samples between two probes one step up.
  static constexpr uint32_t kProbeEvery = 40;

  // `pool`: the connections the link has (≥ 1); `start`: the count to begin with (clamped to the pool).
  // `trusted`: the start came from the path (startFor a measured round trip), so the link holds it and
  // probes only every kProbeEvery samples, until the rate or the path moves (then it looks around as
  // an untrusted start does at once: up or down by the queue, one rung at a time).
  ConnectionTuner(uint32_t pool, uint32_t start, bool trusted = false);

  uint32_t active() const { return ladder_[at_]; }
  uint32_t pool() const { return ladder_.back(); }
  uint64_t changes() const { return changes_; }
  // The count a new link starts from, by its least round trip so far (`min_rtt_us`, from the ring's
  // handshakes; 0: unknown): one connection per kRttPerConnectionUs of round trip, from kMinStart to
  // kMaxStart, rounded down to a power of two (a rung). Loss limits a flow to about MSS / (RTT · √p):
  // the longer the path, the more flows fill the same bottleneck; beyond 16 the flows' bursts fill its
  // queue instead. Below kLanRttUs (a LAN) kMaxStart too: there a flow's window is a few segments, a
  // loss often ends in a retransmission timeout (200 ms at least) and more flows keep the link busy
  // meanwhile, for nothing on a path that is rarely the ring's bottleneck (measured: algorithms.md §13).
  static constexpr uint32_t kRttPerConnectionUs = 5000, kMinStart = 4, kMaxStart = 16, kUnknownStart = 8;
  static constexpr uint32_t kLanRttUs = 5000;
  static uint32_t startFor(uint32_t min_rtt_us);
  // How long a sample should last on a path whose round trip is `srtt_us` (0: unknown), µs.
  static uint64_t intervalUs(uint32_t srtt_us);
  // A new pool (a new ring to the same peer): keeps what it learnt where the ladder still has it.
  void setPool(uint32_t pool);
  // Takes one sample; true when active() changed.
  bool add(const TunerSample& s);

 private:
  enum class Mode { kStart, kUp, kDown, kHold };
  // Whether the bottleneck keeps a standing queue (the path is full): the queueing delay — the round
  // trip above the path's least — at least kFullShare of that least and kFullFloorUs. Shorter queues
  // are the ones loss-limited windows saw through: the connections, not the path, limit the rate.
  static constexpr double kFullFloorUs = 4000, kFullShare = 0.2;
  static bool standingQueue(double q_us, uint32_t min_rtt_us);
  void moveTo(size_t at, Mode mode);
  void startOver();
  void resetHold();  // what a hold watches: from nothing again
  bool decide();
  double rate(size_t at) const;  // mean bytes/s at rung `at` since it was last cleared; 0: none

  std::vector<uint32_t> ladder_;
  std::vector<double> sum_;       // per rung: the samples' rates added up
  std::vector<double> qsum_;      // per rung: their queueing delays (µs) added up
  std::vector<uint32_t> count_;   // per rung: how many
  size_t at_ = 0;
  size_t from_ = 0;               // kUp/kDown: the rung we probe against
  Mode mode_ = Mode::kStart;
  uint32_t skip_ = 0;             // samples still to drop after a change
  uint32_t held_ = 0;             // kHold: valid samples since the last probe
  uint32_t moved_ = 0;            // kHold: consecutive samples off by kMoved
  uint32_t rtt_ref_ = 0;          // kHold: the path's least round trip when the hold began
  uint32_t srtt_ref_ = 0;         // kHold: the smoothed round trip when the hold began
  // A longer path's least round trip (the kernel's least stays the old path's for minutes): the
  // smoothed round trip when the rate fell and the round trip rose by kRttRose together; 0: none.
  uint32_t base_rtt_ = 0;
  uint32_t min_rtt_ = 0;          // the last sample's
  double window_q_ = 0;           // kHold: queueing delays since the last look
  uint32_t window_n_ = 0;
  uint32_t outage_ = 0;           // consecutive samples far below anything measured
  bool explore_ = true;           // kHold: probe an unmeasured neighbour rung at once (not when trusted)
  uint64_t changes_ = 0;
};

}  // namespace pccl::collective

#endif  // PCCL_COLLECTIVE_CONNECTION_TUNER_HPP_
