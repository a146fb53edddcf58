// Membership with real peers (threads in this process, real TCP on loopback, ephemeral ports).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <future>
#include <thread>

#include "test_support.hpp"

using namespace pccl;
using namespace pccl::test;

namespace {

// Connects `n` peers: the first is admitted alone, the rest pend until it votes them in.
std::vector<std::unique_ptr<Communicator>> formRing(Master& master, size_t n, const CommConfig& base) {
  std::vector<std::unique_ptr<Communicator>> peers;
  for (size_t i = 0; i < n; ++i) peers.push_back(makeComm(base));
  for (auto& p : peers) REQUIRE(p != nullptr);
  REQUIRE(peers[0]->connect().isOk());
  std::vector<std::future<Status>> joins;
  for (size_t i = 1; i < n; ++i) {
    joins.push_back(std::async(std::launch::async, [&peers, i] { return peers[i]->connect(); }));
  }
  if (n > 1) {
    REQUIRE(master.waitFor([&](const MasterStats& s) { return s.pending == n - 1; }, 5000));
    REQUIRE(peers[0]->updateTopology().isOk());
  }
  for (auto& j : joins) REQUIRE(j.get().isOk());
  return peers;
}

Status updateAll(std::vector<std::unique_ptr<Communicator>>& peers) {
  std::vector<std::future<Status>> votes;
  for (auto& p : peers) votes.push_back(std::async(std::launch::async, [&p] { return p->updateTopology(); }));
  Status first;
  for (auto& v : votes) {
    Status s = v.get();
    if (!s.isOk() && first.isOk()) first = s;
  }
  return first;
}

void requireSameRing(const std::vector<std::unique_ptr<Communicator>>& peers) {
  Topology t0 = peers[0]->topology();
  std::vector<bool> rank_seen(peers.size(), false);
  for (const auto& p : peers) {
    Topology t = p->topology();
    CHECK(t.epoch == t0.epoch);
    CHECK(t.world_size == peers.size());
    REQUIRE(t.ring.size() == t0.ring.size());
    for (size_t i = 0; i < t.ring.size(); ++i) CHECK(t.ring[i].id == t0.ring[i].id);
    REQUIRE(t.rank < peers.size());
    CHECK(t.ring[t.rank].id == p->id());
    CHECK_FALSE(rank_seen[t.rank]);
    rank_seen[t.rank] = true;
  }
}

}  // namespace

TEST_CASE("cluster: 1 2 3 and 7 peers form one identical ring", "[cluster]") {
  for (size_t n : {1u, 2u, 3u, 7u}) {
    DYNAMIC_SECTION("peers=" << n) {
      auto master = startMaster(fastMasterConfig());
      REQUIRE(master);
      auto peers = formRing(*master, n, fastCommConfig(master->port()));
      requireSameRing(peers);
      CHECK(peers[0]->topology().epoch == (n == 1 ? 1u : 2u));
      for (auto& p : peers) {
        auto pending = p->arePeersPending();
        REQUIRE(pending.isOk());
        CHECK_FALSE(*pending);
      }
      // A vote with nothing to change still rebuilds the ring under a new epoch, identically everywhere.
      REQUIRE(updateAll(peers).isOk());
      requireSameRing(peers);
      CHECK(master->stats().accepted == n);
    }
  }
}

TEST_CASE("cluster: peers on one host open same_host_connections to each other", "[cluster]") {
  auto master = startMaster(fastMasterConfig());
  REQUIRE(master);
  CommConfig base = fastCommConfig(master->port());
  base.connections_per_peer = 4;
  base.same_host_connections = 1;  // the default
  auto peers = formRing(*master, 3, base);
  for (auto& p : peers) {
    CHECK(p->topology().successor_connections == 1);
    CHECK(p->topology().predecessor_connections == 1);
  }
  std::vector<std::future<Status>> runs;
  std::vector<std::vector<float>> bufs(peers.size(), std::vector<float>(100000, 1.5f));
  for (size_t i = 0; i < peers.size(); ++i) {
    runs.push_back(std::async(std::launch::async, [&, i] {
      return peers[i]->allReduce(bufs[i].data(), bufs[i].data(), bufs[i].size(), DataType::kFloat32, RedOp::kSum)
          .status();
    }));
  }
  for (auto& r : runs) CHECK(r.get().isOk());
  for (auto& b : bufs) CHECK(b == std::vector<float>(100000, 4.5f));

  // A member with its own count: the link it opens has that many, both ends agree.
  CommConfig three = base;
  three.same_host_connections = 3;
  auto late = makeComm(three);
  REQUIRE(late);
  auto joined = std::async(std::launch::async, [&] { return late->connect(); });
  REQUIRE(master->waitFor([](const MasterStats& s) { return s.pending == 1; }, 5000));
  REQUIRE(updateAll(peers).isOk());
  REQUIRE(joined.get().isOk());
  CHECK(late->topology().successor_connections == 3);
  size_t expecting_three = 0;
  for (auto& p : peers) expecting_three += p->topology().predecessor_connections == 3 ? 1 : 0;
  CHECK(expecting_three == 1);
}

