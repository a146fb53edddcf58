// Which run a master leads and how it takes one back (src/master/run_recovery.*): the decisions for
// every kind of JoinRequest and role, the end of a rebuild, and the state file. Pure logic, no sockets.
#include <catch2/catch.hpp>

#include <stdlib.h>
#include <unistd.h>

#include <fstream>

#include "master/run_recovery.hpp"

using namespace pccl;
using namespace pccl::master;
using Verdict = RunRecovery::Verdict;

namespace {

wire::Uuid id(uint8_t v) {
  wire::Uuid u{};
  u.fill(v);
  return u;
}

wire::JoinRequest resume(const wire::Uuid& run, uint64_t term, uint8_t peer, uint64_t epoch,
                         std::vector<wire::Uuid> ring, bool ring_up = true) {
  wire::JoinRequest m;
  m.resume_flags = static_cast<uint8_t>(wire::JoinRequest::kResuming | (ring_up ? wire::JoinRequest::kRingUp : 0));
  m.run_id = run;
  m.term = term;
  m.peer_id = id(peer);
  m.epoch = epoch;
  m.ring = std::move(ring);
  return m;
}

wire::MemberInfo member(uint8_t peer) {
  wire::MemberInfo i;
  i.id = id(peer);
  i.host = "127.0.0.1";
  i.port = static_cast<uint16_t>(40000 + peer);
  return i;
}

}  // namespace

TEST_CASE("run recovery: a fresh master leads a new run, a standby refuses newcomers unless none will take them") {
  const TimePoint now = Clock::now();
  RunRecovery fresh(false, std::nullopt, Millis(1000), now);
  CHECK(fresh.role() == MasterRole::kLeader);
  CHECK(fresh.run().term == 1);
  CHECK(fresh.run().run_id != wire::Uuid{});
  CHECK(fresh.decide(wire::JoinRequest{}, 0).verdict == Verdict::kJoin);

  RunRecovery standby(true, std::nullopt, Millis(1000), now);
  CHECK(standby.role() == MasterRole::kStandby);
  auto d = standby.decide(wire::JoinRequest{}, 0);
  CHECK(d.verdict == Verdict::kRefuse);
  CHECK(d.code == Code::kMasterUnreachable);
  CHECK_THAT(d.reason, Catch::Contains("standby"));
  wire::JoinRequest last_resort;
  last_resort.resume_flags = wire::JoinRequest::kAnyMaster;
  CHECK(standby.decide(last_resort, 0).verdict == Verdict::kJoin);
  standby.lead();
  CHECK(standby.role() == MasterRole::kLeader);
  CHECK(standby.run().term == 1);
}

TEST_CASE("run recovery: an empty master takes a returning run over under a higher term and waits for its ring") {
  const TimePoint now = Clock::now();
  RunRecovery r(true, std::nullopt, Millis(5000), now);
  const wire::Uuid run = id(9);
  const std::vector<wire::Uuid> ring{id(1), id(2), id(3)};
  const auto first = resume(run, 4, 1, 12, ring);
  CHECK(r.decide(first, 0).verdict == Verdict::kAdopt);
  r.adopt(first, now);
  CHECK(r.role() == MasterRole::kRecovering);
  CHECK(r.run().run_id == run);
  CHECK(r.run().term == 5);
  r.noteReturn(member(1), first);
  CHECK(!r.due(now));
  // The others of the ring come back (their term is lower than the new one: taken back).
  for (uint8_t p : {uint8_t{2}, uint8_t{3}}) {
    const auto m = resume(run, 4, p, 12, ring);
    REQUIRE(r.decide(m, size_t{p} - 1).verdict == Verdict::kResume);
    r.noteReturn(member(p), m);
  }
  CHECK(r.due(now));  // everyone is back: no need to wait for the window
  const auto rebuild = r.finish();
  CHECK(!rebuild.stale);
  CHECK(rebuild.epoch == 12);
  REQUIRE(rebuild.ring.size() == 3);
  for (size_t i = 0; i < 3; ++i) CHECK(rebuild.ring[i].id == ring[i]);  // the same order
  CHECK(r.role() == MasterRole::kLeader);
}

TEST_CASE("run recovery: a member missing at the window's end, or back without the ring, makes the run stale") {
  const TimePoint now = Clock::now();
  RunRecovery r(true, std::nullopt, Millis(1000), now);
  const wire::Uuid run = id(7);
  const std::vector<wire::Uuid> ring{id(1), id(2), id(3)};
  const auto a = resume(run, 1, 1, 4, ring);
  r.adopt(a, now);
  r.noteReturn(member(1), a);
  const auto b = resume(run, 1, 2, 4, ring, /*ring_up=*/false);
  r.noteReturn(member(2), b);
  CHECK(!r.due(now + Millis(999)));
  CHECK(r.due(now + Millis(1001)));
  const auto rebuild = r.finish();
  CHECK(rebuild.stale);
  CHECK(rebuild.ring.size() == 2);
  CHECK_THAT(rebuild.why, Catch::Contains("did not come back") && Catch::Contains("without the ring"));
}

