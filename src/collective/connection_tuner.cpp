#include "collective/connection_tuner.hpp"

#include <algorithm>
#include <cmath>

namespace pccl::collective {
namespace {

// A sample far below what any rung carried (an outage, not a count): dropped, unless it lasts.
constexpr double kOutage = 0.3;
constexpr uint32_t kOutageSamples = 3;
// A single sample decides a probe when it is this clear; otherwise kSamples are taken.
constexpr double kClearlyUp = 1.5, kClearlyDown = 0.67;
// The path's least round trip falling below this share of what it was: a shorter path.
constexpr double kRttFell = 0.7;
// The smoothed round trip rising above this share of what it was, as the rate falls: a longer path.
constexpr double kRttRose = 1.3;
// Consecutive samples that must have moved.
constexpr uint32_t kMovedSamples = 3;

// 1, 2, 4, 8, 16, ...: a step doubles the count, so that its effect stands out of a sample's noise;
// the pool last.
std::vector<uint32_t> ladderFor(uint32_t pool) {
  std::vector<uint32_t> ladder;
  for (uint64_t k = 1; k <= pool; k *= 2) ladder.push_back(static_cast<uint32_t>(k));
  if (ladder.back() != pool) ladder.push_back(pool);
  return ladder;
}

bool off(double now, double ref, double by) { return ref > 0 && std::fabs(now / ref - 1.0) > by; }

}  // namespace

ConnectionTuner::ConnectionTuner(uint32_t pool, uint32_t start, bool trusted) {
  ladder_ = ladderFor(std::max(pool, 1u));
  startOver();
  while (at_ + 1 < ladder_.size() && ladder_[at_ + 1] <= start) ++at_;
  if (trusted) {
    mode_ = Mode::kHold;
    explore_ = false;
  }
}

uint32_t ConnectionTuner::startFor(uint32_t min_rtt_us) {
  if (min_rtt_us == 0) return kUnknownStart;
  if (min_rtt_us < kLanRttUs) return kMaxStart;
  const uint32_t want = std::clamp(min_rtt_us / kRttPerConnectionUs, kMinStart, kMaxStart);
  uint32_t rung = 1;
  while (rung * 2 <= want) rung *= 2;
  return rung;
}

uint64_t ConnectionTuner::intervalUs(uint32_t srtt_us) {
  if (srtt_us == 0) return 200000;
  return std::clamp<uint64_t>(uint64_t{srtt_us} * 16, 150000, 2000000);
}

void ConnectionTuner::setPool(uint32_t pool) {
  const uint32_t was = active();
  ladder_ = ladderFor(std::max(pool, 1u));
  at_ = 0;
  while (at_ + 1 < ladder_.size() && ladder_[at_ + 1] <= was) ++at_;
  startOver();
  skip_ = 1;
}

void ConnectionTuner::startOver() {
  sum_.assign(ladder_.size(), 0.0);
  qsum_.assign(ladder_.size(), 0.0);
  count_.assign(ladder_.size(), 0);
  mode_ = Mode::kStart;
  outage_ = 0;
  explore_ = true;
  base_rtt_ = 0;
  resetHold();
}

void ConnectionTuner::resetHold() {
  held_ = 0;
  moved_ = 0;
  rtt_ref_ = 0;
  srtt_ref_ = 0;
  window_q_ = 0;
  window_n_ = 0;
}

double ConnectionTuner::rate(size_t at) const { return count_[at] == 0 ? 0.0 : sum_[at] / count_[at]; }

void ConnectionTuner::moveTo(size_t at, Mode mode) {
  if (at != at_) {
    ++changes_;
    if (mode != Mode::kHold) {  // a probe measures afresh
      sum_[at] = 0;
      qsum_[at] = 0;
      count_[at] = 0;
    }
  }
  at_ = at;
  mode_ = mode;
  skip_ = 1;
  resetHold();
}

bool ConnectionTuner::standingQueue(double q_us, uint32_t min_rtt_us) {
  return min_rtt_us != 0 && q_us >= std::max<double>(kFullFloorUs, min_rtt_us * kFullShare);
}

bool ConnectionTuner::add(const TunerSample& s) {
  if (s.seconds <= 0 || s.busy < kBusyEnough) return false;  // the link was not the bottleneck
  if (s.bytes == 0) return false;                             // nothing acknowledged: an outage
  if (s.warming) return false;                                // no loss yet: the rate overstates the path
  if (skip_ > 0) {
    --skip_;
    return false;
  }
  const double r = static_cast<double>(s.bytes) / s.seconds;
  double best = 0;
  for (size_t i = 0; i < ladder_.size(); ++i) best = std::max(best, rate(i));
  if (best > 0 && r < kOutage * best) {
    if (++outage_ < kOutageSamples) return false;
    startOver();
  } else {
    outage_ = 0;
  }
  if (mode_ == Mode::kHold) {
    // The round trip's floor can only fall (the kernel keeps its least for minutes): a shorter path.
    if (rtt_ref_ == 0) rtt_ref_ = s.min_rtt_us;
    if (srtt_ref_ == 0) srtt_ref_ = s.srtt_us;
    const bool moved = off(r, rate(at_), kMoved) || (s.min_rtt_us > 0 && s.min_rtt_us < kRttFell * rtt_ref_);
    moved_ = moved ? moved_ + 1 : 0;
    if (moved_ >= kMovedSamples) {
      // Slower with a longer round trip: a longer path, not a queue. Its round trip now is its least
      // until the kernel's catches up (else the difference reads as a standing queue, and the link
      // would look down instead of up).
      const bool longer = r < rate(at_) && srtt_ref_ > 0 && s.srtt_us > kRttRose * srtt_ref_;
      startOver();
      if (longer) base_rtt_ = s.srtt_us;
    }
  }
  const uint32_t least = std::max(s.min_rtt_us, base_rtt_);
  const double q = s.srtt_us > least ? s.srtt_us - least : 0;
  min_rtt_ = least;
  sum_[at_] += r;
  qsum_[at_] += q;
  ++count_[at_];
  window_q_ += q;
  ++window_n_;
  return decide();
}

bool ConnectionTuner::decide() {
  const size_t was = at_;
  const bool top = at_ + 1 >= ladder_.size();
  // The rung's queue over its samples: room on the path, or a standing queue at its bottleneck.
  const bool full = standingQueue(count_[at_] ? qsum_[at_] / count_[at_] : 0, min_rtt_);
  // Enough samples at this rung to judge it against `ref`: kSamples, or one that leaves no doubt.
  auto judged = [this](double ref) {
    const double ratio = rate(at_) / ref;
    return count_[at_] >= kSamples || ratio >= kClearlyUp || ratio <= kClearlyDown;
  };
  switch (mode_) {
    case Mode::kStart:
      if (count_[at_] < kSamples) return false;
      from_ = at_;
      if (!full && !top) {
        moveTo(at_ + 1, Mode::kUp);
      } else if (full && at_ > 0) {
        moveTo(at_ - 1, Mode::kDown);
      } else {
        moveTo(at_, Mode::kHold);
      }
      break;
    case Mode::kUp: {
      const double ref = rate(from_);
      if (!judged(ref)) return false;
      if (rate(at_) < kUpGain * ref) {
        moveTo(from_, Mode::kHold);  // more did not pay
      } else if (!full && !top) {
        from_ = at_;
        moveTo(at_ + 1, Mode::kUp);  // it paid, and the path still has room
      } else {
        moveTo(at_, Mode::kHold);
      }
      break;
    }
    case Mode::kDown: {
      // Against the best rung above, so that small losses do not add up step after step.
      double above = 0;
      for (size_t j = at_ + 1; j < ladder_.size(); ++j) above = std::max(above, rate(j));
      if (!judged(above)) return false;
      if (rate(at_) < kDownKeep * above) {
        moveTo(from_, Mode::kHold);  // fewer carried less
      } else if (full && at_ > 0) {
        from_ = at_;
        moveTo(at_ - 1, Mode::kDown);  // as much with fewer, and still a standing queue
      } else {
        moveTo(at_, Mode::kHold);
      }
      break;
    }
    case Mode::kHold: {
      ++held_;
      if (window_n_ < kSamples) break;
      // Every kSamples: the queue over them says which way to look, if that way was not tried lately.
      const bool recent_full = standingQueue(window_q_ / window_n_, min_rtt_);
      window_q_ = 0;
      window_n_ = 0;
      const bool due = held_ >= kProbeEvery;
      if (!recent_full && !top && ((explore_ && count_[at_ + 1] == 0) || due)) {
        from_ = at_;
        moveTo(at_ + 1, Mode::kUp);
      } else if (recent_full && at_ > 0 && ((explore_ && count_[at_ - 1] == 0) || due)) {
        from_ = at_;
        moveTo(at_ - 1, Mode::kDown);
      } else if (due) {
        held_ = 0;
      }
      break;
    }
  }
  return at_ != was;
}

}  // namespace pccl::collective
