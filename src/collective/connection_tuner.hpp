// How many of a link's connections carry its data, chosen from what the link measures (docs/algorithms.md
// §13). The ring builds a pool of connections to each neighbour; the striper hands frames only to the
// first active() of them. Every few round trips the striper reports a sample: how long the link had
// frames waiting for a connection (it was the bottleneck) and how many bytes the remote acknowledged.
// Only samples in which the link was the bottleneck say anything about its connections; the others are
// dropped. The tuner climbs a ladder of counts (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, ... up to the pool)
// while a step up carries clearly more, tries fewer when its first step up did not pay, then holds;
// it probes one step up again now and then, and starts over from where it is when the rate or the
// round trip moves (a reroute, a path that got better or worse). A sample after a change is dropped:
// the new connections' windows are still opening.
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
  uint32_t srtt_us = 0;  // the active connections' smoothed round trip; 0 when unknown
};

class ConnectionTuner {
 public:
  // A sample counts when frames waited for a connection at least this share of it.
  static constexpr double kBusyEnough = 0.8;
  // A step up must carry this much more to be kept; a step down this share of it.
  static constexpr double kUpGain = 1.08;
  static constexpr double kDownKeep = 0.97;
  // While holding: a rate or round trip this far off (either way) for two samples starts over.
  static constexpr double kMoved = 0.3;
  // While holding: valid samples between two probes one step up.
  static constexpr uint32_t kProbeEvery = 40;

  // `pool`: the connections the link has (≥ 1); `start`: the count to begin with (clamped to the pool).
  ConnectionTuner(uint32_t pool, uint32_t start);

  uint32_t active() const { return ladder_[at_]; }
  uint32_t pool() const { return ladder_.back(); }
  uint64_t changes() const { return changes_; }
  // How long a sample should last on a path whose round trip is `srtt_us` (0: unknown), µs.
  static uint64_t intervalUs(uint32_t srtt_us);
  // A new pool (a new ring to the same peer): keeps what it learnt where the ladder still has it.
  void setPool(uint32_t pool);
  // Takes one sample; true when active() changed.
  bool add(const TunerSample& s);

 private:
  enum class Mode { kStart, kUp, kDown, kHold };
  void moveTo(size_t at, Mode mode);
  void startOver();
  bool decide();

  std::vector<uint32_t> ladder_;
  std::vector<double> rate_;      // bytes/s per rung (EWMA); 0: not measured
  std::vector<uint32_t> count_;   // samples per rung since it was last cleared
  size_t at_ = 0;
  size_t from_ = 0;               // kUp/kDown: the rung we probe against
  Mode mode_ = Mode::kStart;
  bool climbed_ = false;          // kUp: a step up was kept since the last start
  uint32_t skip_ = 0;             // samples still to drop after a change
  uint32_t held_ = 0;             // kHold: valid samples since the last probe
  uint32_t moved_ = 0;            // kHold: consecutive samples off by kMoved
  uint32_t srtt_ref_ = 0;         // kHold: the round trip when the hold began
  uint32_t outage_ = 0;           // consecutive samples far below anything measured
  uint64_t changes_ = 0;
};

}  // namespace pccl::collective

#endif  // PCCL_COLLECTIVE_CONNECTION_TUNER_HPP_
