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
// A step up that carried less than this share is a sign that fewer may carry more.
constexpr double kUpLoss = 0.95;
constexpr uint32_t kSamples = 3;
// The round trip must move this much (either way) to start over: queueing alone moves it less.
constexpr double kRttMoved = 0.5;
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

ConnectionTuner::ConnectionTuner(uint32_t pool, uint32_t start) {
  ladder_ = ladderFor(std::max(pool, 1u));
  sum_.assign(ladder_.size(), 0.0);
  count_.assign(ladder_.size(), 0);
  while (at_ + 1 < ladder_.size() && ladder_[at_ + 1] <= start) ++at_;
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
  count_.assign(ladder_.size(), 0);
  mode_ = Mode::kStart;
  held_ = 0;
  moved_ = 0;
  srtt_ref_ = 0;
  outage_ = 0;
}

double ConnectionTuner::rate(size_t at) const { return count_[at] == 0 ? 0.0 : sum_[at] / count_[at]; }

void ConnectionTuner::moveTo(size_t at, Mode mode) {
  if (at != at_) {
    ++changes_;
    if (mode != Mode::kHold) {  // a probe measures afresh
      sum_[at] = 0;
      count_[at] = 0;
    }
  }
  at_ = at;
  mode_ = mode;
  skip_ = 1;
  held_ = 0;
  moved_ = 0;
  srtt_ref_ = 0;
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
    if (srtt_ref_ == 0) srtt_ref_ = s.srtt_us;
    const bool moved = off(r, rate(at_), kMoved) || (s.srtt_us > 0 && off(s.srtt_us, srtt_ref_, kRttMoved));
    moved_ = moved ? moved_ + 1 : 0;
    if (moved_ >= kMovedSamples) startOver();
  }
  sum_[at_] += r;
  ++count_[at_];
  return decide();
}

bool ConnectionTuner::decide() {
  const size_t was = at_;
  const bool top = at_ + 1 >= ladder_.size();
  // Enough samples at this rung to judge it against `ref`: kSamples, or one that leaves no doubt.
  auto judged = [this](double ref) {
    const double ratio = rate(at_) / ref;
    return count_[at_] >= kSamples || ratio >= kClearlyUp || ratio <= kClearlyDown;
  };
  switch (mode_) {
    case Mode::kStart:
      if (count_[at_] < kSamples) return false;
      from_ = at_;
      if (!top) {
        moveTo(at_ + 1, Mode::kUp);
      } else if (at_ > 0) {
        moveTo(at_ - 1, Mode::kDown);
      } else {
        moveTo(at_, Mode::kHold);
      }
      break;
    case Mode::kUp: {
      const double ref = rate(from_);
      if (!judged(ref)) return false;
      const double ratio = rate(at_) / ref;
      if (ratio >= kUpGain && !top) {
        from_ = at_;
        moveTo(at_ + 1, Mode::kUp);  // it paid: one more step
      } else if (ratio >= kUpGain) {
        moveTo(at_, Mode::kHold);
      } else if (ratio < kUpLoss && from_ > 0 && count_[from_ - 1] == 0) {
        const size_t back = from_;  // more carried clearly less: perhaps fewer carry more
        moveTo(back - 1, Mode::kDown);
        from_ = back;
      } else {
        moveTo(from_, Mode::kHold);
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
      } else if (at_ > 0) {
        from_ = at_;
        moveTo(at_ - 1, Mode::kDown);
      } else {
        moveTo(at_, Mode::kHold);
      }
      break;
    }
    case Mode::kHold:
      // Now and then one step up again: the path may have more room than when we last tried.
      if (++held_ >= kProbeEvery && !top) {
        from_ = at_;
        moveTo(at_ + 1, Mode::kUp);
      } else if (held_ >= kProbeEvery) {
        held_ = 0;
      }
      break;
  }
  return at_ != was;
}

}  // namespace pccl::collective
