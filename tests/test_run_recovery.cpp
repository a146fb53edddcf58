// Which run a master leads and how it takes one back (src/master/run_recovery.*): the decisions for
// every kind of JoinRequest and role, the end of a rebuild, and the state file. Pure logic, no sockets.
#include <catch2/catch.hpp>

#include <stdlib.h>
#include <unistd.h>

#include <fstream>

#include "master/etcd_leadership.hpp"
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

namespace {
wire::SignKey keyOf(uint8_t v) {
  wire::SignKey k{};
  k.fill(v);
  return k;
}
}  // namespace

TEST_CASE("run recovery: the record keeps the members' ring keys (state file version 2, version 1 still read)") {
  char dir_tmpl[] = "/tmp/pccl-runrec-XXXXXX";
  REQUIRE(mkdtemp(dir_tmpl) != nullptr);
  const std::string path = std::string(dir_tmpl) + "/state";
  RunRecord rec;
  rec.run_id = id(0xcd);
  rec.term = 5;
  rec.epoch = 9;
  rec.keys[id(1)] = keyOf(0x11);
  rec.keys[id(2)] = keyOf(0x22);
  REQUIRE(writeRunRecord(path, rec).isOk());
  auto back = readRunRecord(path);
  REQUIRE(back.isOk());
  REQUIRE(back->has_value());
  CHECK((*back)->keys == rec.keys);
  {
    std::ofstream v1(path);
    v1 << "pccl-run 1\nrun_id " << uuidHex(rec.run_id) << "\nterm 5\nepoch 9\n";
  }
  auto old = readRunRecord(path);
  REQUIRE(old.isOk());
  CHECK((*old)->term == 5);
  CHECK((*old)->keys.empty());
  for (const std::string& bad : {std::string("pccl-run 2\nrun_id ") + uuidHex(rec.run_id) + "\nterm 5\nepoch 9\nmember xyz 00\n",
                                 std::string("pccl-run 2\nrun_id ") + uuidHex(rec.run_id) + "\nterm 4611686018427387904\nepoch 9\n"}) {
    {
      std::ofstream f(path);
      f << bad;
    }
    auto r = readRunRecord(path);
    INFO(bad);
    CHECK(r.status().code() == Code::kInvalidArgument);
  }
  std::system(("rm -rf '" + std::string(dir_tmpl) + "'").c_str());
}

TEST_CASE("run recovery: a resume must match the member's known key, unknown ids are pinned while recovering, terms "
          "stay below 2^62") {
  const TimePoint now = Clock::now();
  RunRecord stored;
  stored.run_id = id(0x70);
  stored.term = 2;
  stored.epoch = 4;
  stored.keys[id(1)] = keyOf(0x11);
  RunRecovery r(false, stored, Millis(5000), now);
  REQUIRE(r.role() == MasterRole::kRecovering);
  wire::JoinRequest good = resume(stored.run_id, 2, 1, 4, {id(1), id(2)});
  good.ring_key = keyOf(0x11);
  CHECK(r.proveMember(good).isOk());
  wire::JoinRequest impostor = good;
  impostor.ring_key = keyOf(0x66);
  const Status refused = r.proveMember(impostor);
  CHECK(refused.code() == Code::kAuthFailed);
  CHECK_THAT(refused.message(), Catch::Contains("not the member's"));
  // Member 2 is not on record: its first proof pins its key.
  wire::JoinRequest second = resume(stored.run_id, 2, 2, 4, {id(1), id(2)});
  second.ring_key = keyOf(0x22);
  const uint64_t before = r.changes();
  CHECK(r.proveMember(second).isOk());
  CHECK(r.changes() > before);  // persisted with the record
  CHECK(r.knows(id(2)));
  second.ring_key = keyOf(0x23);
  CHECK(r.proveMember(second).code() == Code::kAuthFailed);
  // While recovering the leader's view only adds keys; once leading, the record follows the members.
  r.setMembers({{id(3), keyOf(0x33)}});
  CHECK(r.knows(id(1)));
  CHECK(r.knows(id(3)));
  (void)r.finish();
  r.setMembers({{id(3), keyOf(0x33)}});
  CHECK_FALSE(r.knows(id(1)));
  CHECK(r.run().keys.size() == 1);

  // A term no master could go above is refused before anything else.
  RunRecovery leader(false, std::nullopt, Millis(1000), now);
  const Verdict v = leader.decide(resume(leader.run().run_id, kMaxTerm, 1, 1, {id(1)}), 1).verdict;
  CHECK(v == Verdict::kRefuse);
  CHECK_THAT(leader.decide(resume(leader.run().run_id, UINT64_MAX, 1, 1, {id(1)}), 1).reason,
             Catch::Contains("out of range"));
  CHECK(leader.decide(resume(leader.run().run_id, kMaxTerm - 1, 1, 1, {id(1)}), 1).verdict == Verdict::kSupersede);
  // A peer without a ring never makes a master take a run over: not a standby's, not a newer term's.
  RunRecovery standby(true, std::nullopt, Millis(1000), now);
  const auto ringless = standby.decide(resume(id(0x55), 3, 9, 0, {}, false), 0);
  CHECK(ringless.verdict == Verdict::kRefuse);
  CHECK(ringless.code == Code::kMasterUnreachable);
  CHECK_THAT(ringless.reason, Catch::Contains("holds no ring"));
  CHECK(standby.decide(resume(id(0x55), 3, 9, 4, {id(9)}), 0).verdict == Verdict::kAdopt);
  CHECK(leader.decide(resume(leader.run().run_id, 5, 9, 0, {}, false), 1).verdict == Verdict::kRefuse);
  CHECK(leader.decide(resume(leader.run().run_id, 1, 9, 0, {}, false), 1).verdict == Verdict::kResume);
}

TEST_CASE("run recovery: etcd's run record carries the members' ring keys, and refuses a term out of range") {
  EtcdRecord r;
  r.run.run_id = id(0x31);
  r.run.term = 7;
  r.run.epoch = 12;
  r.run.keys[id(1)] = keyOf(0x41);
  r.run.keys[id(2)] = keyOf(0x42);
  r.leader = "m1";
  r.members = {id(1), id(2)};
  auto back = decodeEtcdRecord(encodeEtcdRecord(r));
  REQUIRE(back.isOk());
  CHECK(back->run.keys == r.run.keys);
  CHECK(back->members == r.members);
  CHECK(back->run.term == 7);
  r.run.term = kMaxTerm;
  CHECK(decodeEtcdRecord(encodeEtcdRecord(r)).status().code() == Code::kProtocolError);
  // A record written before the keys: none known.
  auto old = decodeEtcdRecord(R"({"run_id":"31313131313131313131313131313131","term":3,"epoch":1,"leader":"x","members":[]})");
  REQUIRE(old.isOk());
  CHECK(old->run.keys.empty());
  CHECK_FALSE(decodeEtcdRecord(R"({"run_id":"31313131313131313131313131313131","term":3,"epoch":1,"keys":{"zz":"00"}})").isOk());
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
