// Monotonic time and deadlines. Every blocking wait in pccl takes a Deadline.
#ifndef PCCL_UTIL_CLOCK_HPP_
#define PCCL_UTIL_CLOCK_HPP_

#include <chrono>
#include <cstdint>

namespace pccl {

using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;
using Millis = std::chrono::milliseconds;

inline TimePoint deadlineAfterMs(uint64_t ms) { return Clock::now() + Millis(ms); }

inline int64_t msSince(TimePoint t) {
  return std::chrono::duration_cast<Millis>(Clock::now() - t).count();
}

// The pause before attempt `attempt` (0, 1, ...) of a retry that doubles from `first`, at most `cap`.
inline Millis doublingBackoff(Millis first, uint32_t attempt, Millis cap) {
  const uint32_t shift = attempt < 20 ? attempt : 20;
  const int64_t ms = first.count() << shift;
  return ms < cap.count() ? Millis(ms) : cap;
}

}  // namespace pccl

#endif  // PCCL_UTIL_CLOCK_HPP_
