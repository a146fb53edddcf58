// Masters elected through a real etcd (docs/failover.md "Elected through etcd"): three pccl-master
// processes, one etcd on loopback, in-process peers looping verified all-reduces. Skipped (with a
// warning) where etcd is not installed.
#include <catch2/catch.hpp>

#include <optional>
#include <string>

#include "etcd_support.hpp"
#include "failover_support.hpp"
#include "tcp_relay.hpp"

using namespace pccl;
using namespace pccl::test;

namespace {

// The index of the first master whose log has a line containing `needle` (within `ms`), or -1. Waits
// on each master's log in turn, a short slice at a time.
int whoLogged(std::vector<MasterProcess>& masters, const std::string& needle, int ms, int skip = -1) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  do {
    for (size_t i = 0; i < masters.size(); ++i) {
      if (static_cast<int>(i) != skip && masters[i].proc && masters[i].logged(needle, 50)) return static_cast<int>(i);
    }
  } while (std::chrono::steady_clock::now() < deadline);
  return -1;
}

// The first line of `m`'s log containing `needle`: one already read, or the next one (within `ms`).
std::optional<std::string> lineWith(MasterProcess& m, const std::string& needle, int ms) {
  for (const auto& l : m.proc->lines()) {
    if (l.find(needle) != std::string::npos) return l;
  }
  return m.proc->waitForLine(needle, ms);
}

// A log line's time ("[HH:MM:SS.mmm pccl ..."), in ms since midnight; -1 when the line has none.
int64_t logTimeMs(const std::string& line) {
  int h = 0, m = 0, sec = 0, ms = 0;
  if (std::sscanf(line.c_str(), "[%2d:%2d:%2d.%3d", &h, &m, &sec, &ms) != 4) return -1;
  return ((h * 60 + m) * 60 + sec) * 1000 + ms;
}

// The port of "http://127.0.0.1:PORT".
uint16_t urlPort(const std::string& url) { return static_cast<uint16_t>(std::stoi(url.substr(url.rfind(':') + 1))); }

}  // namespace

TEST_CASE("etcd failover: three masters, the leader SIGKILLed, then the next one frozen past its lease: each time "
          "another takes over, and the frozen one steps down when it wakes",
          "[etcd][failover]") {
  auto etcd = startEtcd();
  if (!etcd) return;
  std::vector<MasterProcess> masters;
  std::string all;
  for (int i = 0; i < 3; ++i) {
    const uint16_t port = freePort();
    REQUIRE(port != 0);
    const std::string addr = "127.0.0.1:" + std::to_string(port);
    masters.push_back(MasterProcess::start(port, {"--advertise", addr, "--etcd", etcd->server->url(), "--etcd-prefix",
                                                  "/pccl/failover-test", "--etcd-lease-ms", "2000",
                                                  "--rebuild-window-ms", "10000"}));
    REQUIRE(masters.back().port == port);
    all += (all.empty() ? "" : ",") + addr;
  }
  const int first = whoLogged(masters, "elected leader of a new run", 15000);
  REQUIRE(first >= 0);
  auto peers = Peers::join(3, all, masters[first]);
  peers->start();
  REQUIRE(peers->waitPast(10, 30000));

  // The leader killed: another master gets the leader key once the lease runs out, takes the run over
  // (term 2) and the peers come back to it.
  masters[first].proc->signal(SIGKILL);
  REQUIRE(masters[first].proc->waitExit(5000) == 128 + SIGKILL);
  const int second = whoLogged(masters, "elected leader of run", 15000, first);
  REQUIRE(second >= 0);
  auto resumed = masters[second].proc->waitForLine("goes on at epoch", 20000);
  REQUIRE(resumed);
  CHECK(resumed->find("with 3 member(s)") != std::string::npos);
  REQUIRE(peers->waitPast(peers->slowest() + 10, 30000));

  // The new leader frozen past its lease: the third master is elected and takes the run over.
  REQUIRE(masters[second].proc->freeze());
  const int third = 3 - first - second;
  REQUIRE(masters[third].logged("elected leader of run", 20000));
  resumed = masters[third].proc->waitForLine("goes on at epoch", 20000);
  REQUIRE(resumed);
  CHECK(resumed->find("with 3 member(s)") != std::string::npos);
  REQUIRE(peers->waitPast(peers->slowest() + 10, 30000));
  // Woken up, the old leader finds its lease gone and steps down; the peers stay with the third.
  masters[second].proc->signal(SIGCONT);
  REQUIRE(masters[second].logged("etcd: stepping down", 15000));
  peers->finish(10);
  peers->checkLoops();
  REQUIRE(peers->updateAll());
  for (auto& c : peers->comms) {
    CHECK(c->stats().master_returns == 2);
    CHECK(c->topology().world_size == 3);
  }
  // The record in etcd names the leader and the run's newest term and epoch.
  auto record = etcd->client->get("/pccl/failover-test/record");
  REQUIRE(record.isOk());
  REQUIRE(record->has_value());
  CHECK((*record)->value.find(masters[third].address()) != std::string::npos);
  CHECK((*record)->value.find("\"term\":3") != std::string::npos);
}

