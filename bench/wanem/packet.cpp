#include "packet.hpp"

#include <algorithm>
#include <cstring>

namespace pccl::wanem {

namespace {
constexpr uint8_t kProtoTcp = 6;
constexpr uint8_t kTcpFin = 0x01, kTcpPsh = 0x08, kTcpCwr = 0x80;

uint32_t be32(const uint8_t* p) {
  return (static_cast<uint32_t>(p[0]) << 24) | (static_cast<uint32_t>(p[1]) << 16) | (static_cast<uint32_t>(p[2]) << 8) | p[3];
}
uint16_t be16(const uint8_t* p) { return static_cast<uint16_t>((p[0] << 8) | p[1]); }
void put16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}
void put32(uint8_t* p, uint32_t v) {
  put16(p, static_cast<uint16_t>(v >> 16));
  put16(p + 2, static_cast<uint16_t>(v));
}

// One's complement sum of big-endian 16-bit words (an odd last byte is padded with zero).
uint32_t sum16(const uint8_t* p, size_t n, uint32_t acc) {
  for (; n >= 2; p += 2, n -= 2) acc += be16(p);
  if (n == 1) acc += static_cast<uint32_t>(p[0]) << 8;
  return acc;
}
uint16_t fold(uint32_t acc) {
  while ((acc >> 16) != 0) acc = (acc & 0xffff) + (acc >> 16);
  return static_cast<uint16_t>(~acc);
}
}  // namespace

uint32_t PacketInfo::segmentWireBytes(uint32_t i) const {
  if (!tcp_gso) return wire_bytes;
  const uint32_t off = i * mss;
  return header_bytes + (off >= payload_bytes ? 0 : std::min(mss, payload_bytes - off));
}

uint16_t ipv4HeaderChecksum(const uint8_t* ip, size_t ihl) {
  uint8_t h[60];
  std::memcpy(h, ip, ihl);
  h[10] = h[11] = 0;
  return fold(sum16(h, ihl, 0));
}

uint16_t tcpChecksum(const uint8_t* ip, size_t ihl, size_t ip_len) {
  const size_t tcp_len = ip_len - ihl;
  uint32_t acc = sum16(ip + 12, 8, 0);  // source and destination addresses
  acc += kProtoTcp;
  acc += static_cast<uint32_t>(tcp_len);
  const uint8_t* tcp = ip + ihl;
  acc = sum16(tcp, 16, acc);  // up to the checksum field
  acc = sum16(tcp + 18, tcp_len - 18, acc);
  return fold(acc);
}

uint16_t tcpPseudoChecksum(const uint8_t* ip, size_t ihl, size_t ip_len) {
  uint32_t acc = sum16(ip + 12, 8, 0);
  acc += kProtoTcp;
  acc += static_cast<uint32_t>(ip_len - ihl);
  return static_cast<uint16_t>(~fold(acc));
}

bool rewriteTcpEndpoint(uint8_t* p, size_t n, bool source, uint32_t addr, uint16_t port) {
  TcpFields t;
  if (!parseTcp(p, n, &t)) return false;
  VnetHdr vh;
  std::memcpy(&vh, p, sizeof vh);
  uint8_t* ip = p + kVnetHdrLen;
  const size_t ihl = static_cast<size_t>(ip[0] & 0x0f) * 4;
  uint8_t* tcp = ip + ihl;
  uint8_t* a = ip + (source ? 12 : 16);
  uint8_t* pt = tcp + (source ? 0 : 2);
  const uint32_t old_addr = be32(a);
  const uint16_t old_port = be16(pt);
  // The one's complement sum of the checksummed words changes by (new - old); a partial checksum holds
  // that sum itself over the pseudo-header (the ports are summed by the kernel), a complete one its
  // complement over everything.
  const bool partial = (vh.flags & kNeedsCsum) != 0;
  uint32_t acc = partial ? be16(tcp + 16) : static_cast<uint16_t>(~be16(tcp + 16));
  acc += (~old_addr >> 16 & 0xffff) + (~old_addr & 0xffff) + (addr >> 16) + (addr & 0xffff);
  if (!partial) acc += static_cast<uint16_t>(~old_port) + port;
  while ((acc >> 16) != 0) acc = (acc & 0xffff) + (acc >> 16);
  put16(tcp + 16, partial ? static_cast<uint16_t>(acc) : static_cast<uint16_t>(~acc));
  put32(a, addr);
  put16(pt, port);
  put16(ip + 10, ipv4HeaderChecksum(ip, ihl));
  return true;
}

