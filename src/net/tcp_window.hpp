// What a TCP connection can send at once: its congestion window's free room, read from the kernel
// (TCP_INFO), as the kernel will see it at the next write. Linux restarts the window of a connection
// that has sent nothing for a retransmission timeout (net.ipv4.tcp_slow_start_after_idle, on by
// default; not for congestion controls that run their own, such as BBR): the window halves for each
// timeout of idleness, down to the initial window (10 segments). A burst after a pause fits in the
// initial windows of many connections in one round trip, where on one connection it takes several.
#ifndef PCCL_NET_TCP_WINDOW_HPP_
#define PCCL_NET_TCP_WINDOW_HPP_

#include <cstdint>

namespace pccl::net {

// The fields of struct tcp_info that sendRoom reads.
struct TcpWindow {
  uint32_t rto_us = 0;          // the retransmission timeout
  uint32_t mss = 0;             // bytes per segment
  uint32_t unacked = 0;         // segments in flight
  uint32_t idle_ms = 0;         // since the last data sent
  uint32_t last_ack_ms = 0;     // since the last acknowledgement received
  uint32_t cwnd = 0;            // segments
  uint32_t notsent_bytes = 0;   // written, not yet sent
  uint32_t min_rtt_us = 0;      // the smallest round trip seen (Linux 4.10+); 0 when unknown
  uint32_t srtt_us = 0;         // the smoothed round trip; 0 when unknown
  uint32_t ssthresh = 0;        // slow start threshold, segments; kNoSsthresh until the first loss
  uint64_t bytes_acked = 0;     // bytes the remote acknowledged over the connection's life (Linux 4.1+)
  bool has_bytes_acked = false; // the kernel says bytes_acked
};

// TcpWindow::ssthresh of a connection that has not lost a packet yet (Linux's TCP_INFINITE_SSTHRESH).
inline constexpr uint32_t kNoSsthresh = 0x7fffffff;

// kUnknownRoom when the kernel does not say (not a TCP socket, an old kernel).
inline constexpr int64_t kUnknownRoom = INT64_MAX;

// Reads the window of socket `fd`; false when the kernel does not say.
bool readTcpWindow(int fd, TcpWindow* w);

// Bytes a write now would send at once: (cwnd - unacked) * mss - notsent, with cwnd as the kernel
// restarts it when `restarts` (slow start after idle applies to the connection) and nothing is in flight
// after idle_ms of idleness. Never negative.
int64_t sendRoom(const TcpWindow& w, bool restarts);

// Whether the kernel restarts the window of `fd`'s connection after idleness: the sysctl of our network
// namespace (read once) and a congestion control that does not run its own (not "bbr").
bool restartsAfterIdle(int fd);

}  // namespace pccl::net

#endif  // PCCL_NET_TCP_WINDOW_HPP_
