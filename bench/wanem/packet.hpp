// What the router needs to know about one packet read from the TUN device (a virtio_net_hdr, then an
// IPv4 packet, possibly a GSO super-packet standing for many TCP segments), and how to cut a TCP
// super-packet into the MTU-sized segments it stands for: the loss and the bottleneck queues act per
// segment, as on a real path, so a loss or a full queue must be able to take one segment and not the
// other 43. Pure functions: no I/O, no threads.
#ifndef PCCL_WANEM_PACKET_HPP_
#define PCCL_WANEM_PACKET_HPP_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace pccl::wanem {

// struct virtio_net_hdr from <linux/virtio_net.h> (that header does not compile as C++): what the TUN
// device puts before every packet with IFF_VNET_HDR. Host byte order.
struct VnetHdr {
  uint8_t flags;
  uint8_t gso_type;
  uint16_t hdr_len;
  uint16_t gso_size;  // payload bytes per segment
  uint16_t csum_start;
  uint16_t csum_offset;
};
constexpr size_t kVnetHdrLen = sizeof(VnetHdr);
constexpr uint8_t kGsoNone = 0, kGsoTcpV4 = 1, kGsoEcn = 0x80;
constexpr uint8_t kNeedsCsum = 1;

struct PacketInfo {
  bool ipv4 = false;
  uint32_t src = 0, dst = 0;     // host byte order
  bool tcp_gso = false;          // a TCPv4 GSO super-packet that split() can cut
  uint32_t segments = 1;         // MTU-sized segments this packet stands for
  uint32_t header_bytes = 0;     // IP + TCP headers, repeated in every segment on the wire
  uint32_t payload_bytes = 0;    // TCP payload of the whole packet (0 for non-TCP)
  uint32_t mss = 0;              // payload bytes per segment (tcp_gso only)
  uint32_t wire_bytes = 0;       // IP bytes on the wire: every segment with its headers
  uint32_t segmentWireBytes(uint32_t i) const;  // IP bytes of segment i (the last may be short)
};

// Parses `n` bytes (virtio_net_hdr + IP packet). A packet too short for its own headers gives
// ipv4 == false (the router passes such packets on untouched).
PacketInfo parsePacket(const uint8_t* p, size_t n);

// Cuts a TCPv4 super-packet into the runs of consecutive segments whose keep[i] is true: one packet per
// run, itself a GSO super-packet when the run holds more than one segment (virtio_net_hdr with the
// original gso_size and a partial checksum for the kernel to complete, as the sender's stack handed it
// over), with its IPv4 length, id and header checksum, TCP sequence number, FIN/PSH only on the run that
// ends the packet and CWR only on the run that starts it. A loss or a tail drop thus costs the emulator
// a packet or two more, not one packet per segment. `out[k]` receives the k-th run. Returns false when
// the packet is not one that parsePacket() marked tcp_gso.
bool splitSegments(const uint8_t* p, size_t n, const std::vector<bool>& keep, std::vector<std::vector<uint8_t>>* out);

// The TCP header's fields the fault emulation needs (faults.hpp: resets), from a packet as parsePacket
// takes it; false when it is not TCP over IPv4.
struct TcpFields {
  uint16_t sport = 0, dport = 0;
  uint32_t seq = 0, ack = 0;
  uint8_t flags = 0;
};
constexpr uint8_t kTcpFlagSyn = 0x02, kTcpFlagRst = 0x04, kTcpFlagAck = 0x10;
bool parseTcp(const uint8_t* p, size_t n, TcpFields* out);

// A bare TCP RST (virtio_net_hdr without offloads, IPv4, TCP, both checksums complete) from src:sport to
// dst:dport with sequence number `seq` (addresses and ports in host byte order).
std::vector<uint8_t> makeRst(uint32_t src, uint32_t dst, uint16_t sport, uint16_t dport, uint32_t seq);

// Rewrites one endpoint of a TCP/IPv4 packet as parsePacket takes it (the source when `source`, else the
// destination) to addr:port (host byte order), keeping it valid: the IPv4 header checksum is recomputed,
// and the TCP checksum adjusted for the change (RFC 1624), whether it is complete or the partial
// pseudo-header sum of a packet with VIRTIO_NET_HDR_F_NEEDS_CSUM (which the kernel completes over the
// TCP header, ports included). False, nothing changed, when the packet is not TCP over IPv4.
bool rewriteTcpEndpoint(uint8_t* p, size_t n, bool source, uint32_t addr, uint16_t port);

// The Internet checksum (RFC 1071) of an IPv4 header, and the TCP checksum over the pseudo-header and
// the TCP segment; both return the value to store (already complemented), in network byte order bytes.
uint16_t ipv4HeaderChecksum(const uint8_t* ip, size_t ihl);
uint16_t tcpChecksum(const uint8_t* ip, size_t ihl, size_t ip_len);
// The partial checksum a packet with VIRTIO_NET_HDR_F_NEEDS_CSUM carries in its TCP checksum field: the
// folded, not complemented, sum of the pseudo-header for a TCP length of ip_len - ihl.
uint16_t tcpPseudoChecksum(const uint8_t* ip, size_t ihl, size_t ip_len);

}  // namespace pccl::wanem

#endif  // PCCL_WANEM_PACKET_HPP_
