// The run survives its master (docs/concepts.md "When the master dies"): real pccl-master processes
// killed (SIGKILL), frozen (SIGSTOP) and restarted, in-process peers that loop verified all-reduces
// through it. Timing settings: heartbeat 100 ms, peer timeout 1000 ms (test_support.hpp).
#include <catch2/catch.hpp>

#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <future>
#include <thread>

#include "test_support.hpp"

using namespace pccl;
using namespace pccl::test;

namespace {

constexpr size_t kCount = 1 << 14;
constexpr uint32_t kReconnectMs = 20000;

struct TempDir {
  std::string path;
  TempDir() {
    std::string tmpl = "/tmp/pccl-failover-XXXXXX";
    if (::mkdtemp(tmpl.data()) != nullptr) path = tmpl;
  }
  ~TempDir() {
    if (!path.empty()) std::system(("rm -rf '" + path + "'").c_str());
  }
};

// A pccl-master process; its log (stderr) is read with waitForLine.
struct MasterProcess {
  std::unique_ptr<ChildProcess> proc;
  uint16_t port = 0;

  static MasterProcess start(uint16_t port, std::vector<std::string> extra = {}) {
    std::vector<std::string> argv{PCCL_MASTER_BIN,     "--listen",          "127.0.0.1:" + std::to_string(port),
                                  "--heartbeat-ms",    "100",               "--peer-timeout-ms",
                                  "1000",              "--status-interval-s", "0"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    MasterProcess m;
    m.proc = std::make_unique<ChildProcess>(argv, std::vector<std::string>{"PCCL_LOG_LEVEL=info"}, true);
    auto line = m.proc->waitForLine("listening on", 10000);
    if (line) m.port = static_cast<uint16_t>(std::stoi(line->substr(line->rfind(':') + 1)));
    return m;
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port); }
  // A line containing `needle` already read, or the next one (within `ms`).
  bool logged(const std::string& needle, int ms) {
    for (const auto& l : proc->lines()) {
      if (l.find(needle) != std::string::npos) return true;
    }
    return proc->waitForLine(needle, ms).has_value();
  }
  // The log holds `n` lines containing `needle` (waiting up to `ms` for the rest).
  bool loggedTimes(const std::string& needle, size_t n, int ms) {
    size_t seen = 0;
    for (const auto& l : proc->lines()) seen += l.find(needle) != std::string::npos ? 1 : 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (seen < n) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0 || !proc->waitForLine(needle, static_cast<int>(left.count()))) return false;
      ++seen;
    }
    return true;
  }
};

CommConfig failoverConfig(const std::string& masters) {
  CommConfig c = fastCommConfig(0);
  c.master_address = masters;
  c.master_reconnect_ms = kReconnectMs;
  c.connect_timeout_ms = 20000;
  c.op_timeout_ms = 30000;
  return c;
}

float valueAt(size_t j, uint64_t it) { return static_cast<float>(j % 13 + 1 + it % 5); }

// One peer's loop of sum all-reduces, iteration `it` of every peer meeting in the same call; a
// retryable failure is followed by updateTopology() and the same iteration again.
struct Loop {
  std::atomic<uint64_t> it{0};
  uint64_t wrong = 0;
  uint64_t retries = 0;
  Status fatal;
  std::vector<std::string> errors;

  void run(Communicator& c, const std::atomic<uint64_t>& until, std::mutex& mu, std::condition_variable& cv) {
    std::vector<float> in(kCount), out(kCount);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (it.load() < until.load() && std::chrono::steady_clock::now() < deadline) {
      const uint64_t i = it.load();
      for (size_t j = 0; j < kCount; ++j) in[j] = valueAt(j, i);
      Result<ReduceInfo> r = c.allReduce(in.data(), out.data(), kCount, DataType::kFloat32, RedOp::kSum);
      if (r.isOk()) {
        for (size_t j = 0; j < kCount; ++j) {
          if (out[j] != valueAt(j, i) * static_cast<float>(r->world_size)) {
            ++wrong;
            break;
          }
        }
        {
          std::lock_guard<std::mutex> lk(mu);
          it.store(i + 1);
        }
        cv.notify_all();
        continue;
      }
      errors.push_back(r.status().toString());
      const Code code = r.status().code();
      if (code != Code::kPeerLost && code != Code::kTopologyChanged && code != Code::kTimeout) {
        fatal = r.status();
        return;
      }
      ++retries;
      Status u = c.updateTopology();
      if (!u.isOk()) errors.push_back("update: " + u.toString());
    }
    if (it.load() < until.load()) fatal = Status::timeout("the loop did not reach its last iteration in 120 s");
  }
};

