// A member's control connection reset on the way (a middlebox's RST) while the member lives
// (docs/protocol.md §8.4, "A broken connection"): the master holds its place, the member dials again and
// resumes its session, and the run goes on with it: no removal, no ring rebuild, every all-reduce
// succeeds. A member that does not come back is removed when the hold ends; a process that is gone is
// removed at once (its ring port refuses connections).
#include <catch2/catch.hpp>

#include <atomic>

#include "api/comm_impl.hpp"
#include "test_support.hpp"

using namespace pccl;
using namespace pccl::test;

namespace {

CommConfig reconnecting() {
  CommConfig c = fastCommConfig(0);
  c.master_reconnect_ms = 20000;  // a member that loses its master looks for it again (JoinRequest::kReconnects)
  c.op_timeout_ms = 60000;
  return c;
}

}  // namespace

TEST_CASE("master link reset: the member dials again and keeps its place, and its all-reduces go on", "[faults]") {
  constexpr size_t kWorld = 3, kCount = 1 << 18, kOps = 12;
  LocalCluster c = startCluster(kWorld, reconnecting());
  REQUIRE(c.peers.size() == kWorld);
  const uint64_t epoch = c.peers[0]->stats().epoch;
  auto& victim = detail::CommAccess::impl(*c.peers[1]);
  // Peer 1's control connection is reset as it says hello for its fourth call: mid-operation.
  std::atomic<int> hellos{0};
  victim.setRingCtlHookForTest([&victim, &hellos](uint64_t, uint8_t kind) {
    if (kind == wire::RingCtl::kHello && ++hellos == 4) {
      victim.postForTest([&victim] { victim.resetMasterLinkOnIoForTest(); });
    }
    return true;
  });
  std::vector<Status> st(kWorld);
  c.onEach([&](size_t rank) {
    std::vector<float> buf(kCount);
    for (size_t op = 0; op < kOps && st[rank].isOk(); ++op) {
      std::fill(buf.begin(), buf.end(), static_cast<float>(rank + 1));
      st[rank] = c.peers[rank]->allReduce(buf.data(), buf.data(), kCount, DataType::kFloat32, RedOp::kSum).status();
      if (st[rank].isOk() && buf[kCount / 2] != 6.0f) st[rank] = Status::internal("wrong result");
    }
  });
  victim.setRingCtlHookForTest(nullptr);
  for (size_t rank = 0; rank < kWorld; ++rank) {
    INFO("rank " << rank << ": " << st[rank].toString());
    CHECK(st[rank].isOk());
    CHECK(c.peers[rank]->stats().epoch == epoch);
  }
  // The member came back to the master and is a member still (it may still be on its way back when
  // the last call ends: the ring does not need the master).
  REQUIRE(c.master->waitFor([](const MasterStats& s) { return s.connections == kWorld; }, 30000));
  const CommStats s = c.peers[1]->stats();
  CHECK(s.master_losses == 1);
  CHECK(c.master->stats().accepted == kWorld);
  CHECK(c.master->stats().epoch == epoch);
  CHECK(hellos.load() >= 4);
}

TEST_CASE("master link reset: a live member that does not come back is removed when its hold ends", "[faults]") {
  constexpr size_t kWorld = 3;
  LocalCluster c = startCluster(kWorld, reconnecting());
  REQUIRE(c.peers.size() == kWorld);
  auto& victim = detail::CommAccess::impl(*c.peers[2]);
  // Its io thread is held up right after the reset: it cannot dial again, but its process lives (the
  // kernel still completes the master's dial of its ring port), so the master holds its place.
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  const auto t0 = std::chrono::steady_clock::now();
  victim.postForTest([&victim, released] {
    victim.resetMasterLinkOnIoForTest();
    released.wait();
  });
  REQUIRE(c.master->waitFor([](const MasterStats& s) { return s.connections == 2; }, 30000));
  CHECK(c.master->stats().accepted == kWorld);  // held, not removed
  REQUIRE(c.master->waitFor([](const MasterStats& s) { return s.accepted == 2; }, 30000));
  const double removed = secondsSince(t0);
  release.set_value();
  INFO("removed after " << removed << " s; the hold is " << silenceLimitS() << " s");
  CHECK(removed >= silenceLimitS() - 0.2);
  for (size_t rank = 0; rank < 2; ++rank) CHECK(*c.peers[rank]->arePeersPending());  // the others were told
}

// A shared-state sync of a member whose control connection is reset meanwhile goes on (protocol 19):
// the member keeps fetching, the master holds its place and, once it is back, repeats its plan (the
// member answers with its SyncDone again) or the SyncComplete it missed; a lost announcement the member
// sends again. Every peer's sync succeeds with every byte right. The reset lands at a different point
// of each sync: with the call (the announcement), then 2, 10 and 40 ms into it (plan, fetch, the end).
TEST_CASE("master link reset: a shared-state sync goes on through a reset of the syncing member's control connection",
          "[faults][sync]") {
  constexpr size_t kWorld = 3, kCount = size_t{1} << 22;  // 16 MiB for the stale member to fetch
  LocalCluster c = startCluster(kWorld, reconnecting());
  REQUIRE(c.peers.size() == kWorld);
  auto& victim = detail::CommAccess::impl(*c.peers[2]);
  const uint64_t epoch = c.peers[0]->stats().epoch;
  for (int round = 0; round < 4; ++round) {
    INFO("round " << round);
    std::vector<std::vector<float>> data(kWorld);
    std::vector<SharedState> states(kWorld);
    for (size_t i = 0; i < kWorld; ++i) {
      data[i].assign(kCount, i == 2 ? -1.0f : static_cast<float>(round + 1));
      states[i].revision = i == 2 ? 0 : static_cast<uint64_t>(round + 1);
      states[i].tensors = {SharedTensor{"w", DataType::kFloat32, kCount, data[i].data()}};
    }
    std::vector<Status> st(kWorld);
    std::thread fault([&] {
      const int delay_ms[] = {0, 2, 10, 40};
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms[round]));  // where it lands, not a wait
      victim.postForTest([&victim] { victim.resetMasterLinkOnIoForTest(); });
    });
    c.onEach([&](size_t i) { st[i] = c.peers[i]->syncSharedState(states[i]).status(); });
    fault.join();
    for (size_t i = 0; i < kWorld; ++i) {
      INFO("peer " << i << ": " << st[i].toString());
      CHECK(st[i].isOk());
    }
    CHECK(std::count(data[2].begin(), data[2].end(), static_cast<float>(round + 1)) == static_cast<ptrdiff_t>(kCount));
    // Back with the master before the next round (it may still have been on its way when the sync ended).
    REQUIRE(c.master->waitFor([](const MasterStats& s) { return s.connections == kWorld; }, 30000));
  }
  CHECK(c.peers[2]->stats().master_losses == 4);
  CHECK(c.master->stats().accepted == kWorld);
  CHECK(c.master->stats().epoch == epoch);
}
