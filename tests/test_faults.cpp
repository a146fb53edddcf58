// Real failures of real processes: peers and masters killed (SIGKILL) or frozen (SIGSTOP).
// Timing settings: heartbeat 100 ms, timeout 1000 ms (test_support.hpp).
#include <catch2/catch.hpp>

#include <future>
#include <thread>

#include "test_support.hpp"

using namespace pccl;
using namespace pccl::test;

namespace {

struct Ring {
  std::unique_ptr<Master> master;
  std::vector<std::unique_ptr<Communicator>> members;  // in this process
  std::unique_ptr<ChildProcess> victim;                // a ring_member process
};

// Two in-process members plus one ring_member process, all in one ring.
Ring ringWithVictim() {
  Ring r;
  r.master = startMaster(fastMasterConfig());
  REQUIRE(r.master);
  auto cfg = fastCommConfig(r.master->port());
  for (int i = 0; i < 2; ++i) r.members.push_back(makeComm(cfg));
  REQUIRE(r.members[0]->connect().isOk());
  auto second = std::async(std::launch::async, [&] { return r.members[1]->connect(); });
  r.victim = std::make_unique<ChildProcess>(memberArgs(r.master->port(), "victim"),
                                            std::vector<std::string>{"PCCL_LOG_LEVEL=error"});
  REQUIRE(r.master->waitFor([](const MasterStats& s) { return s.pending == 2; }, 5000));
  REQUIRE(r.members[0]->updateTopology().isOk());
  REQUIRE(second.get().isOk());
  REQUIRE(r.victim->waitForLine("victim connected", 5000));
  REQUIRE(r.master->stats().accepted == 3);
  return r;
}

Status updateBoth(Ring& r) {
  auto a = std::async(std::launch::async, [&] { return r.members[0]->updateTopology(); });
  Status b = r.members[1]->updateTopology();
  Status sa = a.get();
  return sa.isOk() ? b : sa;
}

}  // namespace

TEST_CASE("faults: a SIGKILLed peer is removed and the ring re-forms without it", "[faults]") {
  Ring r = ringWithVictim();
  const uint64_t epoch = r.members[0]->topology().epoch;
  auto t0 = std::chrono::steady_clock::now();
  r.victim->signal(SIGKILL);
  REQUIRE(r.master->waitFor([](const MasterStats& s) { return s.accepted == 2; }, 5000));
  double detect = secondsSince(t0);
  WARN("SIGKILL detected after " << detect * 1000 << " ms (socket EOF)");
  CHECK(detect < 1.0);
  for (auto& m : r.members) CHECK(*m->arePeersPending());  // the others were told
  REQUIRE(updateBoth(r).isOk());
  for (auto& m : r.members) {
    CHECK(m->topology().world_size == 2);
    CHECK(m->topology().epoch == epoch + 1);
  }
}

TEST_CASE("faults: a SIGSTOPped peer is removed within the heartbeat timeout and told it was kicked on waking",
          "[faults]") {
  Ring r = ringWithVictim();
  auto t0 = std::chrono::steady_clock::now();
  REQUIRE(r.victim->freeze());
  REQUIRE(r.master->waitFor([](const MasterStats& s) { return s.accepted == 2; }, 5000));
  double detect = secondsSince(t0);
  WARN("SIGSTOP detected after " << detect * 1000 << " ms (timeout " << kTimeoutMs << " ms, limit " << silenceLimitS() << " s)");
  CHECK(detect >= silenceLimitS() * 0.9);
  CHECK(detect < silenceLimitS() + 1.0);
  REQUIRE(updateBoth(r).isOk());
  CHECK(r.members[0]->topology().world_size == 2);
  // On waking it learns it was removed and exits with status 3.
  r.victim->signal(SIGCONT);
  auto line = r.victim->waitForLine("victim error", 5000);
  REQUIRE(line);
  CHECK((line->find("kicked") != std::string::npos || line->find("master unreachable") != std::string::npos));
  CHECK(r.victim->waitExit(5000) == 3);
}

