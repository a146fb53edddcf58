// Agreement on collectives with real peers (threads of this process on loopback): which code each
// kind of disagreement gives, and that the documented retry loop recovers from the retryable ones.
#include <catch2/catch.hpp>

#include <future>

#include "test_support.hpp"

using namespace pccl;
using namespace pccl::test;

namespace {

CommConfig agreementConfig() {
  CommConfig c = fastCommConfig(0);
  c.op_timeout_ms = 60000;  // longer than any test: a failure here is never the operation's deadline
  return c;
}

Status reduceOnes(Communicator& comm, std::vector<float>& buf, uint64_t tag) {
  ReduceOptions o;
  o.tag = tag;
  return comm.allReduce(buf.data(), buf.data(), buf.size(), DataType::kFloat32, RedOp::kSum, o).status();
}

}  // namespace

TEST_CASE("agreement: a vote racing an all-reduce is TopologyChanged, and update-then-retry recovers",
          "[agreement]") {
  LocalCluster c = startCluster(2, agreementConfig());
  REQUIRE(c.peers.size() == 2);
  // Peer 0 votes (it saw a pending peer at its safe point) while peer 1 starts an all-reduce. Whichever
  // reaches the master first, the all-reduce is aborted as a race with a ring change.
  auto voting = std::async(std::launch::async, [&] { return c.peers[0]->updateTopology(); });
  std::vector<float> buf(1000, 1.0f);
  const std::vector<float> input = buf;
  Status s = reduceOnes(*c.peers[1], buf, 3);
  INFO(s.toString());
  CHECK(s.code() == Code::kTopologyChanged);
  CHECK_THAT(s.message(), Catch::Contains("pcclUpdateTopology"));
  CHECK(buf == input);  // in place: the input is back
  // The documented retry: update (this completes peer 0's vote), then the same call again.
  REQUIRE(c.peers[1]->updateTopology().isOk());
  REQUIRE(voting.get().isOk());
  std::vector<Status> st(2);
  std::vector<std::vector<float>> bufs(2, input);
  c.onEach([&](size_t i) { st[i] = reduceOnes(*c.peers[i], bufs[i], 3); });
  for (size_t i = 0; i < 2; ++i) {
    INFO("peer " << i << ": " << st[i].toString());
    REQUIRE(st[i].isOk());
    CHECK(bufs[i][0] == 2.0f);
  }
}

TEST_CASE("agreement: a ring port nobody can reach is PeerLost on every peer, naming the peer and its address",
          "[agreement]") {
  LocalCluster c = startCluster(2, agreementConfig());
  REQUIRE(c.peers.size() == 2);
  // The joiner listens on 127.0.0.1 but advertises 127.0.0.2: its predecessor's connections to
  // 127.0.0.2:port are refused, as through a firewall that rejects, or with a wrong advertise_host.
  CommConfig cfg = agreementConfig();
  cfg.master_address = "127.0.0.1:" + std::to_string(c.master->port());
  cfg.advertise_host = "127.0.0.2";
  auto joiner = makeComm(cfg);
  REQUIRE(joiner);
  const std::string where = "127.0.0.2:" + std::to_string(joiner->listenPort());
  auto joining = std::async(std::launch::async, [&] { return joiner->connect(); });
  REQUIRE(c.master->waitFor([](const MasterStats& s) { return s.pending == 1; }, 10000));
  std::vector<Status> votes(2);
  c.onEach([&](size_t i) { votes[i] = c.peers[i]->updateTopology(); });
  const Status joined = joining.get();
  const std::string who = formatPeerId(joiner->id()).substr(0, 8);
  for (const Status& s : {votes[0], votes[1], joined}) {
    INFO(s.toString());
    CHECK(s.code() == Code::kPeerLost);
    CHECK_THAT(s.message(), Catch::Contains(who) && Catch::Contains(where));
  }
  // Every member, the joiner too, then runs its all-reduce, as a trainer whose retry loop saw PeerLost
  // from the vote would. The master's ring is an epoch ahead of theirs (the failed build), but what
  // they need to hear is the build's failure: PeerLost naming the unreachable peer, not a mismatch.
  std::vector<Communicator*> all = {c.peers[0].get(), c.peers[1].get(), joiner.get()};
  std::vector<Status> st(3);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < 3; ++i) {
    threads.emplace_back([&, i] {
      std::vector<float> buf(100, 1.0f);
      st[i] = reduceOnes(*all[i], buf, 0);
    });
  }
  for (auto& t : threads) t.join();
  for (const Status& s : st) {
    INFO(s.toString());
    CHECK(s.code() == Code::kPeerLost);
    CHECK_THAT(s.message(), Catch::Contains("ring build") && Catch::Contains(who) && Catch::Contains(where) &&
                                Catch::Contains("pcclUpdateTopology"));
  }
  // Once the unreachable peer is gone, the others' retry loop recovers.
  joiner.reset();
  REQUIRE(c.updateAll());
  std::vector<std::vector<float>> bufs(2, std::vector<float>(100, 1.0f));
  c.onEach([&](size_t i) { st[i] = reduceOnes(*c.peers[i], bufs[i], 0); });
  CHECK(st[0].isOk());
  CHECK(st[1].isOk());
  CHECK(bufs[0][99] == 2.0f);
}

