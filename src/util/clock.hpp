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

}  // namespace pccl

#endif  // PCCL_UTIL_CLOCK_HPP_