struct Peers {
  std::vector<std::unique_ptr<Communicator>> comms;
  std::vector<std::unique_ptr<Loop>> loops;
  std::vector<std::thread> threads;
  std::atomic<uint64_t> until{UINT64_MAX};
  mutable std::mutex mu;  // the loops' progress, waited on by waitPast()
  mutable std::condition_variable progressed;

  ~Peers() {  // a failed REQUIRE: the loops stop after their current call
    until.store(0);
    for (auto& t : threads) t.join();
  }

  // `n` peers joined into one ring through `masters`, whose leader is `leader`.
  static std::unique_ptr<Peers> join(size_t n, const std::string& masters, MasterProcess& leader) {
    auto p = std::make_unique<Peers>();
    for (size_t i = 0; i < n; ++i) p->comms.push_back(makeComm(failoverConfig(masters)));
    REQUIRE(p->comms[0]->connect().isOk());
    std::vector<std::future<Status>> joins;
    for (size_t i = 1; i < n; ++i) joins.push_back(std::async(std::launch::async, [&, i] { return p->comms[i]->connect(); }));
    // The first member admits the others once they are all pending.
    REQUIRE(leader.loggedTimes("pending admission", n, 20000));
    const Status admitted = p->comms[0]->updateTopology();
    INFO(admitted.toString());
    REQUIRE(admitted.isOk());
    for (auto& j : joins) {
      const Status s = j.get();
      INFO(s.toString());
      REQUIRE(s.isOk());
    }
    for (auto& c : p->comms) REQUIRE(c->topology().world_size == n);
    return p;
  }
  void start() {
    loops.clear();
    until.store(UINT64_MAX);
    for (size_t i = 0; i < comms.size(); ++i) {
      loops.push_back(std::make_unique<Loop>());
      threads.emplace_back([this, i] { loops[i]->run(*comms[i], until, mu, progressed); });
    }
  }
  uint64_t slowest() const {
    uint64_t m = UINT64_MAX;
    for (const auto& l : loops) m = std::min<uint64_t>(m, l->it.load());
    return m;
  }
  // Blocks until every loop passed iteration `n` (or `ms` passed).
  bool waitPast(uint64_t n, int ms) const {
    std::unique_lock<std::mutex> lk(mu);
    return progressed.wait_for(lk, std::chrono::milliseconds(ms), [&] { return slowest() >= n; });
  }
  // Lets every loop run `more` iterations beyond the fastest one, then joins them.
  void finish(uint64_t more) {
    uint64_t fastest = 0;
    for (const auto& l : loops) fastest = std::max<uint64_t>(fastest, l->it.load());
    until.store(fastest + more);
    for (auto& t : threads) t.join();
    threads.clear();
  }
  void checkLoops() const {
    for (size_t i = 0; i < loops.size(); ++i) {
      INFO("peer " << i << " errors: " << loops[i]->errors.size() << (loops[i]->errors.empty() ? "" : " first: ")
                   << (loops[i]->errors.empty() ? "" : loops[i]->errors.front()));
      CHECK(loops[i]->fatal.isOk());
      CHECK(loops[i]->wrong == 0);
      CHECK(loops[i]->it.load() == until.load());
    }
  }
  // Every peer votes; all must succeed.
  bool updateAll() {
    std::vector<std::future<Status>> v;
    for (auto& c : comms) v.push_back(std::async(std::launch::async, [&c] { return c->updateTopology(); }));
    bool ok = true;
    for (auto& f : v) ok = f.get().isOk() && ok;
    return ok;
  }
};

}  // namespace

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

TEST_CASE("failover: a frozen master is replaced by the standby; resumed, it steps down and newcomers skip it",
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

TEST_CASE("failover: while the master is away a member dies and a newcomer knocks; the restarted master goes on "
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
