// pccl-wanem's firewalls and NATs without namespaces (bench/wanem/edge.hpp): the paths-file lines, a TCP
// endpoint rewritten with both checksum forms kept valid, and what each kind lets out, translates and lets
// in: cone NATs keep one public port per local port, symmetric ones one per destination, both and the
// firewall drop what nobody inside asked for, and a simultaneous open between two cone NATs gets through.
#include <catch2/catch.hpp>

#include <cstring>
#include <sstream>
#include <vector>

#include "edge.hpp"
#include "packet.hpp"
#include "topology.hpp"

using namespace pccl::wanem;

namespace {
constexpr uint32_t kPriv = (10u << 24) | (201u << 16) | (1u << 8) | 2u;  // 10.201.1.2
constexpr uint32_t kPub = (10u << 24) | (202u << 16) | (1u << 8) | 2u;   // 10.202.1.2
constexpr uint32_t kA = (10u << 24) | (201u << 16) | (0u << 8) | 2u;
constexpr uint32_t kB = (10u << 24) | (201u << 16) | (2u << 8) | 2u;

uint32_t be32(const uint8_t* p) { return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3]; }
uint16_t be16(const uint8_t* p) { return static_cast<uint16_t>((p[0] << 8) | p[1]); }

// A complete-checksum TCP packet (makeRst's: 40 bytes of IPv4 + TCP).
std::vector<uint8_t> tcp(uint32_t src, uint32_t dst, uint16_t sport, uint16_t dport) {
  return makeRst(src, dst, sport, dport, 12345);
}

struct Seen {
  uint32_t src, dst;
  uint16_t sport, dport;
};
Seen seen(const std::vector<uint8_t>& p) {
  const uint8_t* ip = p.data() + kVnetHdrLen;
  return Seen{be32(ip + 12), be32(ip + 16), be16(ip + 20), be16(ip + 22)};
}

void checksumsValid(const std::vector<uint8_t>& p) {
  const uint8_t* ip = p.data() + kVnetHdrLen;
  CHECK(be16(ip + 10) == ipv4HeaderChecksum(ip, 20));
  CHECK(be16(ip + 36) == tcpChecksum(ip, 20, p.size() - kVnetHdrLen));
}

bool build(const std::string& text, Topology* t, std::string* error) {
  TopologyDefaults d;
  d.ranks = 4;
  std::istringstream in(text);
  return buildTopology(d, &in, "edges.paths", t, error);
}
}  // namespace

TEST_CASE("wanem edges: firewall and nat lines, and bad ones refused with file:line", "[wanem][edge]") {
  Topology t;
  std::string error;
  REQUIRE(build("rank 0 eu\nrank 1 eu\nfirewall 2\nnat eu cone\nnat 3 symmetric   # comment\n", &t, &error));
  REQUIRE(t.edge.size() == 4);
  CHECK(t.edge[0] == EdgeKind::kCone);
  CHECK(t.edge[1] == EdgeKind::kCone);
  CHECK(t.edge[2] == EdgeKind::kFirewall);
  CHECK(t.edge[3] == EdgeKind::kSymmetric);
  REQUIRE(build("path 0 1 delay=5\n", &t, &error));
  for (EdgeKind k : t.edge) CHECK(k == EdgeKind::kOpen);
  for (const char* bad : {"nat 1 full\n", "nat 1\n", "firewall\n", "nat 9 cone\n", "firewall 1 2\n", "nat 1 cone x\n"}) {
    INFO(bad);
    CHECK_FALSE(build(std::string("path 0 1 delay=5\n") + bad, &t, &error));
    CHECK(error.rfind("edges.paths:2: ", 0) == 0);
  }
}

TEST_CASE("wanem edges: a rewritten endpoint keeps complete and partial TCP checksums valid", "[wanem][edge]") {
  std::vector<uint8_t> p = tcp(kPriv, kA, 5000, 80);
  REQUIRE(rewriteTcpEndpoint(p.data(), p.size(), true, kPub, 40001));
  CHECK(seen(p).src == kPub);
  CHECK(seen(p).sport == 40001);
  checksumsValid(p);
  REQUIRE(rewriteTcpEndpoint(p.data(), p.size(), false, kB, 65535));
  CHECK(seen(p).dst == kB);
  CHECK(seen(p).dport == 65535);
  checksumsValid(p);
  // Partial (VIRTIO_NET_HDR_F_NEEDS_CSUM): the field holds the pseudo-header's sum, which the addresses
  // change and the ports do not.
  std::vector<uint8_t> q = tcp(kPriv, kA, 5000, 80);
  VnetHdr vh{};
  vh.flags = kNeedsCsum;
  vh.csum_start = 20;
  vh.csum_offset = 16;
  std::memcpy(q.data(), &vh, sizeof vh);
  uint8_t* ip = q.data() + kVnetHdrLen;
  const uint16_t pseudo = tcpPseudoChecksum(ip, 20, q.size() - kVnetHdrLen);
  ip[36] = static_cast<uint8_t>(pseudo >> 8);
  ip[37] = static_cast<uint8_t>(pseudo);
  REQUIRE(rewriteTcpEndpoint(q.data(), q.size(), true, kPub, 40001));
  CHECK(be16(ip + 36) == tcpPseudoChecksum(ip, 20, q.size() - kVnetHdrLen));
  CHECK(be16(ip + 10) == ipv4HeaderChecksum(ip, 20));
  std::vector<uint8_t> junk(10, 0);
  CHECK_FALSE(rewriteTcpEndpoint(junk.data(), junk.size(), true, kPub, 1));
}

