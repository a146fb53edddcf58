// The peer's master session (peer/master_session.hpp) on its own: no sockets, no timers, no ring. A
// recorder stands for its hands (dials, joins, pauses) and its listener, a hand-turned clock for time;
// the test plays the masters: connections that open or fail, JoinAccepted, RunResumed, losses.
#include <catch2/catch.hpp>

#include <functional>
#include <string>
#include <vector>

#include "net/tcp_rto.hpp"
#include "peer/master_session.hpp"

using namespace pccl;
using peer::MasterSession;

namespace {

using Join = MasterSession::Join;
using State = MasterSession::State;

struct Recorder : MasterSession::Io, MasterSession::Listener {
  // Io
  std::vector<std::string> dials;
  std::vector<Join> joins;
  wire::Uuid resume_run{};
  uint64_t resume_term = 0;
  std::vector<int64_t> pauses;  // ms
  Millis hb_interval{0}, hb_timeout{0};
  bool ready = false;
  int closes = 0;
  std::vector<std::function<void()>> deferred;
  void dial(const net::HostPort& m) override { dials.push_back(m.toString()); }
  void sendJoin(Join kind, const wire::Uuid& run_id, uint64_t term) override {
    joins.push_back(kind);
    resume_run = run_id;
    resume_term = term;
  }
  void startHeartbeats(Millis interval, Millis timeout) override {
    hb_interval = interval;
    hb_timeout = timeout;
  }
  void setReady(bool r) override { ready = r; }
  void close() override { ++closes; }
  void retryAfter(Millis pause) override { pauses.push_back(pause.count()); }
  void later(std::function<void()> fn) override { deferred.push_back(std::move(fn)); }
  std::string masterName() const override { return "master " + (dials.empty() ? std::string("?") : dials.back()); }
  void runDeferred() {
    auto fns = std::move(deferred);
    deferred.clear();
    for (auto& f : fns) f();
  }
  // Listener
  int joined_calls = 0, away_calls = 0, back_calls = 0;
  int64_t away_ms = -1;
  std::vector<Status> fatal_calls;
  void joined(const wire::JoinAccepted&) override { ++joined_calls; }
  void away(const Status&) override { ++away_calls; }
  void back(const wire::RunResumed&, int64_t ms) override {
    ++back_calls;
    away_ms = ms;
  }
  void fatal(const Status& why) override { fatal_calls.push_back(why); }
};

struct Fixture {
  explicit Fixture(size_t masters, int64_t reconnect_ms = 5000) {
    MasterSession::Config c;
    for (size_t i = 0; i < masters; ++i) c.masters.push_back(net::HostPort{"10.0.0." + std::to_string(i + 1), 4000});
    c.master_reconnect_ms = reconnect_ms;
    c.heartbeat_interval_ms = 1000;
    c.peer_timeout_ms = 10000;
    c.now = [this] { return now; };
    session = std::make_unique<MasterSession>(c, rec, rec);
  }
  TimePoint now = TimePoint{} + std::chrono::hours(1);
  Recorder rec;
  std::unique_ptr<MasterSession> session;

  wire::JoinAccepted accepted(uint8_t run, uint64_t term, bool resumed = false) const {
    wire::JoinAccepted m;
    m.peer_id.fill(0x11);
    m.run_id.fill(run);
    m.term = term;
    m.resumed = resumed ? 1 : 0;
    m.heartbeat_interval_ms = 500;
    return m;
  }
  // The master at the session's current address opens and takes us in as a newcomer.
  void join(uint8_t run = 0xAA, uint64_t term = 3) {
    session->start();
    session->opened(Status::ok(), false);
    REQUIRE(session->onJoinAccepted(accepted(run, term)).isOk());
  }
};

const Status kUnreachable = Status::masterUnreachable("cannot connect");

}  // namespace

