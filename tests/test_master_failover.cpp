// The run survives its master (docs/concepts.md "When the master dies"): real pccl-master processes
// killed (SIGKILL), frozen (SIGSTOP) and restarted, in-process peers that loop verified all-reduces
// through it. Timing settings: heartbeat 100 ms, peer timeout 1000 ms (test_support.hpp).
#include <catch2/catch.hpp>

#include "failover_support.hpp"

using namespace pccl;
using namespace pccl::test;

TEST_CASE("failover: the master SIGKILLed under 4 looping peers and restarted in place: the run goes on",
          "[failover]") {
  TempDir dir;
  REQUIRE(!dir.path.empty());
  const std::string state = dir.path + "/master.state";
  MasterProcess m = MasterProcess::start(0, {"--state-file", state, "--rebuild-window-ms", "10000"});
  REQUIRE(m.port != 0);
  auto peers = Peers::join(4, m.address(), m);
  const uint64_t epoch = peers->comms[0]->topology().epoch;
  peers->start();
  REQUIRE(peers->waitPast(20, 30000));
  m.proc->signal(SIGKILL);
  REQUIRE(m.proc->waitExit(5000) == 128 + SIGKILL);
  // Without a master the ring goes on: every loop gets further.
  const uint64_t at_kill = peers->slowest();
  REQUIRE(peers->waitPast(at_kill + 20, 30000));
  MasterProcess again = MasterProcess::start(m.port, {"--state-file", state, "--rebuild-window-ms", "10000"});
  REQUIRE(again.port == m.port);
  REQUIRE(again.logged("restarted (state file", 5000));
  // Every member of the last ring comes back: the run goes on at once, nothing stale.
  auto resumed = again.proc->waitForLine("goes on at epoch", 15000);
  REQUIRE(resumed);
  CHECK(resumed->find("with 4 member(s)") != std::string::npos);
  CHECK(resumed->find("stale") == std::string::npos);
  REQUIRE(peers->waitPast(peers->slowest() + 20, 30000));
  peers->finish(20);
  peers->checkLoops();
  for (auto& c : peers->comms) {
    CHECK(c->topology().epoch == epoch);  // the same ring throughout
    CHECK(c->stats().master_losses == 1);
    CHECK(c->stats().master_returns == 1);
    auto pending = c->arePeersPending();
    REQUIRE(pending.isOk());
    CHECK(!*pending);
  }
  // The new master leads the run: a vote builds the next ring, and it carries all-reduces.
  REQUIRE(peers->updateAll());
  for (auto& c : peers->comms) CHECK(c->topology().epoch == epoch + 1);
  peers->start();
  peers->finish(5);
  peers->checkLoops();
}

TEST_CASE("failover: a standby master at a second address takes the run over when the first is killed",
          "[failover]") {
  MasterProcess a = MasterProcess::start(0);
  MasterProcess b = MasterProcess::start(0, {"--standby", "--rebuild-window-ms", "10000"});
  REQUIRE(a.port != 0);
  REQUIRE(b.port != 0);
  auto peers = Peers::join(3, a.address() + "," + b.address(), a);
  peers->start();
  REQUIRE(peers->waitPast(10, 30000));
  a.proc->signal(SIGKILL);
  REQUIRE(b.proc->waitForLine("taking it back", 15000));
  auto resumed = b.proc->waitForLine("goes on at epoch", 15000);
  REQUIRE(resumed);
  CHECK(resumed->find("with 3 member(s)") != std::string::npos);
  REQUIRE(peers->waitPast(peers->slowest() + 10, 30000));
  peers->finish(10);
  peers->checkLoops();
  // A newcomer given both addresses skips the dead one and joins the standby's run.
  auto late = makeComm(failoverConfig(a.address() + "," + b.address()));
  auto joining = std::async(std::launch::async, [&] { return late->connect(); });
  REQUIRE(b.logged("pending admission", 15000));
  REQUIRE(peers->updateAll());
  REQUIRE(joining.get().isOk());
  CHECK(late->topology().world_size == 4);
}

TEST_CASE("failover: with no master to come back to, peers give up after master_reconnect_ms",
          "[failover]") {
  MasterProcess m = MasterProcess::start(0);
  REQUIRE(m.port != 0);
  CommConfig cfg = failoverConfig(m.address());
  cfg.master_reconnect_ms = 1500;
  auto a = makeComm(cfg);
  REQUIRE(a->connect().isOk());
  m.proc->signal(SIGKILL);
  const auto t0 = std::chrono::steady_clock::now();
  // Meanwhile the peer is alone in its ring: its all-reduces still complete.
  std::vector<float> x(16, 1.0f);
  REQUIRE(a->allReduce(x.data(), x.data(), x.size(), DataType::kFloat32, RedOp::kSum).isOk());
  // A vote needs the master: it waits for it, and fails with MasterUnreachable once the peer gives up.
  Status s = a->updateTopology();
  CHECK(s.code() == Code::kMasterUnreachable);
  CHECK_THAT(s.message(), Catch::Contains("master_reconnect_ms"));
  const double waited = secondsSince(t0);
  CHECK(waited >= 1.0);
  CHECK(waited < 10.0);
  CHECK(a->allReduce(x.data(), x.data(), x.size(), DataType::kFloat32, RedOp::kSum).status().code() ==
        Code::kMasterUnreachable);
}

