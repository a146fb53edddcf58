// The emulator's account of itself, kept over time so that it can be judged per timed phase of the
// command (a benchmark row) rather than once over a whole run of warm-ups, other backends and idle time.
// A Timeline is a row of 100 ms bins; each bin counts packets, segments lost on purpose (the loss model),
// segments dropped by full bottleneck queues (the model), packets the emulator itself lost (its fault),
// and a histogram of how late packets left: the time a packet may have waited in the TUN queue before
// the reader took it, plus how late it was written after its release time.
// Not thread-safe: each router lane owns one, under its mutex.
#ifndef PCCL_WANEM_TIMELINE_HPP_
#define PCCL_WANEM_TIMELINE_HPP_

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace pccl::wanem {

// Lateness in µs: 25 µs buckets up to 1 ms, then buckets 1.4x wider each, up to ~3 s.
class LateHist {
 public:
  static constexpr size_t kBuckets = 64;
  void add(double us);
  void merge(const LateHist& o);
  uint64_t count() const;
  double quantile(double q) const;  // the upper edge of the bucket holding quantile q (conservative)
  double max() const { return max_; }

 private:
  std::array<uint32_t, kBuckets> c_{};
  double max_ = 0;
};

struct Bin {
  uint64_t packets = 0, segments = 0, bytes = 0;
  uint64_t lost_random = 0;     // segments lost on purpose (loss model)
  uint64_t queue_drops = 0;     // segments dropped by a full bottleneck queue (the model)
  uint64_t emulator_drops = 0;  // packets the emulator lost: its buffer cap, failed writes, kernel drops
  LateHist late;                // per packet: TUN wait bound + release lateness
  LateHist tun_wait;            // per packet: the TUN wait bound alone (the part of `late` before the reader)
  LateHist wake;                // the reader's wake-up latency (a 5 ms timer it also waits on)
  void merge(const Bin& o);
};

class Timeline {
 public:
  static constexpr int64_t kBinNs = 100'000'000;
  explicit Timeline(int64_t origin_ns = 0) : origin_ns_(origin_ns) {}
  Bin& at(int64_t t_ns);
  // Sum of the bins that overlap any of the intervals [begin, end] (each bin counted once).
  Bin sum(const std::vector<std::pair<int64_t, int64_t>>& intervals) const;
  Bin total() const;

 private:
  int64_t origin_ns_;
  std::vector<Bin> bins_;
};

// What one timed phase (or the whole run) looked like, and whether the emulator kept its promises:
// no packet lost by the emulator, the 99th percentile of lateness within 1 ms, no packet later than
// 10 ms, and the reader waking within 1 ms (99th percentile).
struct Verdict {
  std::string label;
  Bin bin;
  bool faithful = false;
  std::string why;  // empty when faithful
};
constexpr double kMaxLateP99Us = 1000, kMaxLateUs = 10000, kMaxWakeP99Us = 1000;
Verdict judge(std::string label, const Bin& b);

// The phases file the command's processes append to (PCCL_WANEM_PHASES): one line per timed operation,
// "LABEL BEGIN_NS END_NS" (CLOCK_MONOTONIC). Returns the intervals per label, labels in order of their
// first appearance; malformed lines are counted in *bad.
std::vector<std::pair<std::string, std::vector<std::pair<int64_t, int64_t>>>> readPhases(const std::string& path,
                                                                                           size_t* bad);

}  // namespace pccl::wanem

#endif  // PCCL_WANEM_TIMELINE_HPP_
