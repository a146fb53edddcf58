// Masters elected through a real etcd (docs/failover.md "Elected through etcd"): three pccl-master
// processes, one etcd on loopback, in-process peers looping verified all-reduces. Skipped (with a
// warning) where etcd is not installed.
#include <catch2/catch.hpp>

#include "etcd_support.hpp"
#include "failover_support.hpp"

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