TEST_CASE("run recovery: another run is refused, a newer term of our run makes the master step aside") {
  const TimePoint now = Clock::now();
  RunRecovery r(false, std::nullopt, Millis(1000), now);
  const wire::Uuid ours = r.run().run_id;
  auto other = r.decide(resume(id(42), 1, 1, 3, {id(1)}), 2);
  CHECK(other.verdict == Verdict::kRefuse);
  CHECK_THAT(other.reason, Catch::Contains("not run"));
  CHECK(r.decide(resume(ours, 1, 1, 3, {id(1)}), 2).verdict == Verdict::kResume);
  auto newer = r.decide(resume(ours, 5, 1, 3, {id(1)}), 2);
  CHECK(newer.verdict == Verdict::kSupersede);
  CHECK_THAT(newer.reason, Catch::Contains("newer master"));
  // Holding no peers, a master takes any run that comes back (there is nothing to keep).
  CHECK(r.decide(resume(id(42), 1, 1, 3, {id(1)}), 0).verdict == Verdict::kAdopt);
}

TEST_CASE("run recovery: under etcd a follower refuses everyone and a leader only takes its recorded run") {
  const TimePoint now = Clock::now();
  RunRecovery r(true, std::nullopt, Millis(1000), now);
  r.follow("10.0.0.2:48148");
  auto d = r.decide(wire::JoinRequest{}, 0);
  CHECK(d.verdict == Verdict::kRefuse);
  CHECK_THAT(d.reason, Catch::Contains("10.0.0.2:48148"));
  RunRecord rec;
  rec.run_id = id(3);
  rec.term = 7;
  rec.epoch = 20;
  r.elect(rec, now);
  CHECK(r.role() == MasterRole::kRecovering);
  CHECK(r.decide(resume(id(3), 6, 1, 20, {id(1)}), 0).verdict == Verdict::kResume);
  CHECK(r.decide(resume(id(4), 6, 1, 20, {id(1)}), 0).verdict == Verdict::kRefuse);   // another run
  CHECK(r.decide(resume(id(3), 8, 1, 20, {id(1)}), 0).verdict == Verdict::kRefuse);   // a newer leader exists
  RunRecovery fresh(true, std::nullopt, Millis(1000), now);
  fresh.elect(RunRecord{}, now);  // nothing recorded yet: a new run
  CHECK(fresh.role() == MasterRole::kLeader);
  CHECK(fresh.run().run_id != wire::Uuid{});
}

TEST_CASE("run recovery: the state file round trip, a restarted master waits and continues the epochs") {
  char dir_tmpl[] = "/tmp/pccl-runrec-XXXXXX";
  REQUIRE(mkdtemp(dir_tmpl) != nullptr);
  const std::string path = std::string(dir_tmpl) + "/state";
  auto none = readRunRecord(path);
  REQUIRE(none.isOk());
  CHECK(!none->has_value());
  RunRecord rec;
  rec.run_id = id(0xab);
  rec.term = 3;
  rec.epoch = 17;
  REQUIRE(writeRunRecord(path, rec).isOk());
  auto back = readRunRecord(path);
  REQUIRE(back.isOk());
  REQUIRE(back->has_value());
  CHECK((*back)->run_id == rec.run_id);
  CHECK((*back)->term == 3);
  CHECK((*back)->epoch == 17);

  const TimePoint now = Clock::now();
  RunRecovery restarted(false, *back, Millis(2000), now);
  CHECK(restarted.role() == MasterRole::kRecovering);
  CHECK(restarted.run().term == 4);
  CHECK(restarted.decide(wire::JoinRequest{}, 0).verdict == Verdict::kJoin);  // a newcomer waits, pending
  CHECK(restarted.due(now + Millis(2001)));
  const auto rebuild = restarted.finish();  // nobody came back: the run starts over above the old epochs
  CHECK(rebuild.epoch == 17);
  CHECK(rebuild.ring.empty());

  {
    std::ofstream bad(path);
    bad << "something else\n";
  }
  auto broken = readRunRecord(path);
  CHECK(broken.status().code() == Code::kInvalidArgument);
  CHECK_THAT(broken.status().message(), Catch::Contains("not a pccl run record"));
  std::system(("rm -rf '" + std::string(dir_tmpl) + "'").c_str());
}

TEST_CASE("run recovery: the state file is written (and its directory synced) also by a path without a directory") {
  char dir_tmpl[] = "/tmp/pccl-runrec-XXXXXX";
  REQUIRE(mkdtemp(dir_tmpl) != nullptr);
  char old_cwd[4096];
  REQUIRE(getcwd(old_cwd, sizeof old_cwd) != nullptr);
  REQUIRE(chdir(dir_tmpl) == 0);
  RunRecord rec;
  rec.run_id = id(0x5a);
  rec.term = 2;
  rec.epoch = 9;
  const Status wrote = writeRunRecord("state", rec);  // the directory to sync is "."
  REQUIRE(chdir(old_cwd) == 0);
  INFO(wrote.toString());
  REQUIRE(wrote.isOk());
  auto back = readRunRecord(std::string(dir_tmpl) + "/state");
  REQUIRE(back.isOk());
  REQUIRE(back->has_value());
  CHECK((*back)->epoch == 9);
  CHECK(access((std::string(dir_tmpl) + "/state.tmp").c_str(), F_OK) != 0);  // renamed, not left behind
  std::system(("rm -rf '" + std::string(dir_tmpl) + "'").c_str());
}
