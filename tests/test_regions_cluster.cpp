// Regions on real rings (docs/algorithms.md "Regions"): declared regions reach every peer identically
// per epoch, change with a departure and a newcomer at the next epoch, survive a restarted master;
// regions detected from links measured on loopback; bad names refused at create. A pccl-master process
// (its log read) or an in-process master; peers in this process.
#include <catch2/catch.hpp>

#include <stdlib.h>

#include <map>

#include "failover_support.hpp"

using namespace pccl;
using namespace pccl::test;

namespace {

// Every peer holds the same ring, and each member's region is `expected[its id]`.
void checkRegions(const std::vector<Communicator*>& comms, const std::map<PeerId, std::string>& expected) {
  const Topology first = comms[0]->topology();
  for (const Communicator* c : comms) {
    const Topology t = c->topology();
    INFO("peer " << formatPeerId(c->id()) << " epoch " << t.epoch);
    CHECK(t.epoch == first.epoch);
    REQUIRE(t.ring.size() == expected.size());
    for (size_t i = 0; i < t.ring.size(); ++i) {
      INFO("ring member " << i);
      CHECK(t.ring[i].id == first.ring[i].id);
      REQUIRE(expected.count(t.ring[i].id) == 1);
      CHECK(t.ring[i].region == expected.at(t.ring[i].id));
    }
  }
}

std::vector<Communicator*> raw(const std::vector<std::unique_ptr<Communicator>>& comms) {
  std::vector<Communicator*> out;
  for (const auto& c : comms) {
    if (c) out.push_back(c.get());
  }
  return out;
}

}  // namespace

TEST_CASE("regions: 5 peers in 3 declared regions read the same regions, and a departure, a newcomer and a "
          "restarted master keep them right",
          "[regions]") {
  TempDir dir;
  REQUIRE(!dir.path.empty());
  const std::vector<std::string> opts = {"--state-file", dir.path + "/master.state", "--rebuild-window-ms", "10000"};
  MasterProcess m = MasterProcess::start(0, opts);
  REQUIRE(m.port != 0);
  const std::vector<std::string> declared = {"eu-west", "eu-west", "us-east", "us-east", "ap-south"};
  std::vector<std::unique_ptr<Communicator>> comms;
  std::map<PeerId, std::string> expected;
  for (const std::string& region : declared) {
    CommConfig c = failoverConfig(m.address());
    c.region = region;
    comms.push_back(makeComm(c));
    REQUIRE(comms.back());
  }
  REQUIRE(comms[0]->connect().isOk());
  std::vector<std::future<Status>> joins;
  for (size_t i = 1; i < comms.size(); ++i) {
    joins.push_back(std::async(std::launch::async, [&, i] { return comms[i]->connect(); }));
  }
  REQUIRE(m.loggedTimes("pending admission", comms.size(), 20000));
  REQUIRE(comms[0]->updateTopology().isOk());
  for (auto& j : joins) REQUIRE(j.get().isOk());
  for (size_t i = 0; i < comms.size(); ++i) expected[comms[i]->id()] = declared[i];  // ids come with the join
  checkRegions(raw(comms), expected);
  CHECK(m.logged("regions: ap-south (1), eu-west (2), us-east (2) (as declared)", 5000));

  // A us-east peer leaves, a sa-east peer joins: the next epoch has them.
  REQUIRE(comms[3]->leave().isOk());
  expected.erase(comms[3]->id());
  comms[3].reset();
  CommConfig nc = failoverConfig(m.address());
  nc.region = "sa-east";
  comms.push_back(makeComm(nc));
  REQUIRE(comms.back());
  auto joining = std::async(std::launch::async, [&] { return comms.back()->connect(); });
  REQUIRE(m.loggedTimes("pending admission", 6, 20000));
  std::vector<std::future<Status>> votes;
  for (size_t i = 0; i < 5; ++i) {
    if (comms[i]) votes.push_back(std::async(std::launch::async, [&, i] { return comms[i]->updateTopology(); }));
  }
  for (auto& v : votes) REQUIRE(v.get().isOk());
  REQUIRE(joining.get().isOk());
  expected[comms.back()->id()] = "sa-east";
  checkRegions(raw(comms), expected);
  CHECK(m.logged("regions: ap-south (1), eu-west (2), sa-east (1), us-east (1) (as declared)", 5000));
  const uint64_t epoch = comms[0]->topology().epoch;

  // The master dies and comes back from its state file: it takes the run back with the regions its
  // members hold, and the next ring has them too (declared again in every member's JoinRequest).
  m.proc->signal(SIGKILL);
  REQUIRE(m.proc->waitExit(5000) == 128 + SIGKILL);
  MasterProcess again = MasterProcess::start(m.port, opts);
  REQUIRE(again.port == m.port);
  auto resumed = again.proc->waitForLine("goes on at epoch", 20000);
  REQUIRE(resumed);
  CHECK(resumed->find("with 5 member(s)") != std::string::npos);
  CHECK(again.logged("regions: ap-south (1), eu-west (2), sa-east (1), us-east (1) (taken back)", 5000));
  checkRegions(raw(comms), expected);
  votes.clear();
  for (auto& c : comms) {
    if (c) votes.push_back(std::async(std::launch::async, [&c] { return c->updateTopology(); }));
  }
  for (auto& v : votes) REQUIRE(v.get().isOk());
  CHECK(comms[0]->topology().epoch == epoch + 1);
  checkRegions(raw(comms), expected);
}

