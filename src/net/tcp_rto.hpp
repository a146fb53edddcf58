// The cap on TCP's retransmission backoff (Linux 6.15+: TCP_RTO_MAX_MS). After a path goes dark, TCP
// retransmits at RTO, 2 RTO, 4 RTO...: a connection whose path came back after a 6 s blackout waited
// until its next retransmission, 6 s later, to notice. With the cap, it retransmits at least once a
// second, so a blackout costs at most about a second more than itself (docs/algorithms.md §6, "Network
// faults"). PCCL_TCP_RTO_MAX_MS: the cap in ms (1000..120000; default 1000; 0 = the kernel's, 120 s).
// Older kernels refuse the option: nothing changes there.
#ifndef PCCL_NET_TCP_RTO_HPP_
#define PCCL_NET_TCP_RTO_HPP_

#include <cstdint>

namespace pccl::net {

// The cap in ms from PCCL_TCP_RTO_MAX_MS (read once; a bad value is logged and the default kept); 0: none.
uint32_t rtoMaxMs();

// Sets the cap on a connected TCP socket (best effort: an old kernel keeps its own).
void capRetransmitBackoff(int fd);

// Keepalive probes on an idle connection: one after a second without traffic, then each second, up to
// kIdleProbes unanswered (then TCP fails the connection, as its retransmissions would). A middlebox that
// reset a connection resets only the end that sends: an idle end learns it when its probe meets the
// other end's closed socket (an RST), within about a second, instead of never (a resumable ring
// connection's dialler must dial again: docs/algorithms.md §6, "Network faults").
inline constexpr int kIdleProbeSeconds = 1, kIdleProbes = 10;
void probeWhenIdle(int fd);

// How long after a dark path came back TCP may still take to deliver again: the cap (0 when
// PCCL_TCP_RTO_MAX_MS=0). The membership's silence timeouts add it to peer_timeout_ms, so that a path
// dark for less than peer_timeout_ms removes no one (docs/algorithms.md §6, "Network faults").
inline uint32_t tcpRecoveryMs() { return rtoMaxMs(); }

}  // namespace pccl::net

#endif  // PCCL_NET_TCP_RTO_HPP_
