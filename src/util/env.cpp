#include "util/env.hpp"

#include <cstdlib>

#include "util/log.hpp"

namespace pccl {

uint32_t envMillis(const char* name, uint32_t fallback, uint32_t min, uint32_t max) {
  const char* env = std::getenv(name);
  if (env == nullptr || *env == '\0') return fallback;
  char* end = nullptr;
  const unsigned long v = std::strtoul(env, &end, 10);
  if (*env == '-' || *end != '\0' || (v != 0 && (v < min || v > max))) {
    PCCL_LOG_WARN("env", "ignoring {} '{}': 0 or {}..{} ms expected", name, env, min, max);
    return fallback;
  }
  return static_cast<uint32_t>(v);
}

}  // namespace pccl
