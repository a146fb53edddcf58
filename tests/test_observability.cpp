// Observability: the log lines a peer and the master write (levels from PCCL_LOG_LEVEL or --log-level,
// PCCL_LOG_FILE, peer=/epoch=/tag= fields on every event) and the per-communicator counters
// (Communicator::stats, pcclGetStats) over real operations. Failures and retries are counted in
// test_allreduce_faults.cpp (a SIGKILLed peer) and tests/c/c_api_test.c (a peer that leaves).
#include <catch2/catch.hpp>

#include <fstream>
#include <regex>
#include <sstream>

#include "test_support.hpp"

using namespace pccl;
using namespace pccl::test;

namespace {

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> linesMatching(const std::string& text, const std::regex& re) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (std::regex_search(line, re)) out.push_back(line);
  }
  return out;
}

// A temporary file name unique to this process and test.
std::string tempPath(const std::string& name) {
  return "/tmp/pccl-test-" + std::to_string(getpid()) + "-" + name;
}

}  // namespace

TEST_CASE("observability: counters follow all-reduces, syncs and topology updates", "[observability]") {
  LocalCluster c = startCluster(3, fastCommConfig(0));
  REQUIRE(c.peers.size() == 3);
  constexpr size_t kCount = 1 << 16;
  std::vector<std::vector<float>> bufs(3, std::vector<float>(kCount, 1.0f));
  std::vector<uint64_t> tx(3), rx(3);
  c.onEach([&](size_t i) {
    for (uint64_t tag = 0; tag < 4; ++tag) {
      ReduceOptions o;
      o.tag = tag;
      auto r = c.peers[i]->allReduce(bufs[i].data(), bufs[i].data(), kCount, DataType::kFloat32, RedOp::kAvg, o);
      REQUIRE(r.isOk());
      tx[i] += r->tx_bytes;
      rx[i] += r->rx_bytes;
    }
  });
  for (size_t i = 0; i < 3; ++i) {
    const CommStats s = c.peers[i]->stats();
    CHECK(s.allreduce_ops == 4);
    CHECK(s.allreduce_aborts == 0);
    CHECK(s.allreduce_retries == 0);
    CHECK(s.tx_bytes == tx[i]);  // the counters add up the per-operation infos
    CHECK(s.rx_bytes == rx[i]);
    CHECK(s.tx_bytes >= 2 * kCount * sizeof(float));  // a ring moves ~2(n-1)/n of the data each way
    CHECK(s.epoch == c.peers[i]->topology().epoch);
    CHECK(s.last_allreduce_seconds > 0);
    CHECK(s.last_allreduce_bytes_per_second ==
          Approx(kCount * sizeof(float) / s.last_allreduce_seconds).epsilon(1e-9));
  }
  // A refused call is not an operation.
  CHECK_FALSE(c.peers[0]->allReduce(nullptr, nullptr, 4, DataType::kFloat32, RedOp::kSum).isOk());
  CHECK(c.peers[0]->stats().allreduce_ops == 4);
  CHECK(c.peers[0]->stats().allreduce_aborts == 0);

  // A shared-state sync: the out-of-date peers receive, and the counters add the sync's bytes.
  std::vector<std::vector<float>> weights(3, std::vector<float>(1000, 0.0f));
  std::fill(weights[0].begin(), weights[0].end(), 2.5f);
  std::vector<CommStats> before;
  for (auto& p : c.peers) before.push_back(p->stats());
  std::vector<SyncInfo> infos(3);
  c.onEach([&](size_t i) {
    SharedState st;
    st.revision = i == 0 ? 7 : 0;
    st.tensors.push_back(SharedTensor{"w", DataType::kFloat32, weights[i].size(), weights[i].data()});
    auto r = c.peers[i]->syncSharedState(st);
    REQUIRE(r.isOk());
    infos[i] = *r;
  });
  for (size_t i = 0; i < 3; ++i) {
    const CommStats s = c.peers[i]->stats();
    CHECK(s.sync_ops == 1);
    CHECK(s.sync_aborts == 0);
    CHECK(s.tx_bytes == before[i].tx_bytes + infos[i].tx_bytes);
    CHECK(s.rx_bytes == before[i].rx_bytes + infos[i].rx_bytes);
    CHECK(weights[i][999] == 2.5f);
  }
  CHECK(infos[1].rx_bytes > 0);

  // Every peer's update installs one more ring.
  REQUIRE(c.updateAll());
  for (size_t i = 0; i < 3; ++i) {
    CHECK(c.peers[i]->stats().topology_updates == before[i].topology_updates + 1);
    CHECK(c.peers[i]->stats().epoch == c.peers[i]->topology().epoch);
  }
}