TEST_CASE("master session: a newcomer tries every master in turn, pauses 50 ms doubling to 1 s, and gives up",
          "[session][unit]") {
  Fixture f(2, 5000);
  f.session->start();
  CHECK(f.session->state() == State::kJoining);
  REQUIRE(f.rec.dials == std::vector<std::string>{"10.0.0.1:4000"});
  f.session->opened(kUnreachable, false);
  REQUIRE(f.rec.dials.size() == 2);
  CHECK(f.rec.dials[1] == "10.0.0.2:4000");  // the next one at once
  CHECK(f.rec.pauses.empty());
  f.session->opened(kUnreachable, false);
  REQUIRE(f.rec.pauses == std::vector<int64_t>{100});  // a full round: a pause (50 << 1 after the first cycle)
  for (int i = 0; i < 6; ++i) {
    f.session->retry();
    f.session->opened(kUnreachable, false);
    f.session->opened(kUnreachable, false);
  }
  CHECK(f.rec.pauses == std::vector<int64_t>{100, 200, 400, 800, 1000, 1000, 1000});
  CHECK(f.rec.fatal_calls.empty());
  f.now += Millis(5000);  // master_reconnect_ms spent
  f.session->retry();
  f.session->opened(kUnreachable, false);
  f.session->opened(kUnreachable, false);
  REQUIRE(f.rec.fatal_calls.size() == 1);
  CHECK(f.rec.fatal_calls[0].code() == Code::kMasterUnreachable);
  CHECK_THAT(f.rec.fatal_calls[0].message(), Catch::Contains("no master of 10.0.0.1:4000, 10.0.0.2:4000") &&
                                                 Catch::Contains("cannot connect"));
  CHECK(f.session->state() == State::kIdle);
  const size_t dials = f.rec.dials.size();
  f.session->retry();  // over: nothing more is tried
  CHECK(f.rec.dials.size() == dials);
}

TEST_CASE("master session: every master refusing a newcomer as a standby makes it ask any master at once",
          "[session][unit]") {
  Fixture f(2);
  f.session->start();
  f.session->opened(Status::ok(), false);
  CHECK(f.rec.joins == std::vector<Join>{Join::kNewcomer});
  f.session->lost(Status::masterUnreachable("a standby"), true);
  f.session->opened(Status::ok(), false);
  f.session->lost(Status::masterUnreachable("a standby"), true);
  REQUIRE(f.rec.pauses == std::vector<int64_t>{0});
  f.session->retry();
  f.session->opened(Status::ok(), false);
  CHECK(f.rec.joins.back() == Join::kAnyMaster);
}

TEST_CASE("master session: a code no master can cure ends the attempts at once, and without reconnects a loss is final",
          "[session][unit]") {
  SECTION("kicked while joining") {
    Fixture f(3);
    f.session->start();
    f.session->opened(Status(Code::kAuthFailed, "wrong secret"), true);
    REQUIRE(f.rec.fatal_calls.size() == 1);
    CHECK(f.rec.fatal_calls[0].code() == Code::kAuthFailed);
    CHECK(f.rec.dials.size() == 1);
  }
  SECTION("a lost master with master_reconnect_ms 0") {
    Fixture f(1, 0);
    f.join();
    f.session->lost(Status::masterUnreachable("connection lost"), false);
    REQUIRE(f.rec.fatal_calls.size() == 1);
    CHECK(f.rec.away_calls == 0);
    CHECK(f.session->state() == State::kIdle);
  }
  SECTION("kicked after joining") {
    Fixture f(1);
    f.join();
    f.session->lost(Status(Code::kKicked, "kicked"), true);
    REQUIRE(f.rec.fatal_calls.size() == 1);
    CHECK(f.rec.fatal_calls[0].code() == Code::kKicked);
  }
}

