// Helpers shared by the multi-peer tests: fast timing settings, an embedded master, and child
// processes whose stdout is read line by line with deadlines (poll(), never sleep loops).
#ifndef PCCL_TESTS_TEST_SUPPORT_HPP_
#define PCCL_TESTS_TEST_SUPPORT_HPP_

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <optional>
#include <string>
#include <random>
#include <vector>

#include "net/tcp_rto.hpp"
#include "pccl/communicator.hpp"
#include "pccl/master.hpp"

namespace pccl::test {

// A program built beside the tests (pccl-master, ring_member, ...), from its path relative to the
// directory of the running test program. tests/CMakeLists.txt defines PCCL_MASTER_BIN and the others as
// calls of this with relative paths: no object file depends on where its build tree is, so a compiler
// cache serves every clone (docs/testing.md). The string lives as long as the process.
inline const char* testBinary(const char* relative) {
  static std::mutex mu;
  static std::map<std::string, std::string> paths;
  std::lock_guard<std::mutex> lock(mu);
  std::string& path = paths[relative];
  if (path.empty()) {
    char self[4096];
    const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    const std::string exe = n > 0 ? std::string(self, static_cast<size_t>(n)) : std::string("./test");
    path = relative[0] == '/' ? std::string(relative) : exe.substr(0, exe.rfind('/') + 1) + relative;
  }
  return path.c_str();
}

constexpr uint32_t kHeartbeatMs = 100;
#ifdef PCCL_TESTS_SANITIZED
// Sanitized builds run several times slower, and a loaded machine stalls them for a second at times: a
// second of silence is no death there.
constexpr uint32_t kTimeoutMs = 2500;
constexpr bool kSanitized = true;
#else
constexpr uint32_t kTimeoutMs = 1000;
constexpr bool kSanitized = false;
#endif
// How long a silent peer (or master) is given before it is removed (or counted lost), with kTimeoutMs and
// kHeartbeatMs on both sides: the timeout, TCP's retransmission after a dark path came back, and one
// heartbeat (master_server.cpp, master_session.cpp; docs/algorithms.md §6, "Network faults").
inline double silenceLimitS() { return (kTimeoutMs + net::tcpRecoveryMs() + kHeartbeatMs) / 1000.0; }
// The "large" count of the all-reduce sweeps (tagged [sweep]): 20011 elements, hundreds of 256-byte
// segments per operation, in the release build (scripts/test.sh runs the [sweep] tests there); a
// quarter of it under a sanitizer, still tens of segments, where the sweeps were the slowest tests by
// far (docs/testing.md).
constexpr size_t kSweepLargeCount = kSanitized ? 5003 : 20011;
// Where a [sweep] case runs in place and out of place: both in the release build; under a sanitizer
// one of the two, alternating with `k` (the case's index), so that every dtype, op and count still
// meets both across the sweep. The sweeps were the slowest tests under sanitizers (docs/testing.md).
inline std::vector<bool> sweepPlacements(size_t k) {
  if (kSanitized) return {k % 2 == 1};
  return {false, true};
}

inline MasterConfig fastMasterConfig(const std::string& secret = "") {
  MasterConfig c;
  c.listen_address = "127.0.0.1:0";
  c.secret = secret;
  c.heartbeat_interval_ms = kHeartbeatMs;
  c.peer_timeout_ms = kTimeoutMs;
  c.handshake_timeout_ms = 1000;
  return c;
}

// Which algorithm small all-reduces take (docs/algorithms.md §1): tests run both on the same sizes.
enum class Path { kRing, kGather };
inline CommConfig onPath(CommConfig c, Path p) {
  c.gather_bytes = p == Path::kRing ? 0 : (4 << 20);
  return c;
}
inline const char* pathName(Path p) { return p == Path::kRing ? "ring" : "gather"; }

inline CommConfig fastCommConfig(uint16_t master_port, const std::string& secret = "") {
  CommConfig c;
  c.master_address = "127.0.0.1:" + std::to_string(master_port);
  c.listen_address = "127.0.0.1:0";
  c.secret = secret;
  c.connections_per_peer = 2;
  c.same_host_connections = 0;  // K on loopback too, so the striped paths stay exercised
  c.heartbeat_interval_ms = kHeartbeatMs;
  c.peer_timeout_ms = kTimeoutMs;
  c.connect_timeout_ms = 10000;
  c.handshake_timeout_ms = 1000;
  // The master's loss ends these communicators at once (the behaviour the older fault tests check);
  // test_master_failover.cpp sets it for peers that look for a master again.
  c.master_reconnect_ms = 0;
  return c;
}

// Tiny segments (256 bytes), so that every operation of the sweeps is cut into many segments striped
// over the connections; a deadline longer than any test.
inline CommConfig smallSegments() {
  CommConfig c = fastCommConfig(0);
  c.segment_bytes = 256;
  c.op_timeout_ms = 60000;
  return c;
}

inline std::unique_ptr<Master> startMaster(const MasterConfig& config) {
  auto m = Master::create(config);
  if (!m.isOk()) return nullptr;
  if (!(*m)->start().isOk()) return nullptr;
  return std::move(m).value();
}

inline std::unique_ptr<Communicator> makeComm(const CommConfig& config) {
  auto c = Communicator::create(config);
  return c.isOk() ? std::move(c).value() : nullptr;
}

// `count` floats uniform in [-1, 1) from a generator seeded with `seed`.
inline std::vector<float> randomFloats(size_t seed, size_t count) {
  std::mt19937 rng(static_cast<unsigned>(seed));
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(count);
  for (auto& x : v) x = d(rng);
  return v;
}

// Rank r's input of small integers, r + 1 + i % period: float sums of a few ranks are exact.
inline std::vector<float> smallIntInput(size_t rank, size_t count, size_t period = 7) {
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = static_cast<float>(rank + 1 + i % period);
  return v;
}

// Whether `out` is the exact sum over `world` ranks of smallIntInput(rank, out.size(), period).
inline bool exactSmallIntSum(const std::vector<float>& out, size_t world, size_t period = 7) {
  for (size_t i = 0; i < out.size(); ++i) {
    float want = 0;
    for (size_t r = 0; r < world; ++r) want += static_cast<float>(r + 1 + i % period);
    if (out[i] != want) return false;
  }
  return true;
}

inline double secondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// A child process with its stdout (and with merge_stderr, its stderr) on a pipe. Killed (SIGKILL) and
// reaped on destruction.
class ChildProcess {
 public:
  explicit ChildProcess(std::vector<std::string> argv, std::vector<std::string> env = {}, bool merge_stderr = false) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(fds[1], STDOUT_FILENO);
      if (merge_stderr) dup2(fds[1], STDERR_FILENO);
      for (const auto& e : env) putenv(const_cast<char*>(e.c_str()));
      std::vector<char*> args;
      for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
    close(fds[1]);
    fd_ = fds[0];
  }
  ~ChildProcess() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGCONT);
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (fd_ >= 0) close(fd_);
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  void signal(int sig) const { kill(pid_, sig); }
  // SIGSTOP, returning once the process has actually stopped (kill() only queues the signal: a
  // process running on another core may still act for a moment).
  bool freeze() const {
    if (kill(pid_, SIGSTOP) != 0) return false;
    int status = 0;
    return waitpid(pid_, &status, WUNTRACED) == pid_ && WIFSTOPPED(status);
  }

  // The next unread line containing `needle`, or nullopt at the deadline / EOF.
  std::optional<std::string> waitForLine(const std::string& needle, int timeout_ms) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
      size_t nl;
      while ((nl = buffer_.find('\n')) != std::string::npos) {
        std::string line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        lines_.push_back(line);
        if (line.find(needle) != std::string::npos) return line;
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0 || fd_ < 0) return std::nullopt;
      pollfd p{fd_, POLLIN, 0};
      int rc = poll(&p, 1, static_cast<int>(left.count()));
      if (rc <= 0) continue;
      char buf[4096];
      ssize_t n = read(fd_, buf, sizeof(buf));
      if (n <= 0) {
        close(fd_);
        fd_ = -1;
        continue;
      }
      buffer_.append(buf, static_cast<size_t>(n));
    }
  }

  // Exit status (or 128+signal), or -1 if it has not exited by the deadline. Waits on a pidfd.
  int waitExit(int timeout_ms) {
    int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid_, 0));
    if (pidfd >= 0) {
      pollfd p{pidfd, POLLIN, 0};
      int rc = poll(&p, 1, timeout_ms);
      close(pidfd);
      if (rc <= 0) return -1;
    }
    int status = 0;
    if (waitpid(pid_, &status, 0) != pid_) return -1;
    reaped_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  const std::vector<std::string>& lines() const { return lines_; }

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
  bool reaped_ = false;
  std::string buffer_;
  std::vector<std::string> lines_;
};

