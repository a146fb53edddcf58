// Issue 32 §2: a member coming back to a master after losing it (protocol 9's resume) proves that it
// holds the ring key the run knows for it (a signature over the connection's session id and the resume
// record, protocol 10). Attacked here by a hostile holder of the run's secret (hostile_peer.hpp) against
// real pccl-master processes and in-process victims: (a) a live leader's member impersonated, (b) a
// restarted master's run taken over during its rebuild window, (c) the pending branch's admission, (d) a
// term at the top of its range. Each attack is refused with a clear error and costs the victims nothing.
#include <catch2/catch.hpp>

#include <signal.h>

#include <cstdint>
#include <string>

#include "failover_support.hpp"
#include "hostile_peer.hpp"
#include "master/run_recovery.hpp"

using namespace pccl;
using namespace pccl::test;

namespace {

// What any member learns by joining (JoinAccepted): the run's id and term. The test reads them from the
// master's state file instead, which holds the same.
struct RunFacts {
  wire::Uuid run_id{};
  uint64_t term = 0;
};
RunFacts runOf(const std::string& state_file) {
  auto rec = master::readRunRecord(state_file);
  REQUIRE(rec.isOk());
  REQUIRE(rec->has_value());
  return RunFacts{(*rec)->run_id, (*rec)->term};
}

std::vector<wire::Uuid> ringIds(const Communicator& c) {
  std::vector<wire::Uuid> ids;
  for (const RingMember& m : c.topology().ring) ids.push_back(m.id);
  return ids;
}

// The master's answer to `join` sent by `h`: its Error (the master refuses and closes).
wire::Error refusal(HostilePeer& h, const wire::JoinRequest& join) {
  REQUIRE(h.ok());
  REQUIRE(h.send(join));
  auto e = h.expectError(10000);
  REQUIRE(e.has_value());
  CHECK(h.waitClosed(10000));
  return *e;
}

// The victims loop verified all-reduces for a few more iterations: an attack cost them nothing.
void victimsGoOn(Peers& peers) {
  const uint64_t from = peers.slowest();
  REQUIRE(peers.waitPast(from + 5, 60000));
  peers.finish(2);
  peers.checkLoops();
  for (const auto& l : peers.loops) CHECK(l->errors.empty());
}

// A pccl-master process with a state file, two in-process members looping verified all-reduces
// through it (the victims), and the run's id and term.
struct LiveRun {
  TempDir dir;
  std::string state = dir.path + "/run.state";
  MasterProcess master;
  std::unique_ptr<Peers> peers;
  RunFacts run;
  explicit LiveRun(std::vector<std::string> extra = {}) {
    extra.insert(extra.begin(), {"--state-file", state});
    master = MasterProcess::start(0, extra);
    REQUIRE(master.port != 0);
    peers = Peers::join(2, master.address(), master);
    run = runOf(state);
  }
  void loop() {
    peers->start();
    REQUIRE(peers->waitPast(2, 60000));
  }
};

}  // namespace

TEST_CASE("resume identity: at a live leader, nobody but the member itself can come back as it", "[security][failover]") {
  LiveRun live;
  live.loop();
  MasterProcess& master = live.master;
  auto& peers = live.peers;
  const RunFacts run = live.run;
  Communicator& victim = *peers->comms[1];
  const wire::Uuid victim_id = victim.id();
  const uint64_t epoch = victim.topology().epoch;
  const std::vector<wire::Uuid> ring = ringIds(victim);

  {  // its id with the attacker's own (valid) signature and key
    HostilePeer h(master.port, "");
    const wire::Error e = refusal(h, h.resume(run.run_id, run.term, victim_id, epoch, ring));
    CHECK(e.code == static_cast<uint16_t>(Code::kAuthFailed));
    CHECK_THAT(e.message, Catch::Contains("not the member's"));
  }
  {  // a key that is not the attacker's, with a signature the attacker cannot make for it
    HostilePeer h(master.port, "");
    // The victim's public key is public (every TopologyUpdate lists it): the attacker names a key that
    // is not its own and signs with its own.
    net::SigningKey other;
    const wire::SignKey claimed = other.publicKey();
    const wire::Error e = refusal(h, h.resume(run.run_id, run.term, victim_id, epoch, ring, &h.ringKey(), &claimed));
    CHECK(e.code == static_cast<uint16_t>(Code::kAuthFailed));
    CHECK_THAT(e.message, Catch::Contains("not signed with the ring key"));
  }
  {  // a resume signed for another connection (replayed)
    HostilePeer a(master.port, "");
    HostilePeer b(master.port, "");
    const wire::JoinRequest made_for_a = a.resume(run.run_id, run.term, victim_id, epoch, ring);
    const wire::Error e = refusal(b, made_for_a);
    CHECK(e.code == static_cast<uint16_t>(Code::kAuthFailed));
    CHECK_THAT(e.message, Catch::Contains("not signed with the ring key"));
  }
  // Whatever was tried, the victim kept its session: no Kicked, no failed call, nothing replaced.
  victimsGoOn(*peers);
  CHECK_FALSE(master.logged("came back on a new connection", 0));
}