TEST_CASE("master session: joined, away, taken back by the same master, then back when the run resumes",
          "[session][unit]") {
  Fixture f(2);
  f.join(0xAA, 3);
  CHECK(f.rec.joined_calls == 1);
  CHECK(f.session->state() == State::kJoined);
  CHECK(f.rec.ready);
  CHECK(f.rec.hb_interval == Millis(500));   // the smaller of ours and the master's
  // The larger of ours and twice the master's, then TCP's recovery allowance and one master interval.
  CHECK(f.rec.hb_timeout == Millis(10000 + net::tcpRecoveryMs() + 500));
  f.session->lost(Status::masterUnreachable("connection lost"), false);
  CHECK(f.rec.away_calls == 1);
  CHECK(f.session->state() == State::kAway);
  CHECK(f.rec.dials.back() == "10.0.0.1:4000");  // the same master first
  f.session->opened(Status::ok(), false);
  CHECK(f.rec.joins.back() == Join::kResume);
  CHECK(f.rec.resume_run == f.accepted(0xAA, 3).run_id);
  CHECK(f.rec.resume_term == 3);
  f.rec.ready = false;
  REQUIRE(f.session->onJoinAccepted(f.accepted(0xAA, 4, true)).isOk());
  CHECK(f.session->term() == 4);
  CHECK(f.session->state() == State::kAway);  // taken back, but the run goes on only at RunResumed
  CHECK_FALSE(f.rec.ready);
  f.now += Millis(1234);
  REQUIRE(f.session->onRunResumed(wire::RunResumed{}).isOk());
  CHECK(f.rec.back_calls == 1);
  CHECK(f.rec.away_ms == 1234);
  CHECK(f.rec.ready);
  CHECK(f.session->state() == State::kJoined);
  CHECK(f.rec.joined_calls == 1);
}

TEST_CASE("master session: a master of another run, or of an older term, is refused and the next one tried",
          "[session][unit]") {
  Fixture f(3);
  f.join(0xAA, 3);
  f.session->lost(Status::masterUnreachable("connection lost"), false);
  for (const wire::JoinAccepted& m : {f.accepted(0xBB, 9, true), f.accepted(0xAA, 2, true)}) {
    const size_t dials = f.rec.dials.size();
    f.session->opened(Status::ok(), false);
    REQUIRE(f.session->onJoinAccepted(m).isOk());
    CHECK(f.rec.deferred.size() == 1);  // the connection is closed once the handler returned
    f.rec.runDeferred();
    CHECK(f.rec.closes >= 1);
    CHECK(f.rec.dials.size() == dials + 1);  // the next master
  }
  CHECK(f.rec.back_calls == 0);
  CHECK(f.session->state() == State::kAway);
}

TEST_CASE("master session: a JoinAccepted that does not take a member back is a protocol error", "[session][unit]") {
  Fixture f(1);
  f.join();
  f.session->lost(Status::masterUnreachable("connection lost"), false);
  f.session->opened(Status::ok(), false);
  CHECK(f.session->onJoinAccepted(f.accepted(0xAA, 3, false)).code() == Code::kProtocolError);
  // RunResumed to a newcomer's connection: nothing to resume.
  Fixture g(1);
  g.join();
  REQUIRE(g.session->onRunResumed(wire::RunResumed{}).isOk());
  CHECK(g.rec.back_calls == 0);
}

TEST_CASE("master session: stopped, it ignores a late loss and a late pause", "[session][unit]") {
  Fixture f(2);
  f.join();
  f.session->stop();
  f.session->lost(Status::masterUnreachable("connection lost"), false);
  f.session->retry();
  CHECK(f.rec.away_calls == 0);
  CHECK(f.rec.fatal_calls.empty());
  CHECK(f.rec.dials.size() == 1);
  // A new connect() starts a newcomer's round again, from the master it used last.
  f.session->start();
  CHECK(f.rec.dials.size() == 2);
  f.session->opened(Status::ok(), false);
  CHECK(f.rec.joins.back() == Join::kNewcomer);
}