// ---- tags that diverge ------------------------------------------------------------------------------

namespace {

MasterConfig windowMaster(uint32_t window_ms) {
  MasterConfig m = fastMasterConfig();
  m.announce_window_ms = window_ms;
  return m;
}

std::string shortOf(const Communicator& c) { return formatPeerId(c.id()).substr(0, 8); }

}  // namespace

TEST_CASE("agreement: peers whose tags diverge all fail with Mismatch naming who is missing, long before "
          "op_timeout_ms",
          "[agreement]") {
  LocalCluster c = startCluster(3, agreementConfig(), windowMaster(300));
  REQUIRE(c.peers.size() == 3);
  // Peers 0 and 1 call tag 10; peer 2 computes its tags from a counter that started at 0.
  std::vector<Status> st(3);
  c.onEach([&](size_t i) {
    std::vector<float> buf(100, 1.0f);
    st[i] = reduceOnes(*c.peers[i], buf, i == 2 ? 0 : 10);
  });
  const std::string late = shortOf(*c.peers[2]);
  const std::string late_rank = "rank " + std::to_string(c.peers[2]->topology().group_rank);
  for (size_t i = 0; i < 3; ++i) {
    INFO("peer " << i << ": " << st[i].toString());
    CHECK(st[i].code() == Code::kMismatch);  // not Timeout: op_timeout_ms (60 s) is far away
    CHECK_THAT(st[i].message(), Catch::Contains("tags diverge") && Catch::Contains("announce_window_ms 300"));
  }
  CHECK_THAT(st[0].message(), Catch::Contains("tag 10 was called by") &&
                                  Catch::Contains("not by peer " + late + " (" + late_rank + ", waiting in tag 0"));
  CHECK_THAT(st[2].message(), Catch::Contains("tag 0 was called by peer " + late) &&
                                  Catch::Contains(shortOf(*c.peers[0])) && Catch::Contains(shortOf(*c.peers[1])) &&
                                  Catch::Contains("waiting in tag 10"));
  // Peer 2 never called tag 10, but its first call of it is call 0 of tag 10, which failed: it fails at
  // once, with the same reason (a peer's k-th call of a tag is call k, whenever it is made). Then calls
  // that agree work.
  Status first;
  c.onEach([&](size_t i) {
    std::vector<float> buf(100, 1.0f);
    if (i == 2) first = reduceOnes(*c.peers[i], buf, 10);
    st[i] = reduceOnes(*c.peers[i], buf, 10);
  });
  CHECK(first.code() == Code::kMismatch);
  CHECK_THAT(first.message(), Catch::Contains("tags diverge"));
  for (const Status& s : st) CHECK(s.isOk());
}

TEST_CASE("agreement: a peer that is slow to call is not failed by the divergence window", "[agreement]") {
  LocalCluster c = startCluster(3, agreementConfig(), windowMaster(200));
  REQUIRE(c.peers.size() == 3);
  std::vector<Status> st(3);
  std::vector<std::vector<float>> bufs(3, std::vector<float>(100, 1.0f));
  c.onEach([&](size_t i) {
    // The third peer is still "computing" for several windows: it waits in no tag, so nothing diverges.
    if (i == 2) std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    st[i] = reduceOnes(*c.peers[i], bufs[i], 5);
  });
  for (size_t i = 0; i < 3; ++i) {
    INFO("peer " << i << ": " << st[i].toString());
    CHECK(st[i].isOk());
    CHECK(bufs[i][0] == 3.0f);
  }
}