TEST_CASE("failover: a frozen master is replaced by the standby, and resumed it steps down and newcomers skip it",
          "[failover]") {
  MasterProcess a = MasterProcess::start(0);
  MasterProcess b = MasterProcess::start(0, {"--standby"});
  REQUIRE(a.port != 0);
  REQUIRE(b.port != 0);
  const std::string both = a.address() + "," + b.address();
  auto peers = Peers::join(3, both, a);
  peers->start();
  REQUIRE(peers->waitPast(10, 30000));
  REQUIRE(a.proc->freeze());
  // Past the peer timeout every peer gives up on the frozen master, finds it does not answer a new
  // handshake either, and goes to the standby.
  REQUIRE(b.logged("taking it back", 20000));
  auto resumed = b.proc->waitForLine("goes on at epoch", 20000);
  REQUIRE(resumed);
  CHECK(resumed->find("with 3 member(s)") != std::string::npos);
  REQUIRE(peers->waitPast(peers->slowest() + 10, 30000));
  // Resumed, the old master finds every member gone without a Leave: it steps down (no split brain: it
  // starts nothing while a newcomer can find another master).
  a.proc->signal(SIGCONT);
  REQUIRE(a.logged("stepping down to standby", 10000));
  auto late = makeComm(failoverConfig(both));
  auto joining = std::async(std::launch::async, [&] { return late->connect(); });
  REQUIRE(a.logged("refusing", 10000));
  REQUIRE(b.logged("pending admission", 10000));
  peers->finish(5);
  peers->checkLoops();
  REQUIRE(peers->updateAll());
  REQUIRE(joining.get().isOk());
  CHECK(late->topology().world_size == 4);
  peers->comms.push_back(std::move(late));
  peers->start();
  peers->finish(5);
  peers->checkLoops();
}

TEST_CASE("failover: while the master is away a member dies and a newcomer knocks, the restarted master goes on "
          "without the dead one and admits the newcomer",
          "[failover]") {
  TempDir dir;
  REQUIRE(!dir.path.empty());
  const std::string state = dir.path + "/master.state";
  const std::vector<std::string> opts{"--state-file", state, "--rebuild-window-ms", "2000"};
  MasterProcess m = MasterProcess::start(0, opts);
  REQUIRE(m.port != 0);
  auto peers = Peers::join(3, m.address(), m);
  ChildProcess victim(memberArgs(m.port, "victim"), {"PCCL_LOG_LEVEL=error", "PCCL_RECONNECT_MS=20000"});
  REQUIRE(m.loggedTimes("pending admission", 4, 10000));  // the three peers, then the victim
  REQUIRE(peers->updateAll());  // the victim votes from its own loop
  REQUIRE(victim.waitForLine("victim connected", 10000));
  for (auto& c : peers->comms) REQUIRE(c->topology().world_size == 4);
  const uint64_t epoch = peers->comms[0]->topology().epoch;

  m.proc->signal(SIGKILL);
  REQUIRE(m.proc->waitExit(5000) == 128 + SIGKILL);
  victim.signal(SIGKILL);
  REQUIRE(victim.waitExit(5000) == 128 + SIGKILL);
  auto late = makeComm(failoverConfig(m.address()));
  auto joining = std::async(std::launch::async, [&] { return late->connect(); });
  // An all-reduce under way meets the dead member: PeerLost, input intact; the vote that repairs the ring
  // waits for a master.
  std::vector<std::future<Status>> retried;
  for (auto& c : peers->comms) {
    retried.push_back(std::async(std::launch::async, [&c] {
      std::vector<float> in(kCount, 1.0f), out(kCount, 0.0f);
      auto r = c->allReduce(in.data(), out.data(), kCount, DataType::kFloat32, RedOp::kSum);
      if (r.isOk()) return Status::internal("an all-reduce with a dead member succeeded");
      if (r.status().code() != Code::kPeerLost) return r.status();
      for (float v : in) {
        if (v != 1.0f) return Status::internal("the input changed");
      }
      return c->updateTopology();
    }));
  }
  MasterProcess again = MasterProcess::start(m.port, opts);
  REQUIRE(again.port == m.port);
  auto resumed = again.proc->waitForLine("goes on at epoch", 15000);
  REQUIRE(resumed);
  CHECK(resumed->find("with 3 member(s)") != std::string::npos);
  CHECK(resumed->find("did not come back") != std::string::npos);
  for (auto& f : retried) CHECK(f.get().isOk());
  for (auto& c : peers->comms) {
    CHECK(c->topology().epoch > epoch);
    CHECK(c->stats().master_returns == 1);
  }
  // The newcomer joined the restarted master meanwhile (pending): the next vote admits it, if the last
  // one did not already.
  for (int round = 0; round < 5 && peers->comms[0]->topology().world_size != 4; ++round) {
    REQUIRE(again.logged("pending admission", 15000));
    REQUIRE(peers->updateAll());
  }
  REQUIRE(joining.get().isOk());
  CHECK(late->topology().world_size == 4);
  peers->comms.push_back(std::move(late));
  peers->start();
  peers->finish(10);
  peers->checkLoops();
}
