// pccl-wanem's model without namespaces: cutting GSO super-packets, the bottleneck link's queue and
// rate, the paths file, and the per-phase verdict (bench/wanem/{packet,link,topology,timeline}).
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "link.hpp"
#include "packet.hpp"
#include "timeline.hpp"
#include "topology.hpp"

using namespace pccl::wanem;

namespace {
constexpr size_t kIhl = 20, kThl = 32;

// A TCPv4 GSO super-packet as the TUN hands it over: `payload` bytes in segments of `mss`.
std::vector<uint8_t> gsoPacket(size_t payload, uint16_t mss, uint8_t tcp_flags) {
  std::vector<uint8_t> p(kVnetHdrLen + kIhl + kThl + payload);
  VnetHdr vh{};
  vh.flags = kNeedsCsum;
  vh.gso_type = kGsoTcpV4;
  vh.gso_size = mss;
  vh.hdr_len = kIhl + kThl;
  vh.csum_start = kIhl;
  vh.csum_offset = 16;
  std::memcpy(p.data(), &vh, sizeof vh);
  uint8_t* ip = p.data() + kVnetHdrLen;
  ip[0] = 0x45;
  ip[4] = 0x12, ip[5] = 0x34;  // id
  ip[6] = 0x40;                // DF
  ip[8] = 64;
  ip[9] = 6;
  const uint8_t src[4] = {10, 201, 1, 2}, dst[4] = {10, 201, 0, 2};
  std::memcpy(ip + 12, src, 4);
  std::memcpy(ip + 16, dst, 4);
  uint8_t* tcp = ip + kIhl;
  tcp[4] = 0x01, tcp[5] = 0x02, tcp[6] = 0x03, tcp[7] = 0x04;  // seq 0x01020304
  tcp[12] = static_cast<uint8_t>((kThl / 4) << 4);
  tcp[13] = tcp_flags;
  for (size_t i = 0; i < payload; ++i) ip[kIhl + kThl + i] = static_cast<uint8_t>(i * 7 + 3);
  return p;
}

uint32_t be32(const uint8_t* p) { return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3]; }
uint16_t be16(const uint8_t* p) { return static_cast<uint16_t>((p[0] << 8) | p[1]); }

// The checksum the kernel computes from a partial one: the complement of the folded sum of the TCP
// segment with the partial (pseudo-header) value in its checksum field.
uint16_t completeTcpChecksum(const uint8_t* ip, size_t ip_len) {
  uint32_t acc = 0;
  for (size_t i = kIhl; i + 1 < ip_len; i += 2) acc += be16(ip + i);
  if ((ip_len - kIhl) % 2 != 0) acc += uint32_t{ip[ip_len - 1]} << 8;
  while ((acc >> 16) != 0) acc = (acc & 0xffff) + (acc >> 16);
  return static_cast<uint16_t>(~acc);
}

bool headerChecksumValid(const uint8_t* ip) {
  uint32_t acc = 0;
  for (size_t i = 0; i < kIhl; i += 2) acc += be16(ip + i);
  while ((acc >> 16) != 0) acc = (acc & 0xffff) + (acc >> 16);
  return acc == 0xffff;
}

PacketInfo single(uint32_t bytes) {
  PacketInfo p;
  p.ipv4 = true;
  p.wire_bytes = p.header_bytes = bytes;
  return p;
}
}  // namespace

TEST_CASE("wanem model: a GSO super-packet counts its TCP segments, headers once per segment on the wire") {
  const auto p = gsoPacket(4500, 1000, 0x18);
  const PacketInfo info = parsePacket(p.data(), p.size());
  REQUIRE(info.ipv4);
  CHECK(info.tcp_gso);
  CHECK(info.segments == 5);  // not 6: the headers are not payload
  CHECK(info.payload_bytes == 4500);
  CHECK(info.wire_bytes == 4500 + 5 * (kIhl + kThl));
  CHECK(info.segmentWireBytes(0) == 1000 + kIhl + kThl);
  CHECK(info.segmentWireBytes(4) == 500 + kIhl + kThl);
  CHECK(info.src == ((10u << 24) | (201u << 16) | (1u << 8) | 2u));
  // Too short for its own headers: not parsed, passed on untouched by the router.
  CHECK_FALSE(parsePacket(p.data(), kVnetHdrLen + 10).ipv4);
}