TEST_CASE("observability: PCCL_LOG_LEVEL and PCCL_LOG_FILE give one line per event with peer, epoch and tag",
          "[observability]") {
  // The master as a process at --log-level debug, its lines in a file (a pipe nobody drains while the
  // peers run would fill up and stall it).
  const std::string log_m = tempPath("master.log");
  std::remove(log_m.c_str());
  ChildProcess master({PCCL_MASTER_BIN, "--listen", "127.0.0.1:0", "--heartbeat-ms", "100", "--peer-timeout-ms",
                       "1000", "--log-level", "debug"},
                      {"PCCL_LOG_FILE=" + log_m}, /*merge_stderr=*/true);
  auto listening = master.waitForLine("listening on", 5000);
  REQUIRE(listening);
  const uint16_t port = static_cast<uint16_t>(std::stoi(listening->substr(listening->rfind(':') + 1)));

  // Two ring_member peers at debug level, writing to their own PCCL_LOG_FILE.
  const std::string log_a = tempPath("a.log"), log_b = tempPath("b.log");
  std::remove(log_a.c_str());
  std::remove(log_b.c_str());
  auto member = [&](const std::string& name, const std::string& log) {
    std::vector<std::string> args = memberArgs(port, name);
    // 4 MiB operations until SIGTERM (not a fixed run time: on a loaded machine b may join late).
    for (const char* a : {"--allreduce", "1048576"}) args.push_back(a);
    return std::make_unique<ChildProcess>(args, std::vector<std::string>{"PCCL_LOG_LEVEL=debug", "PCCL_LOG_FILE=" + log});
  };
  auto a = member("a", log_a);
  REQUIRE(a->waitForLine("a connected", 5000));
  auto b = member("b", log_b);
  REQUIRE(b->waitForLine("b connected", 10000));
  // Both have finished an all-reduce on the ring of two; then they leave.
  REQUIRE(a->waitForLine("ok world=2", 30000));
  REQUIRE(b->waitForLine("ok world=2", 30000));
  a->signal(SIGTERM);
  b->signal(SIGTERM);
  a->waitForLine("a left", 20000);  // reads (and keeps) their output up to the graceful leave
  b->waitForLine("b left", 20000);
  const int a_exit = a->waitExit(20000), b_exit = b->waitExit(20000);
  for (auto* p : {a.get(), b.get()}) {
    for (const auto& l : p->lines()) UNSCOPED_INFO(l);
  }
  REQUIRE(a_exit == 0);
  REQUIRE(b_exit == 0);
  // ring_member prints its counters before leaving.
  const auto stats = [](ChildProcess& p, const std::string& name) {
    for (const auto& l : p.lines()) {
      if (l.rfind(name + " stats ", 0) == 0) return l;
    }
    return std::string();
  };
  CHECK(std::regex_search(stats(*a, "a"), std::regex("allreduce_ops=[1-9][0-9]* .*tx_bytes=[1-9]")));
  CHECK(std::regex_search(stats(*b, "b"), std::regex("allreduce_ops=[1-9][0-9]* .*last_throughput_MBps=")));

  const std::regex prefix(R"(^\[\d\d:\d\d:\d\d\.\d{3} pccl (ERROR|WARN |INFO |DEBUG|TRACE) \d+ [a-z-]+\] )");
  for (const std::string& path : {log_a, log_b}) {
    const std::string text = readFile(path);
    INFO(path << ":\n" << text.substr(0, 4000));
    REQUIRE(!text.empty());
    // Every line has the fixed prefix: time, level, pid, component.
    std::istringstream in(text);
    std::string line;
    size_t n = 0;
    while (std::getline(in, line)) {
      CHECK(std::regex_search(line, prefix));
      ++n;
    }
    CHECK(n > 3);
    CHECK(linesMatching(text, std::regex(R"(INFO  \d+ peer\] peer=[0-9a-f]{8} epoch=\d+: ring ready: rank \d of 2)")).size() >= 1);
    CHECK(linesMatching(text, std::regex(R"(DEBUG \d+ peer\] peer=[0-9a-f]{8} epoch=\d+ tag=0: all-reduce done: 4194304 bytes in [0-9.]+ ms)")).size() >= 1);
    std::remove(path.c_str());
  }
  master.signal(SIGTERM);
  CHECK(master.waitExit(5000) == 0);
  const std::string mlog = readFile(log_m);
  std::remove(log_m.c_str());
  INFO(mlog.substr(0, 4000));
  CHECK(linesMatching(mlog, std::regex(R"(INFO  \d+ master\] peer=[0-9a-f]{8} epoch=\d+: joined from 127\.0\.0\.1)")).size() == 2);
  CHECK(linesMatching(mlog, std::regex(R"(INFO  \d+ master\] epoch=\d+: ring of 2 peers is up)")).size() >= 1);
  CHECK(linesMatching(mlog, std::regex(R"(DEBUG \d+ master\] peer=[0-9a-f]{8} epoch=\d+: votes for a topology update)")).size() >= 1);
  // A call is announced to the master only once it has run 5 ms (collective/op_reports.cpp): on a fast
  // machine none of these may have. The ones it saw are logged with their epoch and tag.
  for (const std::string& l : linesMatching(mlog, std::regex(R"(every member called)"))) {
    CHECK(std::regex_search(l, std::regex(R"(DEBUG \d+ master\] epoch=\d+ tag=0 call=\d+: every member called .* \(2 peers\))")));
  }
}

TEST_CASE("observability: bad log settings are reported, not fatal", "[observability]") {
  // An unknown level: the library says so on stderr and keeps the default.
  ChildProcess bad_level(memberArgs(1, "x"), {"PCCL_LOG_LEVEL=loud"}, /*merge_stderr=*/true);
  CHECK(bad_level.waitForLine("ignoring unknown PCCL_LOG_LEVEL 'loud'", 5000));
  // (The member itself keeps looking for its master on port 1: each child is killed at scope end.)
  // An unwritable log file: stderr instead.
  ChildProcess bad_file(memberArgs(1, "x"), {"PCCL_LOG_LEVEL=debug", "PCCL_LOG_FILE=/nonexistent-dir/pccl.log"},
                        /*merge_stderr=*/true);
  CHECK(bad_file.waitForLine("cannot open PCCL_LOG_FILE", 5000));
  // pccl-master refuses an unknown --log-level with a usage error.
  ChildProcess master({PCCL_MASTER_BIN, "--log-level", "loud"}, {}, /*merge_stderr=*/true);
  CHECK(master.waitForLine("unknown log level 'loud'", 5000));
  CHECK(master.waitExit(5000) != 0);
}