PacketInfo parsePacket(const uint8_t* p, size_t n) {
  PacketInfo info;
  if (n < kVnetHdrLen + 20) return info;
  VnetHdr vh;
  std::memcpy(&vh, p, sizeof vh);
  const uint8_t* ip = p + kVnetHdrLen;
  const size_t ip_len = n - kVnetHdrLen;
  const size_t ihl = static_cast<size_t>(ip[0] & 0x0f) * 4;
  if ((ip[0] >> 4) != 4 || ihl < 20 || ihl > ip_len) return info;
  info.ipv4 = true;
  info.src = be32(ip + 12);
  info.dst = be32(ip + 16);
  info.wire_bytes = static_cast<uint32_t>(ip_len);
  info.header_bytes = static_cast<uint32_t>(ip_len);
  if (ip[9] != kProtoTcp || ip_len < ihl + 20) return info;
  const size_t thl = static_cast<size_t>(ip[ihl + 12] >> 4) * 4;
  if (thl < 20 || ihl + thl > ip_len) return info;
  info.header_bytes = static_cast<uint32_t>(ihl + thl);
  info.payload_bytes = static_cast<uint32_t>(ip_len - ihl - thl);
  const uint8_t gso = vh.gso_type & static_cast<uint8_t>(~kGsoEcn);
  if (gso == kGsoTcpV4 && vh.gso_size > 0 && info.payload_bytes > vh.gso_size) {
    info.tcp_gso = true;
    info.mss = vh.gso_size;
    info.segments = (info.payload_bytes + vh.gso_size - 1) / vh.gso_size;
    info.wire_bytes = info.payload_bytes + info.segments * info.header_bytes;
  }
  return info;
}

bool parseTcp(const uint8_t* p, size_t n, TcpFields* out) {
  if (n < kVnetHdrLen + 40) return false;
  const uint8_t* ip = p + kVnetHdrLen;
  const size_t ihl = static_cast<size_t>(ip[0] & 0x0f) * 4;
  if ((ip[0] >> 4) != 4 || ip[9] != kProtoTcp || ihl < 20 || n < kVnetHdrLen + ihl + 20) return false;
  const uint8_t* tcp = ip + ihl;
  out->sport = be16(tcp);
  out->dport = be16(tcp + 2);
  out->seq = be32(tcp + 4);
  out->ack = be32(tcp + 8);
  out->flags = tcp[13];
  return true;
}

std::vector<uint8_t> makeRst(uint32_t src, uint32_t dst, uint16_t sport, uint16_t dport, uint32_t seq) {
  std::vector<uint8_t> pkt(kVnetHdrLen + 40, 0);  // a zero virtio_net_hdr: no GSO, checksums complete
  uint8_t* ip = pkt.data() + kVnetHdrLen;
  ip[0] = 0x45;
  put16(ip + 2, 40);
  ip[6] = 0x40;  // don't fragment
  ip[8] = 64;    // TTL
  ip[9] = kProtoTcp;
  put32(ip + 12, src);
  put32(ip + 16, dst);
  put16(ip + 10, ipv4HeaderChecksum(ip, 20));
  uint8_t* tcp = ip + 20;
  put16(tcp, sport);
  put16(tcp + 2, dport);
  put32(tcp + 4, seq);
  tcp[12] = 5 << 4;
  tcp[13] = kTcpFlagRst;
  put16(tcp + 16, tcpChecksum(ip, 20, 40));
  return pkt;
}

bool splitSegments(const uint8_t* p, size_t n, const std::vector<bool>& keep, std::vector<std::vector<uint8_t>>* out) {
  const PacketInfo info = parsePacket(p, n);
  if (!info.tcp_gso || keep.size() != info.segments) return false;
  VnetHdr vh;
  std::memcpy(&vh, p, sizeof vh);
  const uint8_t* ip = p + kVnetHdrLen;
  const size_t ihl = static_cast<size_t>(ip[0] & 0x0f) * 4;
  const size_t hdrs = info.header_bytes;
  const uint32_t seq0 = be32(ip + ihl + 4);
  const uint16_t id0 = be16(ip + 4);
  const uint8_t flags = ip[ihl + 13];
  out->clear();
  for (uint32_t first = 0; first < info.segments;) {
    if (!keep[first]) {
      ++first;
      continue;
    }
    uint32_t end = first;
    while (end < info.segments && keep[end]) ++end;
    const size_t off = static_cast<size_t>(first) * info.mss;
    const size_t len = std::min<size_t>(static_cast<size_t>(end - first) * info.mss, info.payload_bytes - off);
    std::vector<uint8_t> run(kVnetHdrLen + hdrs + len);
    VnetHdr h{};
    h.flags = kNeedsCsum;  // the kernel completes the TCP checksum, as for the original
    h.gso_type = end - first > 1 ? vh.gso_type : kGsoNone;
    h.gso_size = end - first > 1 ? vh.gso_size : 0;
    h.hdr_len = static_cast<uint16_t>(hdrs);
    h.csum_start = static_cast<uint16_t>(ihl);
    h.csum_offset = 16;
    std::memcpy(run.data(), &h, sizeof h);
    uint8_t* rip = run.data() + kVnetHdrLen;
    std::memcpy(rip, ip, hdrs);
    std::memcpy(rip + hdrs, ip + hdrs + off, len);
    put16(rip + 2, static_cast<uint16_t>(hdrs + len));
    put16(rip + 4, static_cast<uint16_t>(id0 + first));
    put16(rip + 10, 0);
    put16(rip + 10, ipv4HeaderChecksum(rip, ihl));
    uint8_t* tcp = rip + ihl;
    put32(tcp + 4, seq0 + static_cast<uint32_t>(off));
    uint8_t f = flags;
    if (end != info.segments) f = static_cast<uint8_t>(f & ~(kTcpFin | kTcpPsh));
    if (first != 0) f = static_cast<uint8_t>(f & ~kTcpCwr);
    tcp[13] = f;
    put16(tcp + 16, tcpPseudoChecksum(rip, ihl, hdrs + len));
    out->push_back(std::move(run));
    first = end;
  }
  return true;
}

}  // namespace pccl::wanem