TEST_CASE("cluster: a late joiner waits until every member votes", "[cluster]") {
  auto master = startMaster(fastMasterConfig());
  REQUIRE(master);
  auto cfg = fastCommConfig(master->port());
  auto peers = formRing(*master, 2, cfg);
  auto late = makeComm(cfg);
  REQUIRE(late);
  auto joining = std::async(std::launch::async, [&] { return late->connect(); });
  REQUIRE(master->waitFor([](const MasterStats& s) { return s.pending == 1; }, 5000));
  for (auto& p : peers) CHECK(*p->arePeersPending());
  // Only one of two members has voted: the joiner must still be waiting.
  auto first_vote = std::async(std::launch::async, [&] { return peers[0]->updateTopology(); });
  REQUIRE(master->waitFor([](const MasterStats& s) { return s.pending == 1 && !s.building; }, 5000));
  CHECK(joining.wait_for(std::chrono::milliseconds(200)) == std::future_status::timeout);
  CHECK(peers[1]->topology().world_size == 2);
  REQUIRE(peers[1]->updateTopology().isOk());
  REQUIRE(first_vote.get().isOk());
  REQUIRE(joining.get().isOk());
  peers.push_back(std::move(late));
  requireSameRing(peers);
}

TEST_CASE("cluster: graceful leave shrinks the ring at the next update", "[cluster]") {
  auto master = startMaster(fastMasterConfig());
  REQUIRE(master);
  auto peers = formRing(*master, 3, fastCommConfig(master->port()));
  const uint64_t epoch = peers[0]->topology().epoch;
  REQUIRE(peers[2]->leave().isOk());
  peers.pop_back();
  REQUIRE(master->waitFor([](const MasterStats& s) { return s.accepted == 2; }, 5000));
  for (auto& p : peers) CHECK(*p->arePeersPending());  // a member left: the ring is stale
  REQUIRE(updateAll(peers).isOk());
  requireSameRing(peers);
  CHECK(peers[0]->topology().epoch == epoch + 1);
  CHECK_FALSE(*peers[0]->arePeersPending());
  // Destroying a communicator also leaves gracefully.
  peers.pop_back();
  REQUIRE(master->waitFor([](const MasterStats& s) { return s.accepted == 1; }, 5000));
}

TEST_CASE("cluster: peer groups get their own rings", "[cluster]") {
  auto master = startMaster(fastMasterConfig());
  REQUIRE(master);
  auto cfg = fastCommConfig(master->port());
  std::vector<std::unique_ptr<Communicator>> peers;
  for (uint32_t g : {0u, 1u, 0u, 1u}) {
    cfg.peer_group = g;
    peers.push_back(makeComm(cfg));
  }
  REQUIRE(peers[0]->connect().isOk());
  std::vector<std::future<Status>> joins;
  for (size_t i = 1; i < 4; ++i) joins.push_back(std::async(std::launch::async, [&, i] { return peers[i]->connect(); }));
  REQUIRE(master->waitFor([](const MasterStats& s) { return s.pending == 3; }, 5000));
  REQUIRE(peers[0]->updateTopology().isOk());
  for (auto& j : joins) REQUIRE(j.get().isOk());
  for (auto& p : peers) {
    Topology t = p->topology();
    CHECK(t.world_size == 4);
    CHECK(t.group_world_size == 2);
  }
  CHECK(peers[0]->topology().group_rank != peers[2]->topology().group_rank);
  CHECK(peers[1]->topology().group_rank != peers[3]->topology().group_rank);
}

