// pccl-wanem's faults without namespaces (bench/wanem/faults.cpp): the --faults and --control lines,
// their refusals, and the RST the emulator sends for a reset (bench/wanem/packet.cpp, makeRst).
#include <catch2/catch.hpp>

#include <sstream>

#include "faults.hpp"
#include "packet.hpp"
#include "topology.hpp"

using namespace pccl::wanem;

namespace {

Topology threeRanks() {
  TopologyDefaults d;
  d.ranks = 3;
  d.delay_ms = 10;
  std::istringstream file("rank 0 eu\nrank 1 eu\nrank 2 us\n");
  Topology t;
  std::string error;
  REQUIRE(buildTopology(d, &file, "test.paths", &t, &error));
  return t;
}

// Route changes checked against the same three ranks.
bool check(const std::string& line, Topology* out, std::string* error) {
  TopologyDefaults d;
  d.ranks = 3;
  std::istringstream file("rank 0 eu\nrank 1 eu\nrank 2 us\n" + line + "\n");
  return buildTopology(d, &file, "change", out, error);
}

}  // namespace

TEST_CASE("wanem faults: every kind parses, with ranks, regions, arrows and durations") {
  const Topology t = threeRanks();
  Fault f;
  std::string error;
  REQUIRE(parseFaultLine("at 5s down 2 for 3s", true, t, check, &f, &error));
  CHECK(f.kind == Fault::Kind::kDown);
  CHECK(f.at_s == 5);
  CHECK(f.for_s == 3);
  CHECK(f.pairs.size() == 4);  // 2 -> 0, 0 -> 2, 2 -> 1, 1 -> 2
  REQUIRE(parseFaultLine("at 1500ms down 0 -> 1 for 250ms", true, t, check, &f, &error));
  CHECK(f.at_s == Approx(1.5));
  CHECK(f.for_s == Approx(0.25));
  CHECK(f.pairs == std::vector<std::pair<int, int>>{{0, 1}});
  REQUIRE(parseFaultLine("burst eu -> us loss=30 for 2s  # a comment", false, t, check, &f, &error));
  CHECK(f.kind == Fault::Kind::kBurst);
  CHECK(f.loss == Approx(0.3));
  CHECK(f.pairs == std::vector<std::pair<int, int>>{{0, 2}, {1, 2}});
  CHECK(f.text == "burst eu -> us loss=30 for 2s");
  REQUIRE(parseFaultLine("reset 0 -> 1", false, t, check, &f, &error));
  CHECK(f.kind == Fault::Kind::kReset);
  REQUIRE(parseFaultLine("at 3s forget 1 -> 2", true, t, check, &f, &error));
  CHECK(f.kind == Fault::Kind::kForget);
  CHECK(f.pairs == std::vector<std::pair<int, int>>{{1, 2}});
  CHECK(std::string(kindName(f.kind)) == "forget");
  REQUIRE(parseFaultLine("at 20s path eu us delay=60", true, t, check, &f, &error));
  CHECK(f.kind == Fault::Kind::kPath);
  CHECK(f.path_line == "path eu us delay=60");
  CHECK(f.base == Fault::Base::kStart);
  REQUIRE(parseFaultLine("at phase+250ms reset 0 -> 1", true, t, check, &f, &error));
  CHECK(f.base == Fault::Base::kPhase);
  CHECK(f.at_s == Approx(0.25));
  REQUIRE(parseFaultLine("at phase down 0 -> 1 for 1s", true, t, check, &f, &error));
  CHECK(f.base == Fault::Base::kPhase);
  CHECK(f.at_s == 0);
  REQUIRE(parseFaultLine("at +2s reset 0 -> 1", true, t, check, &f, &error));
  CHECK(f.base == Fault::Base::kPrevious);
  CHECK(f.at_s == 2);
  CHECK_FALSE(parseFaultLine("   # only a comment", true, t, check, &f, &error));
  CHECK(error.empty());
}

TEST_CASE("wanem faults: bad lines are refused with a reason, a file's with its name and line") {
  const Topology t = threeRanks();
  Fault f;
  std::string error;
  const std::pair<const char*, const char*> bad[] = {
      {"down 2 for 3s", "starts with 'at TIME'"},
      {"at 5 down 2 for 3s", "bad time '5'"},
      {"at phase-1s down 2 for 3s", "bad time 'phase-1s'"},
      {"at +soon down 2 for 3s", "bad time '+soon'"},
      {"at 5s down 9 for 3s", "rank 9 does not exist"},
      {"at 5s down asia for 3s", "neither a rank nor a region"},
      {"at 5s down 2", "missing 'for DURATION'"},
      {"at 5s down 2 for soon", "expected 'for DURATION'"},
      {"at 5s burst 0 -> 1 for 2s", "missing 'loss=PERCENT'"},
      {"at 5s burst 0 -> 1 loss=130 for 2s", "loss=PERCENT"},
      {"at 5s burst 0 for 2s", "expected 'A -> B'"},
      {"at 5s reset 0 -> 0", "names no path"},
      {"at 5s reset 0 -> 1 now", "unexpected 'now'"},
      {"at 5s path eu us speed=9", "speed"},
      {"at 5s flap 0 -> 1", "unknown fault 'flap'"},
  };
  for (const auto& [line, why] : bad) {
    INFO(line);
    CHECK_FALSE(parseFaultLine(line, true, t, check, &f, &error));
    CHECK_THAT(error, Catch::Contains(why));
  }
  CHECK_FALSE(parseFaultLine("at 5s reset 0 -> 1", false, t, check, &f, &error));
  CHECK_THAT(error, Catch::Contains("leave out 'at TIME'"));

  std::istringstream file("# faults\nat 1s down 0 for 1s\n\nat 2s burst 0 -> 1 loss=x for 1s\n");
  std::vector<Fault> faults;
  CHECK_FALSE(parseFaultsFile(file, "f.faults", t, check, &faults, &error));
  CHECK_THAT(error, Catch::StartsWith("f.faults:4: expected loss=PERCENT"));
  std::istringstream good("at 1s down 0 for 1s\nat 2s reset 0 -> 2\n");
  faults.clear();
  REQUIRE(parseFaultsFile(good, "g.faults", t, check, &faults, &error));
  CHECK(faults.size() == 2);
}

TEST_CASE("wanem faults: the RST sent for a reset is a valid TCP packet with the given sequence number") {
  const auto pkt = makeRst(0x0ac90002, 0x0ac90102, 40000, 7000, 0xdeadbeef);
  const PacketInfo info = parsePacket(pkt.data(), pkt.size());
  CHECK(info.ipv4);
  CHECK(info.src == 0x0ac90002);
  CHECK(info.dst == 0x0ac90102);
  CHECK(info.payload_bytes == 0);
  TcpFields t;
  REQUIRE(parseTcp(pkt.data(), pkt.size(), &t));
  CHECK(t.sport == 40000);
  CHECK(t.dport == 7000);
  CHECK(t.seq == 0xdeadbeef);
  CHECK(t.flags == kTcpFlagRst);
  const uint8_t* ip = pkt.data() + kVnetHdrLen;
  CHECK(ipv4HeaderChecksum(ip, 20) == static_cast<uint16_t>((ip[10] << 8) | ip[11]));
  CHECK(tcpChecksum(ip, 20, 40) == static_cast<uint16_t>((ip[36] << 8) | ip[37]));
}
