#include "net/tcp_window.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cstdio>
#include <cstring>

namespace pccl::net {
namespace {

// struct tcp_info of <linux/tcp.h> is an append-only kernel ABI; glibc's copy stops early, so the
// fields are read at their offsets.
constexpr size_t kRto = 8, kSndMss = 16, kUnacked = 24, kLastDataSent = 44, kLastAckRecv = 56, kRtt = 68,
                 kSsthresh = 76, kSndCwnd = 80, kBytesAcked = 120, kNotsent = 144, kMinRtt = 148;

uint32_t field(const uint8_t* info, socklen_t len, size_t at) {
  uint32_t v = 0;
  if (at + sizeof v <= static_cast<size_t>(len)) std::memcpy(&v, info + at, sizeof v);
  return v;
}

bool sysctlSlowStartAfterIdle() {
  FILE* f = std::fopen("/proc/sys/net/ipv4/tcp_slow_start_after_idle", "re");
  if (f == nullptr) return true;  // Linux's default
  int v = 1;
  if (std::fscanf(f, "%d", &v) != 1) v = 1;
  std::fclose(f);
  return v != 0;
}

}  // namespace

bool readTcpWindow(int fd, TcpWindow* w) {
  uint8_t info[256] = {};
  socklen_t len = sizeof info;
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, info, &len) != 0 || static_cast<size_t>(len) < kSndCwnd + 4) return false;
  w->rto_us = field(info, len, kRto);
  w->mss = field(info, len, kSndMss);
  w->unacked = field(info, len, kUnacked);
  w->idle_ms = field(info, len, kLastDataSent);
  w->last_ack_ms = field(info, len, kLastAckRecv);
  w->cwnd = field(info, len, kSndCwnd);
  w->notsent_bytes = field(info, len, kNotsent);  // 0 before Linux 4.6: the room is then overstated
  const uint32_t min_rtt = field(info, len, kMinRtt);
  w->min_rtt_us = min_rtt == ~0u ? 0 : min_rtt;  // ~0: no sample yet
  w->srtt_us = field(info, len, kRtt);
  w->ssthresh = field(info, len, kSsthresh);
  w->has_bytes_acked = kBytesAcked + sizeof w->bytes_acked <= static_cast<size_t>(len);
  if (w->has_bytes_acked) std::memcpy(&w->bytes_acked, info + kBytesAcked, sizeof w->bytes_acked);
  return true;
}

int64_t sendRoom(const TcpWindow& w, bool restarts) {
  constexpr uint32_t kInitialWindow = 10;  // segments (RFC 6928; Linux's TCP_INIT_CWND)
  uint32_t cwnd = w.cwnd;
  if (restarts && w.unacked == 0 && w.rto_us > 0) {
    // tcp_cwnd_restart: halve for each retransmission timeout of idleness, down to the initial window.
    const uint32_t floor = cwnd < kInitialWindow ? cwnd : kInitialWindow;
    int64_t idle_us = static_cast<int64_t>(w.idle_ms) * 1000 - w.rto_us;
    while (idle_us > 0 && cwnd > floor) {
      cwnd >>= 1;
      idle_us -= w.rto_us;
    }
    if (cwnd < floor) cwnd = floor;
  }
  const int64_t room = (static_cast<int64_t>(cwnd) - w.unacked) * w.mss - w.notsent_bytes;
  return room > 0 ? room : 0;
}

bool restartsAfterIdle(int fd) {
  static const bool sysctl = sysctlSlowStartAfterIdle();
  if (!sysctl) return false;
  char cc[32] = {};
  socklen_t len = sizeof cc - 1;
  if (getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc, &len) != 0) return true;
  return std::strncmp(cc, "bbr", 3) != 0;
}

}  // namespace pccl::net
