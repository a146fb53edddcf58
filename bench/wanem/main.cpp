// pccl-wanem: a WAN emulator for any TCP program. Builds one network namespace per rank joined
// through an emulated WAN (per-path one-way delay, jitter, random loss, per-rank rate), runs COMMAND
// once per rank inside its namespace, and tears everything down on exit or signal.
//
//   pccl-wanem --ranks N --delay-ms D [--jitter-ms J] [--loss-pct P] [--rate-mbit R] [--cc cubic|bbr]
//              [--paths FILE] [--probe] [--stats FILE] -- COMMAND...
//
// Each COMMAND runs with PCCL_WANEM_RANK, PCCL_WANEM_ADDR (its address), PCCL_WANEM_ADDRS (all, comma
// separated) and PCCL_WANEM_RANKS. Exit status: the worst of the commands', 2 for bad usage, 3 when the
// emulator could not stay faithful (queue overflow, TUN drops, releases late by more than 1 ms at p99).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "netns.hpp"
#include "probe.hpp"
#include "router.hpp"

using namespace pccl::wanem;

namespace {

volatile sig_atomic_t g_signal = 0;
void onSignal(int sig) { g_signal = sig; }

struct Args {
  int ranks = 2;
  double delay_ms = 0, jitter_ms = 0, loss_pct = 0, rate_mbit = 0;
  std::string cc, paths, stats;
  bool probe = false, cleanup = false;
  std::vector<std::string> command;
};

// Paths file: "rank I REGION" lines give each rank a region; "delay A B MS" the one-way delay between
// two regions (both directions); optional "rate I MBIT" and "loss A B PCT". '#' starts a comment.
bool loadPaths(const Args& a, std::vector<std::vector<PathModel>>* paths, std::vector<double>* rates, std::string* error) {
  const size_t n = static_cast<size_t>(a.ranks);
  paths->assign(n, std::vector<PathModel>(n, PathModel{a.delay_ms, a.jitter_ms, a.loss_pct / 100.0}));
  rates->assign(n, a.rate_mbit);
  if (a.paths.empty()) return true;
  std::ifstream f(a.paths);
  if (!f) return *error = "cannot read " + a.paths, false;
  std::map<int, std::string> region;
  std::map<std::pair<std::string, std::string>, double> delay, loss;
  std::string line;
  int lineno = 0;
  while (std::getline(f, line)) {
    ++lineno;
    line = line.substr(0, line.find('#'));
    std::istringstream in(line);
    std::string kind;
    if (!(in >> kind)) continue;
    bool ok = false;
    if (kind == "rank") {
      int r;
      std::string reg;
      ok = static_cast<bool>(in >> r >> reg) && r >= 0 && r < a.ranks;
      if (ok) region[r] = reg;
    } else if (kind == "delay" || kind == "loss") {
      std::string x, y;
      double v;
      ok = static_cast<bool>(in >> x >> y >> v) && v >= 0;
      auto& m = kind == "delay" ? delay : loss;
      if (ok) m[{x, y}] = m[{y, x}] = v;
    } else if (kind == "rate") {
      int r;
      double v;
      ok = static_cast<bool>(in >> r >> v) && r >= 0 && r < a.ranks && v >= 0;
      if (ok) (*rates)[static_cast<size_t>(r)] = v;
    }
    if (!ok) return *error = a.paths + ":" + std::to_string(lineno) + ": cannot parse '" + line + "'", false;
  }
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) {
      if (i == j || region.count(static_cast<int>(i)) == 0 || region.count(static_cast<int>(j)) == 0) continue;
      const auto key = std::make_pair(region[static_cast<int>(i)], region[static_cast<int>(j)]);
      if (delay.count(key) != 0) (*paths)[i][j].delay_ms = delay[key];
      if (loss.count(key) != 0) (*paths)[i][j].loss = loss[key] / 100.0;
    }
  }
  return true;
}