TEST_CASE("agreement: the master books a call that waits and forgets it once its announcers are done", "[agreement]") {
  LocalCluster c = startCluster(3, agreementConfig());
  REQUIRE(c.peers.size() == 3);
  std::vector<std::vector<float>> bufs(3, std::vector<float>(100, 1.0f));
  std::vector<std::future<Status>> calls;
  for (size_t i = 0; i < 2; ++i) {
    calls.push_back(std::async(std::launch::async, [&, i] { return reduceOnes(*c.peers[i], bufs[i], 4); }));
  }
  // Peers 0 and 1 wait for peer 2: their calls run past 5 ms, so the master hears of them.
  CHECK(c.master->waitFor([](const MasterStats& s) { return s.collectives == 1; }, 10000));
  const Status third = reduceOnes(*c.peers[2], bufs[2], 4);
  CHECK(third.isOk());
  for (auto& f : calls) CHECK(f.get().isOk());
  for (const auto& b : bufs) CHECK(b[99] == 3.0f);
  CHECK(c.master->waitFor([](const MasterStats& s) { return s.collectives == 0; }, 10000));
  // Calls that commit at once leave nothing in the books, announced or not.
  std::vector<Status> st(3);
  c.onEach([&](size_t i) {
    for (uint64_t k = 0; k < 20 && st[i].isOk(); ++k) st[i] = reduceOnes(*c.peers[i], bufs[i], 10 + k);
  });
  for (const auto& s : st) CHECK(s.isOk());
  CHECK(c.master->waitFor([](const MasterStats& s) { return s.collectives == 0; }, 10000));
}

TEST_CASE("agreement: concurrent operations started in different orders are not divergence", "[agreement]") {
  LocalCluster c = startCluster(2, agreementConfig(), windowMaster(10000));
  REQUIRE(c.peers.size() == 2);
  std::vector<Status> st(4);
  std::vector<std::vector<float>> bufs(4, std::vector<float>(1000, 1.0f));
  c.onEach([&](size_t i) {
    const uint64_t first = i == 0 ? 1 : 2, second = i == 0 ? 2 : 1;  // peer 1 starts them the other way round
    ReduceOptions o1, o2;
    o1.tag = first;
    o2.tag = second;
    auto h1 = c.peers[i]->allReduceAsync(bufs[2 * i].data(), bufs[2 * i].data(), 1000, DataType::kFloat32,
                                         RedOp::kSum, o1);
    auto h2 = c.peers[i]->allReduceAsync(bufs[2 * i + 1].data(), bufs[2 * i + 1].data(), 1000, DataType::kFloat32,
                                         RedOp::kSum, o2);
    st[2 * i] = h1.isOk() ? h1->wait().status() : h1.status();
    st[2 * i + 1] = h2.isOk() ? h2->wait().status() : h2.status();
  });
  for (size_t k = 0; k < 4; ++k) {
    INFO(st[k].toString());
    CHECK(st[k].isOk());
    CHECK(bufs[k][999] == 2.0f);
  }
}

TEST_CASE("agreement: pccl-master takes the window from PCCL_ANNOUNCE_WINDOW_MS and refuses a bad one",
          "[agreement]") {
  {
    ChildProcess bad({PCCL_MASTER_BIN, "--listen", "127.0.0.1:0"}, {"PCCL_ANNOUNCE_WINDOW_MS=soon"}, true);
    CHECK(bad.waitForLine("PCCL_ANNOUNCE_WINDOW_MS must be", 5000));
    CHECK(bad.waitExit(5000) == 2);
  }
  {
    ChildProcess help({PCCL_MASTER_BIN, "--help"}, {"PCCL_ANNOUNCE_WINDOW_MS=250"});
    auto line = help.waitForLine("--announce-window-ms", 5000);
    REQUIRE(line);
    CHECK_THAT(*line, Catch::EndsWith("=250"));  // the variable is the option's default
    CHECK(help.waitExit(5000) == 0);
  }
  {
    ChildProcess flag({PCCL_MASTER_BIN, "--listen", "127.0.0.1:0", "--announce-window-ms", "0"},
                      {"PCCL_ANNOUNCE_WINDOW_MS=250", "PCCL_LOG_LEVEL=error"});
    CHECK(flag.waitForLine("listening on", 5000));  // the flag wins; 0 (off) is valid
    flag.signal(SIGTERM);
    CHECK(flag.waitExit(5000) == 0);
  }
}
