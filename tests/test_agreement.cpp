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
