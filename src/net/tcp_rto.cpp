#include "net/tcp_rto.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "util/env.hpp"

namespace pccl::net {

namespace {
// <linux/tcp.h> of Linux 6.15+ (Debian 12's headers are older).
constexpr int kTcpRtoMaxMs = 44;
constexpr uint32_t kDefaultMs = 1000, kMinMs = 1000, kMaxMs = 120000;
}  // namespace

uint32_t rtoMaxMs() {
  static const uint32_t value = envMillis("PCCL_TCP_RTO_MAX_MS", kDefaultMs, kMinMs, kMaxMs);
  return value;
}

void capRetransmitBackoff(int fd) {
  const uint32_t ms = rtoMaxMs();
  if (ms == 0) return;
  const int v = static_cast<int>(ms);
  (void)setsockopt(fd, IPPROTO_TCP, kTcpRtoMaxMs, &v, sizeof(v));
}

void probeWhenIdle(int fd) {
  const int on = 1, idle = kIdleProbeSeconds, count = kIdleProbes;
  (void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &idle, sizeof(idle));
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
}

}  // namespace pccl::net