TEST_CASE("regions: after optimizeTopology on loopback every undeclared peer is placed, the same on every peer",
          "[regions]") {
  std::vector<CommConfig> configs(3, fastCommConfig(0));
  configs[2].region = "lab";
  LocalCluster c = startCluster(configs);
  REQUIRE(c.master);
  // No links measured yet: the undeclared peers are in the unnamed region.
  std::map<PeerId, std::string> expected;
  for (size_t i = 0; i < 3; ++i) expected[c.peers[i]->id()] = configs[i].region;
  checkRegions(raw(c.peers), expected);
  std::vector<Status> st(3);
  c.onEach([&](size_t i) { st[i] = c.peers[i]->optimizeTopology(); });
  for (const Status& s : st) REQUIRE(s.isOk());
  // Which region the links put them in depends on the round trips measured (one LAN here, unless the
  // machine is very loaded); that every peer is placed, and identically everywhere, does not.
  const Topology t = c.peers[0]->topology();
  for (const RingMember& r : t.ring) {
    if (r.id == c.peers[2]->id()) {
      CHECK(r.region == "lab");
    } else {
      CHECK(!r.region.empty());
    }
    expected[r.id] = r.region;
  }
  checkRegions(raw(c.peers), expected);
}

TEST_CASE("regions: bad region names are refused at create, and PCCL_REGION fills an empty one", "[regions]") {
  CommConfig c = fastCommConfig(1);
  for (const std::string& bad : {std::string(65, 'r'), std::string("eu west"), std::string("eu/west"),
                                 std::string("r\xC3\xA9gion"), std::string("a\nb"), std::string("auto-0")}) {
    c.region = bad;
    auto r = Communicator::create(c);
    INFO("region '" << bad << "'");
    REQUIRE_FALSE(r.isOk());
    CHECK(r.status().code() == Code::kInvalidArgument);
    CHECK_THAT(r.status().message(), Catch::Contains("region"));
  }
  c.region = std::string(64, 'r');
  CHECK(Communicator::create(c).isOk());
  c.region = "A-z_0.9";
  CHECK(Communicator::create(c).isOk());
  // The environment: used when the config leaves region empty, checked the same way.
  c.region.clear();
  REQUIRE(setenv("PCCL_REGION", "bad region", 1) == 0);
  auto r = Communicator::create(c);
  CHECK(r.status().code() == Code::kInvalidArgument);
  CHECK_THAT(r.status().message(), Catch::Contains("PCCL_REGION='bad region'"));
  c.region = "from-config";  // the config wins over the environment
  CHECK(Communicator::create(c).isOk());
  REQUIRE(setenv("PCCL_REGION", "from-env", 1) == 0);
  c.region.clear();
  MasterConfig mc = fastMasterConfig();
  auto master = startMaster(mc);
  REQUIRE(master);
  c = fastCommConfig(master->port());
  auto comm = makeComm(c);
  unsetenv("PCCL_REGION");
  REQUIRE(comm);
  REQUIRE(comm->connect().isOk());
  REQUIRE(comm->topology().ring.size() == 1);
  CHECK(comm->topology().ring[0].region == "from-env");
}
