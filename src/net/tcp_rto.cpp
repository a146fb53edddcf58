#include "net/tcp_rto.hpp"

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdlib>

#include "util/log.hpp"

namespace pccl::net {

namespace {
constexpr const char* kLog = "net";
// <linux/tcp.h> of Linux 6.15+ (Debian 12's headers are older).
constexpr int kTcpRtoMaxMs = 44;
constexpr uint32_t kDefaultMs = 1000, kMinMs = 1000, kMaxMs = 120000;
}  // namespace

uint32_t rtoMaxMs() {
  static const uint32_t value = [] {
    const char* env = std::getenv("PCCL_TCP_RTO_MAX_MS");
    if (env == nullptr || *env == '\0') return kDefaultMs;
    char* end = nullptr;
    const unsigned long v = std::strtoul(env, &end, 10);
    if (*env == '-' || *end != '\0' || (v != 0 && (v < kMinMs || v > kMaxMs))) {
      PCCL_LOG_WARN(kLog, "ignoring PCCL_TCP_RTO_MAX_MS '{}': 0 or {}..{} ms expected", env, kMinMs, kMaxMs);
      return kDefaultMs;
    }
    return static_cast<uint32_t>(v);
  }();
  return value;
}

void capRetransmitBackoff(int fd) {
  const uint32_t ms = rtoMaxMs();
  if (ms == 0) return;
  const int v = static_cast<int>(ms);
  (void)setsockopt(fd, IPPROTO_TCP, kTcpRtoMaxMs, &v, sizeof(v));
}

}  // namespace pccl::net
