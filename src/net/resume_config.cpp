#include "net/resume_config.hpp"

#include <cstdlib>
#include <cstring>

#include "util/env.hpp"
#include "util/log.hpp"

namespace pccl::net {

namespace {
constexpr const char* kLog = "net";
constexpr uint32_t kDefaultStallMs = 10000, kMinStallMs = 1000, kMaxStallMs = 600000;
}  // namespace

bool ringResumeEnabled() {
  static const bool value = [] {
    const char* env = std::getenv("PCCL_RING_RESUME");
    if (env == nullptr || *env == '\0' || std::strcmp(env, "1") == 0) return true;
    if (std::strcmp(env, "0") == 0) return false;
    PCCL_LOG_WARN(kLog, "ignoring PCCL_RING_RESUME '{}': 0 or 1 expected", env);
    return true;
  }();
  return value;
}

uint32_t ringStallMs() {
  static const uint32_t value = envMillis("PCCL_RING_STALL_MS", kDefaultStallMs, kMinStallMs, kMaxStallMs);
  return value;
}

}  // namespace pccl::net
