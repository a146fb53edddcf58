// Ring connections that break while every peer lives (docs/algorithms.md §6, "Network faults"): real
// communicators on loopback give up their ring connections, as a reset on the path would, in the middle
// of all-reduces and during the commit round. The connections that dialled dial again, the frames the
// other end lacked are written again, and every operation succeeds, exact, with no ring rebuild.
#include <catch2/catch.hpp>

#include <atomic>

#include "api/comm_impl.hpp"
#include "test_support.hpp"

using namespace pccl;
using namespace pccl::test;

namespace {

constexpr char kSecret[] = "ring-resume-test-secret";

// `encrypt`: the run encrypts (a new connection gets new keys from its own handshake).
CommConfig resumeConfig(bool encrypt = false) {
  CommConfig c = fastCommConfig(0, encrypt ? kSecret : "");
  c.encrypt = encrypt;
  c.same_host_reads = 0;  // loopback neighbours lend payloads otherwise, and lending links do not resume
  c.segment_bytes = 64 << 10;
  c.op_timeout_ms = 60000;
  return c;
}

}  // namespace

TEST_CASE("ring resume: connections given up under running all-reduces are replaced and no operation fails",
          "[resume]") {
  constexpr size_t kWorld = 3, kOps = 24, kLarge = 1 << 20, kSmall = 1000;
  const bool encrypt = GENERATE(false, true);
  INFO((encrypt ? "encrypted" : "in clear"));
  MasterConfig master = fastMasterConfig(encrypt ? kSecret : "");
  master.encrypt = encrypt;
  LocalCluster c = startCluster(kWorld, resumeConfig(encrypt), master);
  REQUIRE(c.peers.size() == kWorld);
  const uint64_t epoch = c.peers[0]->stats().epoch;
  // Each peer gives up all its ring connections as it says hello for every third call (staggered over
  // the peers): the call's data is on its way then.
  std::vector<size_t> hellos(kWorld, 0), breaks(kWorld, 0);
  for (size_t rank = 0; rank < kWorld; ++rank) {
    auto& impl = detail::CommAccess::impl(*c.peers[rank]);
    impl.setRingCtlHookForTest([&, rank, p = &impl](uint64_t, uint8_t kind) {
      if (kind != wire::RingCtl::kHello) return true;
      const size_t n = ++hellos[rank];
      if (n % kWorld == rank && n >= 2 && n + 2 <= kOps) {
        if (p->breakRingOnIoForTest(Status::peerLost("reset by the test")) > 0) ++breaks[rank];
      }
      return true;
    });
  }
  std::vector<Status> failed(kWorld);
  std::vector<size_t> wrong(kWorld, 0);
  c.onEach([&](size_t rank) {
    for (size_t op = 0; op < kOps; ++op) {
      const size_t count = op % 2 == 0 ? kLarge : kSmall;  // the ring, and the gather
      const std::vector<float> in = smallIntInput(rank, count);
      std::vector<float> out(count, -1.0f);
      auto r = c.peers[rank]->allReduce(in.data(), out.data(), count, DataType::kFloat32, RedOp::kSum);
      if (!r.isOk()) {
        failed[rank] = r.status();
        break;
      }
      if (!exactSmallIntSum(out, kWorld)) ++wrong[rank];
    }
  });
  for (auto& p : c.peers) detail::CommAccess::impl(*p).setRingCtlHookForTest(nullptr);
  uint64_t reconnects = 0;
  size_t total_breaks = 0;
  for (size_t rank = 0; rank < kWorld; ++rank) {
    INFO("rank " << rank << ": " << failed[rank].toString());
    CHECK(failed[rank].isOk());
    CHECK(wrong[rank] == 0);
    const CommStats s = c.peers[rank]->stats();
    CHECK(s.allreduce_aborts == 0);
    CHECK(s.epoch == epoch);  // no ring rebuild
    reconnects += s.ring_reconnects;
    total_breaks += breaks[rank];
  }
  CHECK(total_breaks >= 6);
  CHECK(reconnects >= total_breaks);
}

TEST_CASE("ring resume: the ring's connections reset as a peer sends its prepared streak cost no operation",
          "[resume]") {
  constexpr size_t kWorld = 3, kCount = 1 << 18;
  LocalCluster c = startCluster(kWorld, resumeConfig());
  REQUIRE(c.peers.size() == kWorld);
  auto& impl = detail::CommAccess::impl(*c.peers[1]);
  std::atomic<size_t> broken{0};
  // Peer 1 breaks its connections (both directions) just before its first message of the commit round
  // goes out — a prepared streak, or the commit itself when its neighbours' streaks reached it first
  // (which of the two depends on timing): the message waits for the new connection, and the commit
  // round ends on it.
  impl.setRingCtlHookForTest([&impl, &broken](uint64_t, uint8_t kind) {
    const bool commit_round = kind == wire::RingCtl::kPrepared || kind == wire::RingCtl::kCommit;
    if (commit_round && broken.load() == 0) {
      broken = impl.breakRingOnIoForTest(Status::peerLost("reset during the commit round"));
    }
    return true;
  });
  std::vector<Status> st(kWorld);
  std::vector<uint8_t> exact(kWorld, 0);  // not vector<bool>: each thread writes its own element
  c.onEach([&](size_t rank) {
    const std::vector<float> in = smallIntInput(rank, kCount);
    std::vector<float> out(kCount, -1.0f);
    st[rank] = c.peers[rank]->allReduce(in.data(), out.data(), kCount, DataType::kFloat32, RedOp::kSum).status();
    exact[rank] = exactSmallIntSum(out, kWorld);
  });
  impl.setRingCtlHookForTest(nullptr);
  CHECK(broken.load() == 4);  // K = 2 each way
  for (size_t rank = 0; rank < kWorld; ++rank) {
    INFO("rank " << rank << ": " << st[rank].toString());
    CHECK(st[rank].isOk());
    CHECK(exact[rank]);
  }
  // The connection that carried its message each way had resumed by then; the other two resume when
  // their dialler gets to them, which may be after the operation ended.
  CHECK(c.peers[1]->stats().ring_reconnects >= 2);
}