TEST_CASE("etcd failover: a leader whose etcd goes silent stops acting at its local deadline, before another master "
          "can be elected, and the run goes on under the new leader",
          "[etcd][failover]") {
  auto etcd = startEtcd();
  if (!etcd) return;
  // The leader reaches etcd only through the relay; the follower directly.
  TcpRelay relay(urlPort(etcd->server->url()));
  const std::string prefix = "/pccl/deadline-test";
  const std::vector<std::string> common{"--etcd-prefix", prefix, "--etcd-lease-ms", "4000", "--rebuild-window-ms",
                                        "10000"};
  std::vector<MasterProcess> masters;
  std::string all;
  const std::vector<std::string> urls{"http://127.0.0.1:" + std::to_string(relay.port()), etcd->server->url()};
  for (int i = 0; i < 2; ++i) {
    const uint16_t port = freePort();
    REQUIRE(port != 0);
    const std::string addr = "127.0.0.1:" + std::to_string(port);
    std::vector<std::string> args{"--advertise", addr, "--etcd", urls[static_cast<size_t>(i)]};
    args.insert(args.end(), common.begin(), common.end());
    masters.push_back(MasterProcess::start(port, args));
    REQUIRE(masters.back().port == port);
    all += (all.empty() ? "" : ",") + addr;
    // The first one leads (it campaigns alone); the second one then follows it.
    if (i == 0) REQUIRE(masters[0].logged("elected leader of a new run", 15000));
  }
  MasterProcess& leader = masters[0];
  MasterProcess& follower = masters[1];
  auto peers = Peers::join(2, all, leader);
  peers->start();
  REQUIRE(peers->waitPast(5, 30000));

  // etcd goes silent for the leader: its keepalives, and everything else it sends, go unanswered while
  // the connection stays open.
  relay.blackhole(true);
  const auto down = lineWith(leader, "etcd: stepping down", 30000);
  REQUIRE(down);
  CHECK(down->find("local deadline") != std::string::npos);
  const auto elected = lineWith(follower, "elected leader of run", 30000);
  REQUIRE(elected);
  // The order, by the two log lines' times (one clock: both processes run on this host). The leader
  // stops at (sending time of the last keepalive etcd answered) + TTL - TTL/4; etcd cannot expire the
  // lease before that keepalive's arrival + TTL, and revokes expired leases only on its periodic check;
  // the follower then needs its next campaign (every lease/3) before it logs its election. So the leader
  // is a quarter TTL (1 s here) or more ahead: this fails only if the leader's event loop ran its timer
  // more than 1 s late, or if the step-down were still driven by a blocking call (as before the local
  // deadline, up to lease + lease/3 after the last answer, after the follower).
  INFO(*down << "\n" << *elected);
  const int64_t t_down = logTimeMs(*down);
  int64_t t_elected = logTimeMs(*elected);
  REQUIRE(t_down >= 0);
  REQUIRE(t_elected >= 0);
  if (t_elected + 12 * 3600 * 1000 < t_down) t_elected += 24 * 3600 * 1000;  // midnight between the two
  CHECK(t_down < t_elected);

  // The peers, dropped by the old leader, come back to the new one, which takes the run over.
  const auto resumed = follower.proc->waitForLine("goes on at epoch", 30000);
  REQUIRE(resumed);
  CHECK(resumed->find("with 2 member(s)") != std::string::npos);
  REQUIRE(peers->waitPast(peers->slowest() + 5, 30000));
  peers->finish(5);
  peers->checkLoops();
  for (auto& c : peers->comms) CHECK(c->stats().master_returns == 1);
  auto record = etcd->client->get(prefix + "/record");
  REQUIRE(record.isOk());
  REQUIRE(record->has_value());
  CHECK((*record)->value.find(follower.address()) != std::string::npos);
  CHECK((*record)->value.find("\"term\":2") != std::string::npos);
}

