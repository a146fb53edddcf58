// What the master-failover tests share (test_master_failover.cpp, test_etcd_failover.cpp): pccl-master
// processes whose log is read, and in-process peers looping verified all-reduces through them.
#ifndef PCCL_TESTS_FAILOVER_SUPPORT_HPP_
#define PCCL_TESTS_FAILOVER_SUPPORT_HPP_

#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include <catch2/catch.hpp>

#include "test_support.hpp"

namespace pccl::test {

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
    auto line = m.proc->waitForLine("listening on", 30000);  // a loaded machine, a sanitizer, a slow fsync
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

inline CommConfig failoverConfig(const std::string& masters) {
  CommConfig c = fastCommConfig(0);
  c.master_address = masters;
  c.master_reconnect_ms = kReconnectMs;
  c.connect_timeout_ms = 20000;
  c.op_timeout_ms = 30000;
  return c;
}

inline float valueAt(size_t j, uint64_t it) { return static_cast<float>(j % 13 + 1 + it % 5); }

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
    for (size_t i = 0; i < comms.size(); ++i) loops.push_back(std::make_unique<Loop>());
    for (size_t i = 0; i < comms.size(); ++i) {
      threads.emplace_back([this, loop = loops[i].get(), comm = comms[i].get()] {
        loop->run(*comm, until, mu, progressed);
      });
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


}  // namespace pccl::test

#endif  // PCCL_TESTS_FAILOVER_SUPPORT_HPP_
