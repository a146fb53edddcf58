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
