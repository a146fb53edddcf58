// Library settings read from the environment once (docs/environment.md).
#ifndef PCCL_UTIL_ENV_HPP_
#define PCCL_UTIL_ENV_HPP_

#include <cstdint>

namespace pccl {

// The milliseconds in environment variable `name`: `fallback` when unset or empty; 0, or a value in
// min..max, when set to one; otherwise `fallback`, with a warning naming the variable and what it takes.
uint32_t envMillis(const char* name, uint32_t fallback, uint32_t min, uint32_t max);

}  // namespace pccl

#endif  // PCCL_UTIL_ENV_HPP_