// A master and N communicators in this process, joined into one ring (each peer's io thread runs it;
// tests drive each peer from its own thread).
struct LocalCluster {
  std::unique_ptr<Master> master;
  std::vector<std::unique_ptr<Communicator>> peers;

  // Runs fn(rank) on one thread per peer and returns when all have finished.
  void onEach(const std::function<void(size_t)>& fn) {
    std::vector<std::thread> threads;
    for (size_t i = 0; i < peers.size(); ++i) threads.emplace_back([&fn, i] { fn(i); });
    for (auto& t : threads) t.join();
  }
  // Every peer calls updateTopology(); true when all succeed.
  bool updateAll() {
    std::vector<Status> st(peers.size());
    onEach([&](size_t i) { st[i] = peers[i]->updateTopology(); });
    for (const auto& s : st) {
      if (!s.isOk()) return false;
    }
    return true;
  }
};

// One peer per config (master_address filled in), joined in that order. Returns an empty cluster on failure.
inline LocalCluster startCluster(std::vector<CommConfig> configs, const MasterConfig& master = fastMasterConfig()) {
  LocalCluster c;
  const size_t n = configs.size();
  c.master = startMaster(master);
  if (!c.master) return c;
  for (auto& config : configs) {
    config.master_address = "127.0.0.1:" + std::to_string(c.master->port());
    c.peers.push_back(makeComm(config));
  }
  for (auto& p : c.peers) {
    if (!p) return LocalCluster{};
  }
  if (!c.peers[0]->connect().isOk()) return LocalCluster{};
  std::vector<std::future<Status>> joins;
  for (size_t i = 1; i < n; ++i) {
    joins.push_back(std::async(std::launch::async, [&c, i] { return c.peers[i]->connect(); }));
  }
  bool ok = true;
  if (n > 1) {
    ok = c.master->waitFor([n](const MasterStats& s) { return s.pending == n - 1; }, 10000) &&
         c.peers[0]->updateTopology().isOk();
  }
  for (auto& j : joins) ok = j.get().isOk() && ok;
  if (!ok) return LocalCluster{};
  return c;
}

// `n` peers built from `config`.
inline LocalCluster startCluster(size_t n, const CommConfig& config, const MasterConfig& master = fastMasterConfig()) {
  return startCluster(std::vector<CommConfig>(n, config), master);
}

inline std::vector<std::string> memberArgs(uint16_t port, const std::string& name) {
  return {PCCL_RING_MEMBER_BIN, "--master", "127.0.0.1:" + std::to_string(port), "--name", name,
          "--heartbeat-ms", std::to_string(kHeartbeatMs), "--timeout-ms", std::to_string(kTimeoutMs)};
}

}  // namespace pccl::test

#endif  // PCCL_TESTS_TEST_SUPPORT_HPP_