TEST_CASE("wanem model: cutting a super-packet keeps the runs of kept segments, each a valid packet") {
  const uint8_t fin_psh_cwr = 0x01 | 0x08 | 0x80 | 0x10;
  const auto p = gsoPacket(4500, 1000, fin_psh_cwr);
  std::vector<std::vector<uint8_t>> runs;
  REQUIRE(splitSegments(p.data(), p.size(), {true, true, false, true, true}, &runs));
  REQUIRE(runs.size() == 2);
  const uint8_t* orig_payload = p.data() + kVnetHdrLen + kIhl + kThl;
  struct Want {
    size_t offset, len;
    bool gso, first, last;
  };
  const Want want[2] = {{0, 2000, true, true, false}, {3000, 1500, true, false, true}};
  for (size_t k = 0; k < 2; ++k) {
    const auto& r = runs[k];
    VnetHdr vh;
    std::memcpy(&vh, r.data(), sizeof vh);
    const uint8_t* ip = r.data() + kVnetHdrLen;
    const size_t ip_len = r.size() - kVnetHdrLen;
    CHECK(ip_len == kIhl + kThl + want[k].len);
    CHECK(be16(ip + 2) == ip_len);
    CHECK(headerChecksumValid(ip));
    CHECK(be16(ip + 4) == 0x1234 + want[k].offset / 1000);
    CHECK(be32(ip + kIhl + 4) == 0x01020304u + want[k].offset);
    const uint8_t flags = ip[kIhl + 13];
    CHECK(((flags & 0x80) != 0) == want[k].first);  // CWR on the first run only
    CHECK(((flags & 0x09) == 0x09) == want[k].last);  // FIN and PSH on the last run only
    CHECK((flags & 0x10) != 0);                       // ACK everywhere
    CHECK(vh.gso_type == (want[k].gso ? kGsoTcpV4 : kGsoNone));
    CHECK(vh.flags == kNeedsCsum);
    CHECK(std::memcmp(ip + kIhl + kThl, orig_payload + want[k].offset, want[k].len) == 0);
    // The partial checksum completes to the TCP checksum of the run.
    CHECK(be16(ip + kIhl + 16) == tcpPseudoChecksum(ip, kIhl, ip_len));
    CHECK(completeTcpChecksum(ip, ip_len) == tcpChecksum(ip, kIhl, ip_len));
    CHECK(parsePacket(r.data(), r.size()).segments == want[k].len / 1000 + (want[k].len % 1000 != 0));
  }
  SECTION("a lone kept segment is a plain packet") {
    REQUIRE(splitSegments(p.data(), p.size(), {false, false, true, false, false}, &runs));
    REQUIRE(runs.size() == 1);
    VnetHdr vh;
    std::memcpy(&vh, runs[0].data(), sizeof vh);
    CHECK(vh.gso_type == kGsoNone);
    CHECK(runs[0].size() == kVnetHdrLen + kIhl + kThl + 1000);
  }
  SECTION("a packet that is not a TCP super-packet is refused") {
    CHECK_FALSE(splitSegments(p.data(), p.size(), {true, false}, &runs));  // wrong number of segments
    const auto small = gsoPacket(500, 1000, 0x10);
    CHECK_FALSE(splitSegments(small.data(), small.size(), {true}, &runs));
  }
}

TEST_CASE("wanem model: a link serialises at its rate and drops at the tail when its queue is full") {
  Link link(LinkParams{8, 10000});  // 8 Mbit/s = 1 byte per µs; a 10 000-byte queue
  int64_t depart = -1;
  int admitted = 0;
  for (int i = 0; i < 12; ++i) admitted += static_cast<int>(link.offer(0, single(1000), &depart));
  CHECK(admitted == 10);  // 10 x 1000 bytes fill the queue; the 11th and 12th are dropped
  CHECK(depart == 10'000'000);
  CHECK(link.stats().dropped == 2);
  CHECK(link.stats().min_drop_backlog == Approx(10000));  // drops begin only when it is full
  CHECK(link.stats().max_queue_delay_ns <= 10'000'000);   // at most queue / rate of waiting
  // 5 ms later half of it has left: five more fit, at the rate.
  admitted = 0;
  for (int i = 0; i < 6; ++i) admitted += static_cast<int>(link.offer(5'000'000, single(1000), &depart));
  CHECK(admitted == 5);
  CHECK(depart == 15'000'000);
  // Idle again: no queue, only serialisation.
  CHECK(link.offer(100'000'000, single(500), &depart) == 1);
  CHECK(depart == 100'500'000);
}

TEST_CASE("wanem model: a super-packet is admitted segment by segment, the prefix that fits") {
  Link link(LinkParams{8, 3 * 1052 + 100});
  const auto p = gsoPacket(5000, 1000, 0x10);
  const PacketInfo info = parsePacket(p.data(), p.size());
  int64_t depart = 0;
  CHECK(link.offer(0, info, &depart) == 3);
  CHECK(depart == 3 * 1052 * 1000);
  CHECK(link.stats().dropped == 2);
  Link unlimited;
  CHECK(unlimited.offer(42, info, &depart) == 5);
  CHECK(depart == 42);
}