pid_t runRank(Network& net, int r, const Args& a) {
  const pid_t pid = fork();
  if (pid != 0) return pid;
  std::string error;
  if (!Network::enter(net.rankNs(r), &error)) {
    std::fprintf(stderr, "pccl-wanem: %s\n", error.c_str());
    _exit(126);
  }
  std::string all;
  for (int i = 0; i < a.ranks; ++i) all += (i ? "," : "") + net.rankAddr(i);
  setenv("PCCL_WANEM_RANK", std::to_string(r).c_str(), 1);
  setenv("PCCL_WANEM_RANKS", std::to_string(a.ranks).c_str(), 1);
  setenv("PCCL_WANEM_ADDR", net.rankAddr(r).c_str(), 1);
  setenv("PCCL_WANEM_ADDRS", all.c_str(), 1);
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  std::vector<char*> args;
  for (const auto& s : a.command) args.push_back(const_cast<char*>(s.c_str()));
  args.push_back(nullptr);
  execvp(args[0], args.data());
  std::fprintf(stderr, "pccl-wanem: cannot run %s: %s\n", args[0], std::strerror(errno));
  _exit(127);
}

// Waits for all commands; on a signal, stops them (TERM, then KILL after 3 s).
int waitAll(std::vector<pid_t> pids) {
  int worst = 0;
  std::chrono::steady_clock::time_point kill_at{};
  while (!pids.empty()) {
    int st = 0;
    const pid_t p = waitpid(-1, &st, WNOHANG);
    if (p > 0) {
      pids.erase(std::remove(pids.begin(), pids.end(), p), pids.end());
      worst = std::max(worst, WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
      continue;
    }
    if (g_signal != 0 && kill_at == std::chrono::steady_clock::time_point{}) {
      for (pid_t q : pids) kill(q, SIGTERM);
      kill_at = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    }
    if (kill_at != std::chrono::steady_clock::time_point{} && std::chrono::steady_clock::now() > kill_at) {
      for (pid_t q : pids) kill(q, SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  CLI::App app{"pccl-wanem: run a command per rank over an emulated wide-area network"};
  app.add_option("--ranks", a.ranks, "rank namespaces")->check(CLI::Range(1, 64));
  app.add_option("--delay-ms", a.delay_ms, "one-way delay of every path (RTT = 2x)")->check(CLI::Range(0.0, 10000.0));
  app.add_option("--jitter-ms", a.jitter_ms, "extra one-way delay, uniform in [0, J]")->check(CLI::Range(0.0, 10000.0));
  app.add_option("--loss-pct", a.loss_pct, "random loss per segment, percent")->check(CLI::Range(0.0, 100.0));
  app.add_option("--rate-mbit", a.rate_mbit, "per-rank rate, both directions (0 = unshaped)")->check(CLI::Range(0.0, 100000.0));
  app.add_option("--cc", a.cc, "TCP congestion control in every rank namespace")->check(CLI::IsMember({"cubic", "bbr", "reno"}));
  app.add_option("--paths", a.paths, "file of per-region delays (see docs/wanem.md)");
  app.add_flag("--probe", a.probe, "measure each rank's RTT to rank 0 before running the command");
  app.add_option("--stats", a.stats, "write the emulator's statistics (JSON) to this file");
  app.add_flag("--cleanup", a.cleanup, "remove namespaces left behind by a killed pccl-wanem, then exit");
  app.add_option("command", a.command, "the command to run per rank (after --)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // --help is not an error; everything else is bad usage
  }
  if (a.cleanup) {
    std::printf("pccl-wanem: removed %d stale namespace(s)\n", Network::cleanupStale());
    return 0;
  }
  if (geteuid() != 0) {
    std::fprintf(stderr, "pccl-wanem: must run as root (it creates network namespaces, veths and a TUN device)\n");
    return 2;
  }
  if (a.command.empty() && !a.probe) {
    std::fprintf(stderr, "pccl-wanem: nothing to run: give -- COMMAND... (or --probe)\n");
    return 2;
  }
  if (access("/dev/net/tun", R_OK | W_OK) != 0 || runCommand({"ip", "netns", "list"}) != 0) {
    std::fprintf(stderr, "pccl-wanem: network namespaces or /dev/net/tun are not available here\n");
    return 2;
  }
  std::vector<std::vector<PathModel>> paths;
  NetConfig nc;
  nc.ranks = a.ranks;
  nc.cc = a.cc;
  std::string error;
  if (!loadPaths(a, &paths, &nc.rate_mbit, &error)) {
    std::fprintf(stderr, "pccl-wanem: %s\n", error.c_str());
    return 2;
  }
  signal(SIGINT, onSignal);
  signal(SIGTERM, onSignal);
  signal(SIGPIPE, SIG_IGN);
  Network net(nc);
  if (!net.setUp(&error)) {
    std::fprintf(stderr, "pccl-wanem: setup failed: %s\n", error.c_str());
    return 2;
  }
  std::vector<uint32_t> addrs;
  for (int r = 0; r < a.ranks; ++r) addrs.push_back(net.rankAddrValue(r));
  Router router(net.tunFds(), addrs, paths, static_cast<uint64_t>(getpid()));
  router.start();
  const uint64_t tun_drops0 = net.tunDrops();
  std::fprintf(stderr, "pccl-wanem: %d ranks, one-way delay %.1f ms, jitter %.1f ms, loss %.4f%%, rate %.0f Mbit/s, cc %s%s\n",
               a.ranks, a.delay_ms, a.jitter_ms, a.loss_pct, a.rate_mbit, a.cc.empty() ? "default" : a.cc.c_str(),
               a.paths.empty() ? "" : (", paths from " + a.paths).c_str());
  int status = 0;
  if (a.probe && a.ranks > 1) {
    for (int r = 1; r < a.ranks && g_signal == 0; ++r) {
      ProbeResult p = probeRtt(net.rankNs(0), net.rankNs(r), net.rankAddr(r), 20);
      if (!p.ok) {
        std::fprintf(stderr, "pccl-wanem: probe failed: %s\n", p.error.c_str());
        status = 1;
        continue;
      }
      const double want = paths[0][static_cast<size_t>(r)].delay_ms + paths[static_cast<size_t>(r)][0].delay_ms;
      std::printf("probe rank 0 <-> %d: rtt_ms median %.3f min %.3f (configured %.3f)\n", r, p.median_ms, p.min_ms, want);
    }
    std::fflush(stdout);
  }
  if (!a.command.empty() && g_signal == 0) {
    std::vector<pid_t> pids;
    for (int r = 0; r < a.ranks; ++r) pids.push_back(runRank(net, r, a));
    status = std::max(status, waitAll(pids));
  }
  router.stop();
  const RouterStats s = router.stats();
  const uint64_t tun_drops = net.tunDrops() - tun_drops0;
  net.teardown();
  const bool faithful = s.dropped_overflow == 0 && tun_drops == 0 && s.late_p99_us <= 1000;
  std::fprintf(stderr,
               "pccl-wanem: %llu packets (%llu segments, %.1f MB), %llu segments lost on purpose, emulator drops %llu "
               "(queue) + %llu (TUN), release lateness p50 %.0f us p99 %.0f us max %.0f us: %s\n",
               static_cast<unsigned long long>(s.packets), static_cast<unsigned long long>(s.segments), s.bytes / 1e6,
               static_cast<unsigned long long>(s.lost_random), static_cast<unsigned long long>(s.dropped_overflow),
               static_cast<unsigned long long>(tun_drops), s.late_p50_us, s.late_p99_us, s.late_max_us,
               faithful ? "faithful" : "NOT FAITHFUL (results invalid)");
  if (!a.stats.empty()) {
    std::ofstream f(a.stats);
    f << "{\"packets\": " << s.packets << ", \"segments\": " << s.segments << ", \"bytes\": " << s.bytes
      << ", \"lost_random\": " << s.lost_random << ", \"dropped_overflow\": " << s.dropped_overflow
      << ", \"tun_drops\": " << tun_drops << ", \"late_p50_us\": " << s.late_p50_us << ", \"late_p99_us\": "
      << s.late_p99_us << ", \"late_max_us\": " << s.late_max_us << ", \"faithful\": " << (faithful ? "true" : "false")
      << "}\n";
  }
  if (g_signal != 0) return 128 + g_signal;
  if (status == 0 && !faithful) return 3;
  return status;
}
