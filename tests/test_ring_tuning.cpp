// Links that choose how many of their connections carry data (docs/algorithms.md §13), in real
// communicators on loopback: the pool is opened as configured, the stats say how many connections carry
// data, all-reduces are exact whatever the count (also when it is one of eight, and when those
// connections break and are resumed meanwhile), and a fixed K turns the choice off.
#include <catch2/catch.hpp>

#include "api/comm_config.hpp"
#include "api/comm_impl.hpp"
#include "test_support.hpp"

using namespace pccl;
using namespace pccl::test;

namespace {

constexpr uint32_t kPool = 8;

CommConfig tunedConfig() {
  CommConfig c = fastCommConfig(0);
  c.connections_per_peer = 0;  // the links choose
  c.max_connections_per_peer = kPool;
  c.same_host_connections = 0;  // the pool on loopback too
  c.same_host_reads = 0;        // lending links are not tuned
  c.segment_bytes = 64 << 10;
  c.op_timeout_ms = 60000;
  return c;
}

// Every peer runs `ops` all-reduces (large and small in turn); returns the failures and wrong results.
std::pair<size_t, size_t> runOps(LocalCluster& c, size_t ops) {
  const size_t world = c.peers.size();
  std::vector<uint8_t> failed(world, 0), wrong(world, 0);
  c.onEach([&](size_t rank) {
    for (size_t op = 0; op < ops; ++op) {
      const size_t count = op % 2 == 0 ? (1 << 19) : 777;
      const std::vector<float> in = smallIntInput(rank, count, 5);
      std::vector<float> out(count, -1.0f);
      auto r = c.peers[rank]->allReduce(in.data(), out.data(), count, DataType::kFloat32, RedOp::kSum);
      if (!r.isOk()) {
        failed[rank] = 1;
        return;
      }
      if (!exactSmallIntSum(out, world, 5)) wrong[rank] = 1;
    }
  });
  size_t f = 0, w = 0;
  for (size_t r = 0; r < world; ++r) {
    f += failed[r];
    w += wrong[r];
  }
  return {f, w};
}

}  // namespace

TEST_CASE("tuned links: the pool is opened, the stats say how many carry data, and results are exact",
          "[tuning]") {
  constexpr size_t kWorld = 3;
  LocalCluster c = startCluster(kWorld, tunedConfig());
  REQUIRE(c.peers.size() == kWorld);
  for (auto& p : c.peers) CHECK(p->topology().successor_connections == kPool);
  auto [failed, wrong] = runOps(c, 10);
  CHECK(failed == 0);
  CHECK(wrong == 0);
  for (auto& p : c.peers) {
    const CommStats s = p->stats();
    CHECK(s.ring_active_connections >= 1);
    CHECK(s.ring_active_connections <= kPool);
  }
}

TEST_CASE("tuned links: one connection of eight carrying data, broken and resumed, loses nothing", "[tuning]") {
  constexpr size_t kWorld = 3;
  LocalCluster c = startCluster(kWorld, tunedConfig());
  REQUIRE(c.peers.size() == kWorld);
  for (auto& p : c.peers) detail::CommAccess::impl(*p).restartTuningForTest(1);
  for (auto& p : c.peers) CHECK(p->stats().ring_active_connections == 1);
  auto [failed, wrong] = runOps(c, 6);
  CHECK(failed == 0);
  CHECK(wrong == 0);
  // Peer 1 gives up its ring connections as its calls say hello: the active one among them, while
  // the other seven stand by; the new connection takes its place.
  auto& impl = detail::CommAccess::impl(*c.peers[1]);
  std::atomic<size_t> broken{0};
  std::atomic<size_t> hellos{0};
  impl.setRingCtlHookForTest([&](uint64_t, uint8_t kind) {
    if (kind == wire::RingCtl::kHello && ++hellos % 2 == 0 && broken.load() < 3) {
      if (impl.breakRingOnIoForTest(Status::peerLost("reset by the test")) > 0) ++broken;
    }
    return true;
  });
  std::tie(failed, wrong) = runOps(c, 8);
  impl.setRingCtlHookForTest(nullptr);
  CHECK(failed == 0);
  CHECK(wrong == 0);
  CHECK(broken.load() >= 1);
  CHECK(c.peers[1]->stats().ring_reconnects >= 1);
  for (auto& p : c.peers) CHECK(p->stats().allreduce_aborts == 0);
}

TEST_CASE("fixed K: every connection carries data and nothing is tuned", "[tuning]") {
  CommConfig cfg = tunedConfig();
  cfg.connections_per_peer = 3;
  LocalCluster c = startCluster(2, cfg);
  REQUIRE(c.peers.size() == 2);
  auto [failed, wrong] = runOps(c, 4);
  CHECK(failed == 0);
  CHECK(wrong == 0);
  for (auto& p : c.peers) {
    const CommStats s = p->stats();
    CHECK(p->topology().successor_connections == 3);
    CHECK(s.ring_active_connections == 3);
    CHECK(s.ring_connection_changes == 0);
  }
}

TEST_CASE("tuned links: bad pool sizes are refused with the field named", "[tuning]") {
  CommConfig cfg = tunedConfig();
  cfg.max_connections_per_peer = 2000;
  Status st = checkCommConfig(cfg);
  CHECK(st.code() == Code::kInvalidArgument);
  CHECK_THAT(st.message(), Catch::Contains("max_connections_per_peer"));
  cfg.max_connections_per_peer = 0;
  CHECK(resolveConnections(cfg).isOk());
  CHECK(cfg.max_connections_per_peer == kDefaultMaxConnections);
  CHECK(linkConnections(cfg) == kDefaultMaxConnections);
  CHECK(tunedConnections(cfg));
}