TEST_CASE("faults: a frozen peer holding up a vote is dropped and the vote completes without it",
          "[faults]") {
  Ring r = ringWithVictim();
  // Frozen before anyone votes, the victim can never vote: the members' vote waits until the master
  // drops it for missed heartbeats, then completes without it.
  REQUIRE(r.victim->freeze());
  auto t0 = std::chrono::steady_clock::now();
  REQUIRE(updateBoth(r).isOk());
  double waited = secondsSince(t0);
  CHECK(waited >= silenceLimitS() * 0.9);
  CHECK(waited < silenceLimitS() + 1.5);
  CHECK(r.members[0]->topology().world_size == 2);
  CHECK(r.members[1]->topology().world_size == 2);
}

TEST_CASE("faults: a killed master makes every peer call fail with MasterUnreachable", "[faults]") {
  ChildProcess master({PCCL_MASTER_BIN, "--listen", "127.0.0.1:0", "--heartbeat-ms", "100", "--peer-timeout-ms", "1000"},
                      {"PCCL_LOG_LEVEL=error"});
  auto line = master.waitForLine("listening on", 5000);
  REQUIRE(line);
  uint16_t port = static_cast<uint16_t>(std::stoi(line->substr(line->rfind(':') + 1)));
  auto a = makeComm(fastCommConfig(port));
  REQUIRE(a->connect().isOk());
  auto b = makeComm(fastCommConfig(port));
  auto joining = std::async(std::launch::async, [&] { return b->connect(); });
  auto t0 = std::chrono::steady_clock::now();
  master.signal(SIGKILL);
  Status sb = joining.get();
  CHECK(sb.code() == Code::kMasterUnreachable);
  Status sa = a->updateTopology();
  CHECK(sa.code() == Code::kMasterUnreachable);
  CHECK(secondsSince(t0) < 2.0);
  CHECK(a->arePeersPending().status().code() == Code::kMasterUnreachable);
  CHECK_THAT(a->lastError(), Catch::Contains("MasterUnreachable"));
}

TEST_CASE("faults: a frozen master is detected within the heartbeat timeout", "[faults]") {
  ChildProcess master({PCCL_MASTER_BIN, "--listen", "127.0.0.1:0", "--heartbeat-ms", "100", "--peer-timeout-ms", "1000"},
                      {"PCCL_LOG_LEVEL=error"});
  auto line = master.waitForLine("listening on", 5000);
  REQUIRE(line);
  uint16_t port = static_cast<uint16_t>(std::stoi(line->substr(line->rfind(':') + 1)));
  auto a = makeComm(fastCommConfig(port));
  auto b = makeComm(fastCommConfig(port));
  REQUIRE(a->connect().isOk());
  auto joining = std::async(std::launch::async, [&] { return b->connect(); });
  // b is pending: the master is busy with nothing, then it freezes.
  REQUIRE(master.freeze());
  auto t0 = std::chrono::steady_clock::now();
  Status sa = a->updateTopology();  // blocks in the vote until the master is declared dead
  double detect = secondsSince(t0);
  WARN("frozen master detected after " << detect * 1000 << " ms (timeout " << kTimeoutMs << " ms)");
  CHECK(sa.code() == Code::kMasterUnreachable);
  CHECK_THAT(sa.message(), Catch::Contains("no heartbeat"));
  CHECK(detect < silenceLimitS() + 1.0);
  CHECK(joining.get().code() == Code::kMasterUnreachable);
  // A new peer cannot get past the handshake of a frozen master either.
  auto c = makeComm(fastCommConfig(port));
  t0 = std::chrono::steady_clock::now();
  CHECK(c->connect().code() == Code::kMasterUnreachable);
  CHECK(secondsSince(t0) < 3.0);
  master.signal(SIGCONT);
}

TEST_CASE("faults: pccl-master exits cleanly on SIGTERM and rejects bad flags", "[faults]") {
  {
    ChildProcess master({PCCL_MASTER_BIN, "--listen", "127.0.0.1:0"}, {"PCCL_LOG_LEVEL=error"});
    REQUIRE(master.waitForLine("listening on", 5000));
    master.signal(SIGTERM);
    CHECK(master.waitExit(5000) == 0);
  }
  {
    ChildProcess bad({PCCL_MASTER_BIN, "--listen", "nonsense"}, {"PCCL_LOG_LEVEL=error"});
    CHECK(bad.waitExit(5000) == 2);
  }
  {
    ChildProcess bad({PCCL_MASTER_BIN, "--heartbeat-ms", "500", "--peer-timeout-ms", "100"}, {"PCCL_LOG_LEVEL=error"});
    CHECK(bad.waitExit(5000) == 2);
  }
}
