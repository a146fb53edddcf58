// pccl-failover-bench: what a master's death costs a run (docs/benchmarks.md "Master failover").
// Real processes: a pccl-master (with a state file) and N peers looping float32 sum all-reduces. After
// a warm-up the driver SIGKILLs the master (and, with --kill-peer, one peer at the same moment),
// restarts it at the same address --restart-after-ms later, and measures from each peer's log:
//   resumed_ms       the master's death -> this peer's run resumed under the restarted master
//   first_ok_ms      the master's death -> the first all-reduce that succeeded after the restart
//   max_gap_ms       the longest time between two successful all-reduces around the outage
//   ops_during       all-reduces that succeeded while no master was up
// Every time is CLOCK_REALTIME milliseconds, so peers in other network namespaces (pccl-wanem) can be
// measured from the same logs.
//
//   pccl-failover-bench [--ranks N] [--count C] [--restart-after-ms D] [--kill-peer] [--window-ms W]
//                       [--reconnect-ms R] [--runs K] [--json FILE]                  (loopback, forks all)
//   pccl-failover-bench --role peer --master HOST:PORT --log FILE [--count C] [--reconnect-ms R] [--stop-file F]
//   pccl-failover-bench --role driver --listen HOST:PORT --peers N --log-dir DIR ...   (master + kills only;
//                       the peers run elsewhere, e.g. one per pccl-wanem namespace: bench/failover.sh)
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "pccl/communicator.hpp"

namespace {

volatile sig_atomic_t g_stop = 0;
void onSignal(int) { g_stop = 1; }

int64_t realMs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

struct Options {
  std::string role = "local";
  int ranks = 4;
  size_t count = 1 << 20;
  int restart_after_ms = 2000;
  bool kill_peer = false;
  uint32_t window_ms = 10000;
  int64_t reconnect_ms = 30000;
  int runs = 3;
  std::string json;
  std::string scenario = "loopback";
  std::string master;   // peer
  std::string listen = "127.0.0.1:0";  // driver
  std::string log;      // peer
  std::string stop_file;  // peer: stops once it exists
  std::string log_dir;  // driver
  std::string master_bin;
  std::string self;
};

// ---- a peer ------------------------------------------------------------------------------------------

int runPeer(const Options& o) {
  signal(SIGTERM, onSignal);
  std::FILE* log = std::fopen(o.log.c_str(), "w");
  if (log == nullptr) return 1;
  auto line = [&](const char* what, uint64_t a) {
    std::fprintf(log, "%s %lld %llu\n", what, static_cast<long long>(realMs()), static_cast<unsigned long long>(a));
    std::fflush(log);
  };
  pccl::CommConfig c;
  c.master_address = o.master;
  c.listen_address = o.listen.empty() ? "0.0.0.0:0" : o.listen;
  if (const char* addr = std::getenv("PCCL_WANEM_ADDR")) c.listen_address = std::string(addr) + ":0";
  c.master_reconnect_ms = o.reconnect_ms;
  c.connect_timeout_ms = 120000;
  auto created = pccl::Communicator::create(c);
  if (!created.isOk()) {
    std::fprintf(stderr, "peer: %s\n", created.status().toString().c_str());
    return 1;
  }
  auto comm = std::move(created).value();
  pccl::Status joined = comm->connect();
  if (!joined.isOk()) {
    std::fprintf(stderr, "peer: connect: %s\n", joined.toString().c_str());
    return 1;
  }
  std::vector<float> data(o.count, 1.0f);
  uint64_t returns = 0;
  while (!g_stop && (o.stop_file.empty() || access(o.stop_file.c_str(), F_OK) != 0)) {
    auto pending = comm->arePeersPending();
    if (pending.isOk() && *pending) (void)comm->updateTopology();
    auto r = comm->allReduce(data.data(), data.data(), data.size(), pccl::DataType::kFloat32, pccl::RedOp::kSum);
    const pccl::CommStats st = comm->stats();
    if (st.master_returns != returns) {
      returns = st.master_returns;
      line("resumed", returns);
    }
    if (r.isOk()) {
      line("ok", r->world_size);
      std::fill(data.begin(), data.end(), 1.0f);
      continue;
    }
    line("err", static_cast<uint64_t>(r.status().code()));
    const pccl::Code code = r.status().code();
    if (code != pccl::Code::kPeerLost && code != pccl::Code::kTopologyChanged && code != pccl::Code::kTimeout) {
      std::fprintf(stderr, "peer: %s\n", r.status().toString().c_str());
      return 1;
    }
    (void)comm->updateTopology();
  }
  std::fclose(log);
  return 0;
}

// ---- the driver: the master, its death and its restart ---------------------------------------------

struct Event {
  std::string kind;
  int64_t t = 0;
  uint64_t value = 0;
};

std::vector<Event> readLog(const std::string& path) {
  std::vector<Event> out;
  std::ifstream f(path);
  Event e;
  while (f >> e.kind >> e.t >> e.value) out.push_back(e);
  return out;
}

pid_t spawn(const std::vector<std::string>& argv, const std::string& out) {
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
    }
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  return pid;
}