TEST_CASE("cluster: calls in the wrong state are refused with a clear error", "[cluster]") {
  auto master = startMaster(fastMasterConfig());
  REQUIRE(master);
  auto c = makeComm(fastCommConfig(master->port()));
  REQUIRE(c);
  Status s = c->updateTopology();
  CHECK(s.code() == Code::kInvalidUsage);
  CHECK_THAT(c->lastError(), Catch::Contains("idle"));
  CHECK(c->arePeersPending().status().code() == Code::kInvalidUsage);
  REQUIRE(c->connect().isOk());
  CHECK(c->connect().code() == Code::kInvalidUsage);
  REQUIRE(c->leave().isOk());
  REQUIRE(c->leave().isOk());  // idempotent
}

TEST_CASE("cluster: bad configurations are rejected at create", "[cluster]") {
  CommConfig c = fastCommConfig(1);
  c.master_address = "no-port";
  CHECK(Communicator::create(c).status().code() == Code::kInvalidArgument);
  c = fastCommConfig(1);
  c.connections_per_peer = 2000;  // 0 is valid: the links tune themselves
  CHECK(Communicator::create(c).status().code() == Code::kInvalidArgument);
  c = fastCommConfig(1);
  c.peer_timeout_ms = c.heartbeat_interval_ms;
  CHECK(Communicator::create(c).status().code() == Code::kInvalidArgument);
  c = fastCommConfig(1);
  c.listen_address = "not-an-ip:0";
  CHECK(Communicator::create(c).status().code() == Code::kInvalidArgument);
  MasterConfig m = fastMasterConfig();
  m.peer_timeout_ms = 10;
  m.heartbeat_interval_ms = 100;
  CHECK(Master::create(m).status().code() == Code::kInvalidArgument);
}

TEST_CASE("cluster: connect times out when nobody admits and can be retried", "[cluster]") {
  auto master = startMaster(fastMasterConfig());
  REQUIRE(master);
  auto cfg = fastCommConfig(master->port());
  auto member = makeComm(cfg);
  REQUIRE(member->connect().isOk());
  cfg.connect_timeout_ms = 300;
  auto late = makeComm(cfg);
  auto t0 = std::chrono::steady_clock::now();
  Status s = late->connect();
  CHECK(s.code() == Code::kTimeout);
  CHECK(secondsSince(t0) < 2.0);
  CHECK_THAT(s.message(), Catch::Contains("pcclUpdateTopology"));
  REQUIRE(master->waitFor([](const MasterStats& st) { return st.pending == 0; }, 5000));
  // Retry: this time the member admits it.
  auto joining = std::async(std::launch::async, [&] { return late->connect(); });
  REQUIRE(master->waitFor([](const MasterStats& st) { return st.pending == 1; }, 5000));
  REQUIRE(member->updateTopology().isOk());
  REQUIRE(joining.get().isOk());
  CHECK(late->topology().world_size == 2);
}

TEST_CASE("cluster: no master is a clear error", "[cluster]") {
  // Bind and close a port so nothing listens on it.
  uint16_t port;
  {
    auto m = startMaster(fastMasterConfig());
    port = m->port();
  }
  auto c = makeComm(fastCommConfig(port));
  Status s = c->connect();
  CHECK(s.code() == Code::kMasterUnreachable);
  CHECK_THAT(s.message(), Catch::Contains(std::to_string(port)));
}

TEST_CASE("cluster: a master port that never answers is MasterUnreachable within the handshake deadline",
          "[cluster]") {
  // A listener whose accept queue is full drops further SYNs, like a firewall that drops packets: the
  // TCP connect would otherwise retry for minutes.
  int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(listener >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  REQUIRE(::listen(listener, 0) == 0);
  socklen_t len = sizeof a;
  REQUIRE(::getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  std::vector<int> fillers;
  for (int i = 0; i < 4; ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    (void)::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    fillers.push_back(fd);
  }
  CommConfig cfg = fastCommConfig(ntohs(a.sin_port));
  cfg.handshake_timeout_ms = 1000;
  auto c = makeComm(cfg);
  const auto start = std::chrono::steady_clock::now();
  Status s = c->connect();
  const double took = secondsSince(start);
  CHECK(s.code() == Code::kMasterUnreachable);
  CHECK_THAT(s.message(), Catch::Contains("no answer within 1000 ms"));
  CHECK(took < 3.0);
  for (int fd : fillers) ::close(fd);
  ::close(listener);
}
