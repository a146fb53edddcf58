#include "collective/connection_tuner.hpp"

#include <algorithm>
#include <cmath>

namespace pccl::collective {
namespace {

// A sample far below what any rung carried (an outage, not a count): dropped, unless it lasts.
constexpr double kOutage = 0.3;
constexpr uint32_t kOutageSamples = 3;
// A single sample decides a probe when it is this clear; otherwise a second one is taken.
constexpr double kClearlyUp = 1.25, kClearlyDown = 0.8;
// The round trip must move this much (either way) to start over: queueing alone moves it less.
constexpr double kRttMoved = 0.5;

// 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, ...: each rung about 1.5 times the one below; the pool last.
std::vector<uint32_t> ladderFor(uint32_t pool) {
  std::vector<uint32_t> ladder;
  for (uint64_t p = 1; p <= pool; p *= 2) {
    ladder.push_back(static_cast<uint32_t>(p));
    if (p >= 2 && p + p / 2 <= pool) ladder.push_back(static_cast<uint32_t>(p + p / 2));
  }
  if (ladder.back() != pool) ladder.push_back(pool);
  return ladder;
}

bool off(double now, double ref, double by) { return ref > 0 && std::fabs(now / ref - 1.0) > by; }

}  // namespace

ConnectionTuner::ConnectionTuner(uint32_t pool, uint32_t start) {
  ladder_ = ladderFor(std::max(pool, 1u));
  rate_.assign(ladder_.size(), 0.0);
  count_.assign(ladder_.size(), 0);
  while (at_ + 1 < ladder_.size() && ladder_[at_ + 1] <= start) ++at_;
}

uint64_t ConnectionTuner::intervalUs(uint32_t srtt_us) {
  if (srtt_us == 0) return 200000;
  return std::clamp<uint64_t>(uint64_t{srtt_us} * 6, 150000, 2000000);
}

void ConnectionTuner::setPool(uint32_t pool) {
  const uint32_t was = active();
  ladder_ = ladderFor(std::max(pool, 1u));
  at_ = 0;
  while (at_ + 1 < ladder_.size() && ladder_[at_ + 1] <= was) ++at_;
  rate_.assign(ladder_.size(), 0.0);
  count_.assign(ladder_.size(), 0);
  startOver();
  skip_ = 1;
}

void ConnectionTuner::startOver() {
  std::fill(rate_.begin(), rate_.end(), 0.0);
  std::fill(count_.begin(), count_.end(), 0u);
  mode_ = Mode::kStart;
  climbed_ = false;
  held_ = 0;
  moved_ = 0;
  srtt_ref_ = 0;
  outage_ = 0;
}

void ConnectionTuner::moveTo(size_t at, Mode mode) {
  if (at != at_) ++changes_;
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
  if (skip_ > 0) {
    --skip_;
    return false;
  }
  const double r = static_cast<double>(s.bytes) / s.seconds;
  const double best = *std::max_element(rate_.begin(), rate_.end());
  if (best > 0 && r < kOutage * best) {
    if (++outage_ < kOutageSamples) return false;
    startOver();
  } else {
    outage_ = 0;
  }
  if (mode_ == Mode::kHold) {
    if (srtt_ref_ == 0) srtt_ref_ = s.srtt_us;
    const bool moved = off(r, rate_[at_], kMoved) || (s.srtt_us > 0 && off(s.srtt_us, srtt_ref_, kRttMoved));
    moved_ = moved ? moved_ + 1 : 0;
    if (moved_ >= 2) startOver();
  }
  rate_[at_] = count_[at_] == 0 ? r : 0.5 * (rate_[at_] + r);
  ++count_[at_];
  return decide();
}

bool ConnectionTuner::decide() {
  const size_t was = at_;
  const bool top = at_ + 1 >= ladder_.size();
  switch (mode_) {
    case Mode::kStart:
      if (count_[at_] < 2) return false;
      if (top) {
        moveTo(at_, Mode::kHold);
        return false;
      }
      climbed_ = false;
      from_ = at_;
      moveTo(at_ + 1, Mode::kUp);
      break;
    case Mode::kUp: {
      const double ratio = rate_[at_] / rate_[from_];
      if (count_[at_] < 2 && ratio < kClearlyUp && ratio > kClearlyDown) return false;
      if (ratio >= kUpGain) {
        climbed_ = true;
        from_ = at_;
        if (top) {
          moveTo(at_, Mode::kHold);
        } else {
          moveTo(at_ + 1, Mode::kUp);
        }
      } else if (!climbed_ && from_ > 0 && count_[from_ - 1] == 0) {
        // The first step up did not pay: perhaps fewer carry as much.
        const size_t back = from_;
        from_ = back;
        moveTo(back - 1, Mode::kDown);
      } else {
        moveTo(from_, Mode::kHold);
      }
      break;
    }
    case Mode::kDown: {
      // Against the best rung above, so that small losses do not add up step after step.
      double above = 0;
      for (size_t j = at_ + 1; j < ladder_.size(); ++j) above = std::max(above, rate_[j]);
      const double ratio = rate_[at_] / above;
      if (count_[at_] < 2 && ratio < kClearlyUp && ratio > kClearlyDown) return false;
      if (ratio >= kDownKeep && at_ > 0) {
        from_ = at_;
        moveTo(at_ - 1, Mode::kDown);
      } else if (ratio >= kDownKeep) {
        moveTo(at_, Mode::kHold);
      } else {
        moveTo(from_, Mode::kHold);
      }
      break;
    }
    case Mode::kHold:
      if (++held_ >= kProbeEvery && !top) {
        climbed_ = true;  // a probe that does not pay goes back, not down
        from_ = at_;
        moveTo(at_ + 1, Mode::kUp);
      }
      break;
  }
  return at_ != was;
}

}  // namespace pccl::collective