void reap(pid_t pid, int sig) {
  if (pid <= 0) return;
  kill(pid, sig);
  waitpid(pid, nullptr, 0);
}

size_t oks(const std::vector<Event>& ev, int64_t after) {
  return static_cast<size_t>(std::count_if(ev.begin(), ev.end(), [&](const Event& e) { return e.kind == "ok" && e.t > after; }));
}

// Polls the peers' logs (files written by other processes) until `done` or `ms` pass.
template <typename F>
bool waitLogs(const std::vector<std::string>& logs, int ms, F done) {
  const int64_t end = realMs() + ms;
  while (realMs() < end) {
    std::vector<std::vector<Event>> ev;
    for (const auto& l : logs) ev.push_back(readLog(l));
    if (done(ev)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // other processes' files: nothing to wait on
  }
  return false;
}

int runDriver(const Options& o, bool fork_peers) {
  const std::string dir = o.log_dir.empty() ? "/tmp/pccl-failover-" + std::to_string(getpid()) : o.log_dir;
  std::system(("mkdir -p '" + dir + "'").c_str());
  std::string listen = o.listen;
  if (listen.size() > 2 && listen.substr(listen.size() - 2) == ":0") {
    listen = listen.substr(0, listen.size() - 1) + std::to_string(29600 + getpid() % 2000);
  }
  std::FILE* json = o.json.empty() ? nullptr : std::fopen(o.json.c_str(), "w");
  if (json != nullptr) std::fprintf(json, "[\n");
  int rc = 0;
  pid_t master = -1;  // with peers elsewhere, one master (restarted each run) serves every run
  for (int run = 0; run < o.runs && rc == 0; ++run) {
    const std::string tag = dir + "/run" + std::to_string(run);
    std::system(("rm -f '" + tag + "'.*").c_str());
    const std::string state = fork_peers ? tag + ".state" : dir + "/master.state";
    const std::vector<std::string> master_argv{o.master_bin, "--listen", listen, "--heartbeat-ms", "1000",
                                               "--peer-timeout-ms", "10000", "--state-file", state,
                                               "--rebuild-window-ms", std::to_string(o.window_ms),
                                               "--status-interval-s", "0"};
    const int64_t run_start = realMs();
    if (master < 0) master = spawn(master_argv, tag + ".master.log");
    std::vector<pid_t> peers;
    std::vector<std::string> logs;
    for (int i = 0; i < o.ranks; ++i) {
      logs.push_back(o.log_dir.empty() || fork_peers ? tag + ".peer" + std::to_string(i) : dir + "/peer" + std::to_string(i));
      if (fork_peers) {
        peers.push_back(spawn({o.self, "--role", "peer", "--master", listen, "--log", logs.back(), "--count",
                               std::to_string(o.count), "--reconnect-ms", std::to_string(o.reconnect_ms)},
                              logs.back() + ".err"));
      }
    }
    // Warm-up: every peer in one ring of N, 10 all-reduces each.
    const bool warm = waitLogs(logs, 120000, [&](const std::vector<std::vector<Event>>& ev) {
      for (const auto& e : ev) {
        if (std::count_if(e.begin(), e.end(), [&](const Event& x) {
              return x.kind == "ok" && x.t > run_start && x.value == static_cast<uint64_t>(o.ranks);
            }) < 10) {
          return false;
        }
      }
      return true;
    });
    if (!warm) {
      std::fprintf(stderr, "failover-bench: the peers did not form a ring of %d (logs in %s)\n", o.ranks, dir.c_str());
      rc = 1;
    } else {
      const int64_t t0 = realMs();
      reap(master, SIGKILL);
      if (o.kill_peer && fork_peers) reap(peers.back(), SIGKILL);
      std::this_thread::sleep_for(std::chrono::milliseconds(o.restart_after_ms));  // the outage (a schedule)
      const int64_t t_restart = realMs();
      master = spawn(master_argv, tag + ".master.log");
      const size_t survivors = static_cast<size_t>(o.ranks) - (o.kill_peer ? 1 : 0);
      const bool back = waitLogs(logs, 120000, [&](const std::vector<std::vector<Event>>& ev) {
        for (size_t i = 0; i < survivors; ++i) {
          const bool resumed =
              std::any_of(ev[i].begin(), ev[i].end(), [&](const Event& e) { return e.kind == "resumed" && e.t >= t0; });
          if (!resumed || oks(ev[i], t_restart) < 5) return false;
        }
        return true;
      });
      for (size_t i = 0; i < survivors; ++i) {
        const std::vector<Event> ev = readLog(logs[i]);
        int64_t resumed = -1, first_ok = -1, gap = 0, prev = -1;
        size_t during = 0;
        for (const Event& e : ev) {
          if (e.kind == "resumed" && resumed < 0 && e.t >= t0) resumed = e.t - t0;
          if (e.kind != "ok") continue;
          if (e.t > t_restart && first_ok < 0) first_ok = e.t - t0;
          if (e.t >= t0 && e.t <= t_restart) ++during;
          if (prev >= 0 && e.t >= t0 - 1000 && (resumed < 0 || e.t <= t0 + resumed + 1000)) gap = std::max(gap, e.t - prev);
          prev = e.t;
        }
        std::printf("run %d peer %zu: resumed_ms=%lld first_ok_ms=%lld max_gap_ms=%lld ops_during=%zu%s\n", run, i,
                    static_cast<long long>(resumed), static_cast<long long>(first_ok), static_cast<long long>(gap),
                    during, back ? "" : " (not back within 120 s)");
        if (json != nullptr) {
          std::fprintf(json,
                       "%s  {\"scenario\": \"%s\", \"run\": %d, \"peer\": %zu, \"ranks\": %d, \"count\": %zu, \"restart_after_ms\": %d, "
                       "\"kill_peer\": %s, \"rebuild_window_ms\": %u, \"master_reconnect_ms\": %lld, "
                       "\"resumed_ms\": %lld, \"first_ok_ms\": %lld, \"max_gap_ms\": %lld, \"ops_during\": %zu}",
                       run == 0 && i == 0 ? "" : ",\n", o.scenario.c_str(), run, i, o.ranks, o.count, o.restart_after_ms,
                       o.kill_peer ? "true" : "false", o.window_ms, static_cast<long long>(o.reconnect_ms),
                       static_cast<long long>(resumed), static_cast<long long>(first_ok), static_cast<long long>(gap),
                       during);
        }
      }
      std::fflush(stdout);
      if (!back) rc = 1;
    }
    for (pid_t p : peers) reap(p, SIGTERM);
    if (fork_peers) {
      reap(master, SIGTERM);
      master = -1;
    }
  }
  if (!fork_peers) {
    std::system(("touch '" + dir + "/stop'").c_str());
    reap(master, SIGTERM);
  }
  if (json != nullptr) {
    std::fprintf(json, "\n]\n");
    std::fclose(json);
  }
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"pccl-failover-bench: the cost of the master's death to a run of looping all-reduces"};
  Options o;
  int peers = 0;
  app.add_option("--role", o.role, "local (default: master and peers here), driver (master only), peer")
      ->check(CLI::IsMember({"local", "driver", "peer"}));
  app.add_option("--ranks", o.ranks, "peers")->check(CLI::Range(2, 64))->capture_default_str();
  app.add_option("--peers", peers, "driver: how many peers run elsewhere (their logs: LOG_DIR/peerI)");
  app.add_option("--count", o.count, "float32 elements per all-reduce")->capture_default_str();
  app.add_option("--restart-after-ms", o.restart_after_ms, "how long the master stays dead")->capture_default_str();
  app.add_flag("--kill-peer", o.kill_peer, "SIGKILL one peer with the master (local role)");
  app.add_option("--window-ms", o.window_ms, "the restarted master's --rebuild-window-ms")->capture_default_str();
  app.add_option("--reconnect-ms", o.reconnect_ms, "the peers' master_reconnect_ms")->capture_default_str();
  app.add_option("--runs", o.runs, "master deaths to measure")->capture_default_str();
  app.add_option("--json", o.json, "write one row per peer and run");
  app.add_option("--scenario", o.scenario, "the network, named in every JSON row")->capture_default_str();
  app.add_option("--master", o.master, "peer: the master's HOST:PORT");
  app.add_option("--listen", o.listen, "driver: the master's HOST:PORT");
  app.add_option("--log", o.log, "peer: its event log");
  app.add_option("--stop-file", o.stop_file, "peer: leave once this file exists (the driver makes LOG_DIR/stop)");
  app.add_option("--log-dir", o.log_dir, "driver: where the peers' logs are (default: a new /tmp directory)");
  CLI11_PARSE(app, argc, argv);
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  o.self = n > 0 ? std::string(self, static_cast<size_t>(n)) : argv[0];
  o.master_bin = o.self.substr(0, o.self.rfind('/')) + "/../src/pccl-master";
  if (const char* m = std::getenv("PCCL_MASTER_BIN")) o.master_bin = m;
  if (o.role == "peer") {
    if (o.master.empty() || o.log.empty()) {
      std::fprintf(stderr, "pccl-failover-bench: --role peer needs --master and --log\n");
      return 2;
    }
    return runPeer(o);
  }
  if (o.role == "driver") {
    if (peers <= 0 || o.log_dir.empty()) {
      std::fprintf(stderr, "pccl-failover-bench: --role driver needs --peers N and --log-dir DIR\n");
      return 2;
    }
    o.ranks = peers;
    return runDriver(o, false);
  }
  return runDriver(o, true);
}