TEST_CASE("wanem model: the paths file sets regions, asymmetric paths, links and queues") {
  std::istringstream file(
      "# two regions and a slow, lossy transatlantic direction\n"
      "rank 0 eu\nrank 1 eu\nrank 2 us\n"
      "delay eu us 40\n"
      "path eu -> us rate=50 loss=0.1 queue=100k\n"
      "path 0 1 delay=1 jitter=0.5\n"
      "uplink 2 rate=100 queue=20ms\n"
      "link 0 rate=500\n");
  TopologyDefaults d;
  d.ranks = 3;
  d.rate_mbit = 250;
  Topology t;
  std::string error;
  REQUIRE(buildTopology(d, &file, "test.paths", &t, &error));
  CHECK(t.paths[0][2].delay_ms == 40);
  CHECK(t.paths[2][0].delay_ms == 40);
  CHECK(t.paths[0][2].link.rate_mbit == 50);  // one way only
  CHECK(t.paths[2][0].link.rate_mbit == 0);
  CHECK(t.paths[1][2].loss == Approx(0.001));
  CHECK(t.paths[2][1].loss == 0);
  CHECK(t.paths[0][2].link.queue_bytes == 100 * 1024);
  CHECK(t.paths[0][1].delay_ms == 1);
  CHECK(t.paths[1][0].jitter_ms == 0.5);
  CHECK(t.uplink[2].rate_mbit == 100);
  CHECK(t.uplink[2].queue_bytes == 250000);       // 20 ms at 100 Mbit/s
  CHECK(t.downlink[2].rate_mbit == 250);          // the default
  CHECK(t.downlink[2].queue_bytes == 2'500'000);  // 1 BDP: 250 Mbit/s x 80 ms
  CHECK(t.uplink[0].rate_mbit == 500);
  CHECK(t.downlink[0].rate_mbit == 500);
  CHECK(t.bottleneckMbit(0, 2) == 50);
  CHECK(t.bottleneckMbit(2, 0) == 100);
  CHECK(t.rttMs(0, 2) == 80);
  CHECK(t.region == std::vector<std::string>{"eu", "eu", "us"});
}

TEST_CASE("wanem model: a bad paths line is refused with its line number and reason") {
  auto refuse = [](const std::string& text, const std::string& want) {
    std::istringstream file(text);
    TopologyDefaults d;
    d.ranks = 2;
    Topology t;
    std::string error;
    CHECK_FALSE(buildTopology(d, &file, "x.paths", &t, &error));
    INFO(error);
    CHECK(error.find(want) != std::string::npos);
  };
  refuse("rank 0 eu\npath eu mars delay=3\n", "x.paths:2: unknown region 'mars'");
  refuse("path 0 1 speed=3\n", "expected KEY=VALUE with KEY one of delay, jitter, loss, rate, queue");
  refuse("path 0 5 delay=3\n", "rank 5 does not exist");
  refuse("link 0 queue=lots\n", "bad queue size 'lots'");
  refuse("path 0 1 loss=150\n", "loss above 100 %");
  refuse("frobnicate 1 2\n", "unknown line kind 'frobnicate'");
  QueueSpec q;
  CHECK_FALSE(parseQueueSpec("-3ms", &q));
  REQUIRE(parseQueueSpec("2bdp", &q));
  CHECK((q.kind == QueueSpec::Kind::kBdp && q.value == 2));
}

TEST_CASE("wanem model: lateness quantiles and the verdict of a phase") {
  Bin b;
  for (int i = 0; i < 990; ++i) b.late.add(40);
  for (int i = 0; i < 10; ++i) b.late.add(3000);
  CHECK(b.late.quantile(0.5) <= 50);
  CHECK(b.late.quantile(0.99) <= 50);
  CHECK(b.late.max() == 3000);
  CHECK(judge("ok", b).faithful);
  b.late.add(20000);  // one packet 20 ms late: not faithful, whatever the percentiles say
  const Verdict late = judge("late", b);
  CHECK_FALSE(late.faithful);
  CHECK(late.why.find("late (> 10 ms)") != std::string::npos);
  Bin d;
  d.emulator_drops = 1;
  CHECK_FALSE(judge("drop", d).faithful);
  Bin q;
  q.queue_drops = 1000;  // the model's drops are not the emulator's fault
  q.lost_random = 10;
  CHECK(judge("model", q).faithful);
}

TEST_CASE("wanem model: a phase is the bins its intervals overlap, over every process's lines") {
  Timeline tl(1'000'000'000);
  tl.at(1'050'000'000).packets = 1;   // bin 0
  tl.at(1'250'000'000).packets = 10;  // bin 2
  tl.at(1'950'000'000).packets = 100; // bin 9
  CHECK(tl.sum({{1'000'000'000, 1'060'000'000}}).packets == 1);
  CHECK(tl.sum({{1'000'000'000, 1'060'000'000}, {1'010'000'000, 1'020'000'000}}).packets == 1);  // counted once
  CHECK(tl.sum({{1'200'000'000, 1'960'000'000}}).packets == 110);
  CHECK(tl.total().packets == 111);
  const std::string path = "wanem_model_phases.txt";
  {
    std::ofstream f(path);
    f << "0:pccl:ring:64 100 200\n1:gloo:ring:64 300 400\n0:pccl:ring:64 150 250\ngarbage\n2:x 9 1\n";
  }
  size_t bad = 0;
  const auto phases = readPhases(path, &bad);
  std::remove(path.c_str());
  REQUIRE(phases.size() == 2);
  CHECK(phases[0].first == "0:pccl:ring:64");
  CHECK(phases[0].second.size() == 2);
  CHECK(phases[1].first == "1:gloo:ring:64");
  CHECK(bad == 2);  // a line without times and one that ends before it begins
}