TEST_CASE("resume identity: a restarted master knows its members' keys from the state file, unknown ids are pinned",
          "[security][failover]") {
  LiveRun live;
  const RunFacts run = live.run;
  const wire::Uuid victim_id = live.peers->comms[1]->id();
  const uint64_t epoch = live.peers->comms[1]->topology().epoch;
  const std::vector<wire::Uuid> ring = ringIds(*live.peers->comms[1]);
  live.master.proc->signal(SIGKILL);
  // The members go too (what is under test is the record they leave behind), so that the next master
  // is forked from a process without their threads: a fork of a many-threaded process may hang before
  // its exec under TSan.
  live.peers.reset();
  // The run's master restarts elsewhere with the run's record: it waits for the members (rebuild
  // window) and the attacker gets there first.
  MasterProcess second = MasterProcess::start(0, {"--state-file", live.state, "--rebuild-window-ms", "60000"});
  for (const auto& l : second.proc->lines()) UNSCOPED_INFO("restarted master: " << l);
  REQUIRE(second.port != 0);
  REQUIRE(second.logged("waiting up to", 10000));
  {
    HostilePeer h(second.port, "");
    const wire::Error e = refusal(h, h.resume(run.run_id, run.term, victim_id, epoch, ring));
    CHECK(e.code == static_cast<uint16_t>(Code::kAuthFailed));
    CHECK_THAT(e.message, Catch::Contains("not the member's"));
  }
  // An id the record does not hold: the first proof pins its key, a conflicting claim is refused.
  wire::Uuid stranger{};
  stranger.fill(0x42);
  HostilePeer pinner(second.port, "");
  REQUIRE(pinner.send(pinner.resume(run.run_id, run.term, stranger, epoch, ring)));
  auto acc = pinner.expect<wire::JoinAccepted>(10000);
  REQUIRE(acc.has_value());
  CHECK(acc->resumed == 1);
  HostilePeer rival(second.port, "");
  const wire::Error e = refusal(rival, rival.resume(run.run_id, run.term, stranger, epoch, ring));
  CHECK(e.code == static_cast<uint16_t>(Code::kAuthFailed));
}

TEST_CASE("resume identity: a pending member coming back is admitted as a newcomer would be (max_peers)",
          "[security][failover]") {
  LiveRun live({"--max-peers", "2"});
  MasterProcess& master = live.master;
  auto& peers = live.peers;
  const RunFacts run = live.run;
  // The run is full: a fresh join is refused...
  HostilePeer newcomer(master.port, "");
  const wire::Error fresh = refusal(newcomer, newcomer.freshJoin());
  CHECK_THAT(fresh.message, Catch::Contains("run is full"));
  // ...and so is a "pending peer coming back" under an id the master never gave out.
  HostilePeer h(master.port, "");
  wire::Uuid made_up{};
  made_up.fill(0x17);
  const wire::Error back = refusal(h, h.resume(run.run_id, run.term, made_up, 0, {}));
  CHECK(back.code == static_cast<uint16_t>(Code::kInvalidUsage));
  CHECK_THAT(back.message, Catch::Contains("run is full"));
  peers->start();
  victimsGoOn(*peers);
}

TEST_CASE("resume identity: a term at the top of its range is refused, and the run goes on", "[security][failover]") {
  LiveRun live;
  live.loop();
  MasterProcess& master = live.master;
  auto& peers = live.peers;
  const RunFacts run = live.run;
  // A member's own id, properly signed, but a term no master could go above (it would wrap to 0, and a
  // "newer master" would make this one drop every member).
  HostilePeer h(master.port, "");
  wire::Uuid made_up{};
  made_up.fill(0x29);
  const wire::Error e = refusal(h, h.resume(run.run_id, UINT64_MAX, made_up, 0, {}));
  CHECK(e.code == static_cast<uint16_t>(Code::kInvalidUsage));
  CHECK_THAT(e.message, Catch::Contains("out of range"));
  CHECK(runOf(live.state).term == run.term);
  victimsGoOn(*peers);
  CHECK_FALSE(master.logged("stepping down", 0));
}