TEST_CASE("wanem edges: a cone NAT keeps one public port per local port and lets in only who was sent to", "[wanem][edge]") {
  Edge nat(EdgeKind::kCone, kPriv, kPub, 40000);
  auto out1 = tcp(kPriv, kA, 5000, 80), out2 = tcp(kPriv, kB, 5000, 81), out3 = tcp(kPriv, kA, 5001, 80);
  REQUIRE(nat.outbound(out1.data(), out1.size()));
  REQUIRE(nat.outbound(out2.data(), out2.size()));
  REQUIRE(nat.outbound(out3.data(), out3.size()));
  CHECK(seen(out1).src == kPub);
  CHECK(seen(out1).sport == 40000);
  CHECK(seen(out2).sport == 40000);  // the same mapping, whatever the destination
  CHECK(seen(out3).sport == 40001);
  checksumsValid(out1);
  auto back = tcp(kB, kPub, 81, 40000);
  REQUIRE(nat.inbound(back.data(), back.size()));
  CHECK(seen(back).dst == kPriv);
  CHECK(seen(back).dport == 5000);
  checksumsValid(back);
  auto stranger = tcp(kB, kPub, 82, 40000);        // another port of a known host
  auto unmapped = tcp(kA, kPub, 80, 40002);        // a public port nobody holds
  auto direct = tcp(kA, kPriv, 80, 5000);          // the private address, from outside
  CHECK_FALSE(nat.inbound(stranger.data(), stranger.size()));
  CHECK_FALSE(nat.inbound(unmapped.data(), unmapped.size()));
  CHECK_FALSE(nat.inbound(direct.data(), direct.size()));
  std::vector<uint8_t> udp = tcp(kPriv, kA, 5000, 80);
  udp[kVnetHdrLen + 9] = 17;
  CHECK_FALSE(nat.outbound(udp.data(), udp.size()));
  const EdgeCounts c = nat.counts();
  CHECK(c.out_translated == 3);
  CHECK(c.in_translated == 1);
  CHECK(c.in_refused == 4);
  CHECK(c.mappings == 2);
}

TEST_CASE("wanem edges: a symmetric NAT maps every destination apart", "[wanem][edge]") {
  Edge nat(EdgeKind::kSymmetric, kPriv, kPub, 40000);
  auto to_a = tcp(kPriv, kA, 5000, 80), to_b = tcp(kPriv, kB, 5000, 81);
  REQUIRE(nat.outbound(to_a.data(), to_a.size()));
  REQUIRE(nat.outbound(to_b.data(), to_b.size()));
  CHECK(seen(to_a).sport == 40000);
  CHECK(seen(to_b).sport == 40001);
  auto wrong = tcp(kB, kPub, 81, 40000);  // B answering on A's mapping
  CHECK_FALSE(nat.inbound(wrong.data(), wrong.size()));
  auto right = tcp(kB, kPub, 81, 40001);
  REQUIRE(nat.inbound(right.data(), right.size()));
  CHECK(seen(right).dport == 5000);
  CHECK(seen(right).dst == kPriv);
}

TEST_CASE("wanem edges: a firewall lets everything out and only answers in, untranslated", "[wanem][edge]") {
  Edge fw(EdgeKind::kFirewall, kPriv, kPub);
  auto syn_in = tcp(kA, kPriv, 80, 6000);
  CHECK_FALSE(fw.inbound(syn_in.data(), syn_in.size()));
  auto out = tcp(kPriv, kA, 6000, 80);
  REQUIRE(fw.outbound(out.data(), out.size()));
  CHECK(seen(out).src == kPriv);
  CHECK(seen(out).sport == 6000);
  auto answer = tcp(kA, kPriv, 80, 6000);
  CHECK(fw.inbound(answer.data(), answer.size()));
  CHECK(seen(answer).dst == kPriv);
  CHECK(fw.publicAddr() == kPriv);
  Edge open(EdgeKind::kOpen, kPriv, kPub);
  CHECK(open.inbound(syn_in.data(), syn_in.size()));
}

TEST_CASE("wanem edges: a simultaneous open between two cone NATs gets through both", "[wanem][edge]") {
  const uint32_t priv2 = kB, pub2 = natPublicAddr(kB);
  Edge left(EdgeKind::kCone, kPriv, kPub, 40000), right(EdgeKind::kCone, priv2, pub2, 50000);
  // Each side learned the other's public endpoint (from the master, which sees both): both dial at once.
  auto syn_l = tcp(kPriv, pub2, 7000, 50000), syn_r = tcp(priv2, kPub, 7001, 40000);
  // Both NATs map the local ports first, as a connection to the master would have.
  auto m_l = tcp(kPriv, kA, 7000, 1), m_r = tcp(priv2, kA, 7001, 1);
  REQUIRE(left.outbound(m_l.data(), m_l.size()));
  REQUIRE(right.outbound(m_r.data(), m_r.size()));
  REQUIRE(left.outbound(syn_l.data(), syn_l.size()));
  REQUIRE(right.outbound(syn_r.data(), syn_r.size()));
  CHECK(right.inbound(syn_l.data(), syn_l.size()));
  CHECK(left.inbound(syn_r.data(), syn_r.size()));
  CHECK(seen(syn_l).dst == priv2);
  CHECK(seen(syn_l).dport == 7001);
  CHECK(seen(syn_r).dport == 7000);
  CHECK(natPublicAddr(kPriv) == kPub);
}