TEST_CASE("etcd failover: a write of the run's record whose answer is lost is adopted as the leader's own, not taken "
          "for another master's",
          "[etcd][failover]") {
  auto etcd = startEtcd();
  if (!etcd) return;
  TcpRelay relay(urlPort(etcd->server->url()));
  const std::string prefix = "/pccl/lost-answer-test";
  const uint16_t port = freePort();
  REQUIRE(port != 0);
  const std::string addr = "127.0.0.1:" + std::to_string(port);
  MasterProcess leader =
      MasterProcess::start(port, {"--advertise", addr, "--etcd", "http://127.0.0.1:" + std::to_string(relay.port()),
                                  "--etcd-prefix", prefix, "--etcd-lease-ms", "4000"});
  REQUIRE(leader.port == port);
  REQUIRE(leader.logged("elected leader of a new run", 15000));
  // The next record write (the new run's first, or the one for the peers' ring) reaches etcd and is
  // applied, but its answer never comes back: the leader's connection closes first. Its HTTP client
  // sends it again on a fresh connection, where the compare on the old revision fails on the leader's
  // own record.
  relay.dropAnswerTo("/v3/kv/txn");
  auto peers = Peers::join(2, addr, leader);
  REQUIRE(relay.waitAnswerDropped(20000));
  const auto adopted = lineWith(leader, "its answer was lost", 20000);
  std::string log;
  for (const auto& l : leader.proc->lines()) log += l + "\n";
  INFO(log);
  REQUIRE(adopted);
  const size_t at = adopted->rfind("written again at revision ");
  REQUIRE(at != std::string::npos);
  const int64_t rewritten = std::stoll(adopted->substr(at + std::string("written again at revision ").size()));

  // Still the leader: the run goes on, the record is its own.
  peers->start();
  REQUIRE(peers->waitPast(5, 30000));
  peers->finish(2);
  peers->checkLoops();
  auto record = etcd->client->get(prefix + "/record");
  REQUIRE(record.isOk());
  REQUIRE(record->has_value());
  CHECK((*record)->mod_revision >= rewritten);
  CHECK((*record)->value.find(addr) != std::string::npos);
  CHECK((*record)->value.find("\"term\":1") != std::string::npos);
  leader.proc->signal(SIGUSR1);
  const auto status = lineWith(leader, "pccl-master status:", 10000);
  REQUIRE(status);
  CHECK(status->find("role=leader") != std::string::npos);
  CHECK(status->find("step_downs=0") != std::string::npos);
  for (const auto& l : leader.proc->lines()) CHECK(l.find("stepping down") == std::string::npos);
}
