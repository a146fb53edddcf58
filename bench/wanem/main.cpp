// pccl-wanem: a WAN emulator for any TCP program. Builds one network namespace per rank joined through
// an emulated WAN (per rank: uplink and downlink with a rate and a drop-tail queue; per ordered pair of
// ranks: one-way delay, jitter, random loss per segment, optionally a bottleneck of its own), runs
// COMMAND once per rank inside its namespace, and tears everything down on exit or signal.
//
//   pccl-wanem --ranks N --delay-ms D [--jitter-ms J] [--loss-pct P] [--rate-mbit R] [--queue Q]
//              [--cc cubic|bbr|reno] [--paths FILE] [--faults FILE] [--control FIFO] [--probe] [--probe-rate S]
//              [--stats FILE] -- COMMAND...
//
// Each COMMAND runs with PCCL_WANEM_RANK, PCCL_WANEM_ADDR (its address), PCCL_WANEM_ADDRS (all, comma
// separated), PCCL_WANEM_RANKS and PCCL_WANEM_PHASES (a file to append "LABEL BEGIN_NS END_NS" lines to
// for each timed operation: the verdict is then given per label). Exit status: the worst of the commands',
// 2 for bad usage, 3 when the emulator could not stay faithful (docs/wanem.md, "Faithfulness").
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "faults.hpp"
#include "netns.hpp"
#include "probe.hpp"
#include "report.hpp"
#include "router.hpp"
#include "topology.hpp"

using namespace pccl::wanem;

namespace {

volatile sig_atomic_t g_signal = 0;
void onSignal(int sig) { g_signal = sig; }

struct Args {
  int ranks = 2;
  double delay_ms = 0, jitter_ms = 0, loss_pct = 0, rate_mbit = 0, probe_rate_s = 0;
  std::string cc, paths, stats, queue = "1bdp", phases, faults, control;
  int min_tso_segs = 0;
  bool probe = false, cleanup = false;
  std::vector<std::string> command;
};

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
  setenv("PCCL_WANEM_PHASES", a.phases.c_str(), 1);
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


// --probe: the RTT of every pair of ranks; --probe-rate S: one bulk flow per ordered pair for S seconds.
int probeAll(Network& net, const Topology& topo, const Args& a) {
  int status = 0;
  for (int i = 0; i < a.ranks && g_signal == 0; ++i) {
    for (int j = i + 1; j < a.ranks && g_signal == 0; ++j) {
      const ProbeResult p = probeRtt(net.rankNs(i), net.rankNs(j), net.rankAddr(j), 20);
      if (!p.ok) {
        std::fprintf(stderr, "pccl-wanem: probe %d <-> %d failed: %s\n", i, j, p.error.c_str());
        status = 1;
        continue;
      }
      std::printf("probe rank %d <-> %d: rtt_ms median %.3f min %.3f (configured %.3f)\n", i, j, p.median_ms, p.min_ms,
                  topo.rttMs(i, j));
    }
  }
  for (int i = 0; a.probe_rate_s > 0 && i < a.ranks && g_signal == 0; ++i) {
    for (int j = 0; j < a.ranks && g_signal == 0; ++j) {
      if (i == j) continue;
      const RateResult r = probeRate(net.rankNs(i), net.rankNs(j), net.rankAddr(j), a.probe_rate_s);
      if (!r.ok) {
        std::fprintf(stderr, "pccl-wanem: rate probe %d -> %d failed: %s\n", i, j, r.error.c_str());
        status = 1;
        continue;
      }
      std::printf("probe rank %d -> %d: goodput_mbit %.1f (bottleneck %.1f Mbit/s of IP packets)\n", i, j,
                  r.goodput_mbit, topo.bottleneckMbit(i, j));
    }
  }
  std::fflush(stdout);
  return status;
}

// Applies faults to the router: the --faults schedule (times from start()) and the --control FIFO's lines
// (at once), logging each with its time. Route changes accumulate: each builds on the paths file and the
// changes before it.
class FaultRunner {
 public:
  FaultRunner(TopologyDefaults def, std::vector<std::string> paths_lines, std::string paths_name)
      : def_(def), base_(std::move(paths_lines)), name_(std::move(paths_name)) {}
  ~FaultRunner() { stop(); }

  // The topology with `line` added to the paths file and the route changes applied so far.
  bool check(const std::string& line, Topology* out, std::string* error) {
    std::lock_guard<std::mutex> lk(mu_);
    return build(line, out, error);
  }
  PathCheck checker() {
    return [this](const std::string& line, Topology* out, std::string* error) { return check(line, out, error); };
  }

  // The schedule runs in file order; a time already past applies at once. `phases`: the file whose
  // "begin ..." marks `at phase+D` waits for.
  void start(Router* router, std::vector<Fault> schedule, const std::string& control, const Topology& topo,
             const std::string& phases) {
    router_ = router;
    t0_ = std::chrono::steady_clock::now();
    phases_ = phases;
    if (!schedule.empty()) threads_.emplace_back([this, schedule] { runSchedule(schedule); });
    if (!control.empty()) threads_.emplace_back([this, control, topo] { runControl(control, topo); });
  }
  void stop() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
    threads_.clear();
  }

 private:
  bool build(const std::string& line, Topology* out, std::string* error) {
    std::stringstream text;
    for (const auto& l : base_) text << l << "\n";
    for (const auto& l : applied_) text << l << "\n";
    text << line << "\n";
    if (buildTopology(def_, &text, name_.empty() ? "paths" : name_, out, error)) return true;
    // buildTopology names the line as NAME:N; the route change is not in any file: give the reason alone.
    const auto cut = error->find(": ");
    if (cut != std::string::npos) *error = error->substr(cut + 2);
    return false;
  }
  void apply(const Fault& f) {
    Topology changed;
    if (f.kind == Fault::Kind::kPath) {
      std::lock_guard<std::mutex> lk(mu_);
      std::string error;
      if (!build(f.path_line, &changed, &error)) {
        std::fprintf(stderr, "pccl-wanem: fault '%s' not applied: %s\n", f.text.c_str(), error.c_str());
        return;
      }
      applied_.push_back(f.path_line);
    }
    router_->applyFault(f, f.kind == Fault::Kind::kPath ? &changed : nullptr);
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    std::fprintf(stderr, "pccl-wanem: fault at %.3f s: %s\n", t, f.text.c_str());
  }
  void runSchedule(const std::vector<Fault>& schedule) {
    auto previous = t0_;
    for (const Fault& f : schedule) {
      auto base = f.base == Fault::Base::kPrevious ? previous : t0_;
      if (f.base == Fault::Base::kPhase && !nextPhaseMark(&base)) return;
      std::unique_lock<std::mutex> lk(mu_);
      const auto due =
          base + std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(f.at_s));
      if (cv_.wait_until(lk, due, [this] { return stop_; })) return;
      lk.unlock();
      apply(f);
      previous = std::chrono::steady_clock::now();
    }
  }
  // Waits for the start mark ("begin LABEL NS", every rank writes one as a timed operation starts, with
  // its CLOCK_MONOTONIC time, which is steady_clock's) of an operation that had not started when the
  // fault before was applied: marks already in the file, and the other ranks' marks of the operation
  // taken last, are skipped. False when stopped first. Looks every 20 ms: the fault's time is the mark's.
  bool nextPhaseMark(std::chrono::steady_clock::time_point* at) {
    std::vector<std::string> seen;  // labels of operations that started before (or at) the previous fault
    if (!phases_label_.empty()) seen.push_back(phases_label_);
    bool skipping = true;           // the file's lines up to now: started already
    for (;;) {
      std::ifstream f(phases_);
      f.seekg(static_cast<std::streamoff>(phases_read_));
      std::string line;
      while (std::getline(f, line)) {
        if (f.eof()) break;  // a line still being written: read it whole next time
        phases_read_ += line.size() + 1;
        std::istringstream in(line);
        std::string word, label;
        long long ns = 0;
        if (!(in >> word >> label >> ns) || word != "begin") continue;
        if (skipping || std::find(seen.begin(), seen.end(), label) != seen.end()) {
          seen.push_back(label);
          continue;
        }
        phases_label_ = label;
        *at = std::chrono::steady_clock::time_point(std::chrono::nanoseconds(ns));
        return true;
      }
      skipping = false;
      std::unique_lock<std::mutex> lk(mu_);
      if (cv_.wait_for(lk, std::chrono::milliseconds(20), [this] { return stop_; })) return false;
    }
  }
  void runControl(const std::string& path, const Topology& topo) {
    // Read-write: the FIFO never reports end-of-file when a writer closes it.
    const int fd = open(path.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
      std::fprintf(stderr, "pccl-wanem: --control %s: %s\n", path.c_str(), std::strerror(errno));
      return;
    }
    std::string pending;
    char buf[4096];
    for (;;) {
      {
        std::lock_guard<std::mutex> lk(mu_);
        if (stop_) break;
      }
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      const ssize_t n = read(fd, buf, sizeof buf);
      if (n <= 0) continue;
      pending.append(buf, static_cast<size_t>(n));
      for (size_t nl; (nl = pending.find('\n')) != std::string::npos;) {
        const std::string line = pending.substr(0, nl);
        pending.erase(0, nl + 1);
        Fault f;
        std::string error;
        if (parseFaultLine(line, false, topo, checker(), &f, &error)) {
          apply(f);
        } else if (!error.empty()) {
          std::fprintf(stderr, "pccl-wanem: --control: %s (in '%s'): ignored\n", error.c_str(), line.c_str());
        }
      }
    }
    close(fd);
  }

  Router* router_ = nullptr;
  TopologyDefaults def_;
  std::vector<std::string> base_, applied_;
  std::string name_;
  std::chrono::steady_clock::time_point t0_;
  std::string phases_;
  size_t phases_read_ = 0;    // bytes of the phases file taken (the schedule's thread only)
  std::string phases_label_;  // the operation the last `at phase` fault counted from
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace

int main(int argc, char** argv) {
  Args a;
  CLI::App app{"pccl-wanem: run a command per rank over an emulated wide-area network"};
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);  // a later flag overrides
  app.add_option("--ranks", a.ranks, "rank namespaces")->check(CLI::Range(1, 64));
  app.add_option("--delay-ms", a.delay_ms, "one-way delay of every path (RTT = 2x)")->check(CLI::Range(0.0, 10000.0));
  app.add_option("--jitter-ms", a.jitter_ms, "extra one-way delay, uniform in [0, J]")->check(CLI::Range(0.0, 10000.0));
  app.add_option("--loss-pct", a.loss_pct, "random loss per TCP segment, percent")->check(CLI::Range(0.0, 100.0));
  app.add_option("--rate-mbit", a.rate_mbit, "every rank's uplink and downlink rate (0 = unlimited)")
      ->check(CLI::Range(0.0, 100000.0));
  app.add_option("--queue", a.queue, "drop-tail queue of every rate-limited link: BYTES[k|m], MSms or Nbdp (default 1bdp)");
  app.add_option("--cc", a.cc, "TCP congestion control in every rank namespace")->check(CLI::IsMember({"cubic", "bbr", "reno"}));
  app.add_option("--min-tso-segs", a.min_tso_segs, "net.ipv4.tcp_min_tso_segs in the rank namespaces (0 = kernel default)")
      ->check(CLI::Range(0, 64));
  app.add_option("--paths", a.paths, "file of per-region / per-rank paths and links (see docs/wanem.md)");
  app.add_flag("--probe", a.probe, "measure the RTT of every pair of ranks before running the command");
  app.add_option("--probe-rate", a.probe_rate_s, "also measure one TCP flow's goodput on every ordered pair, S seconds each")
      ->check(CLI::Range(0.5, 600.0));
  app.add_option("--faults", a.faults, "network faults to apply at given times (docs/wanem.md, \"Faults\")");
  app.add_option("--control", a.control, "a FIFO (created if missing) whose lines apply faults at once");
  app.add_option("--stats", a.stats, "write the emulator's statistics and verdicts (JSON) to this file");
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
  TopologyDefaults def;
  def.ranks = a.ranks;
  def.delay_ms = a.delay_ms;
  def.jitter_ms = a.jitter_ms;
  def.loss_pct = a.loss_pct;
  def.rate_mbit = a.rate_mbit;
  if (!parseQueueSpec(a.queue, &def.queue)) {
    std::fprintf(stderr, "pccl-wanem: --queue %s: expected BYTES (e.g. 600000, 512k, 2m), MSms (20ms) or Nbdp (1bdp)\n",
                 a.queue.c_str());
    return 2;
  }
  Topology topo;
  std::string error;
  std::ifstream paths_file;
  if (!a.paths.empty()) {
    paths_file.open(a.paths);
    if (!paths_file) {
      std::fprintf(stderr, "pccl-wanem: cannot read %s\n", a.paths.c_str());
      return 2;
    }
  }
  if (!buildTopology(def, a.paths.empty() ? nullptr : &paths_file, a.paths, &topo, &error)) {
    std::fprintf(stderr, "pccl-wanem: %s\n", error.c_str());
    return 2;
  }
  for (size_t r = 0; r < topo.edge.size(); ++r) {
    if (topo.edge[r] == EdgeKind::kFirewall) std::printf("pccl-wanem: rank %zu is behind a firewall (no connection in)\n", r);
    if (topo.edge[r] == EdgeKind::kCone || topo.edge[r] == EdgeKind::kSymmetric) {
      std::printf("pccl-wanem: rank %zu is behind a %s NAT, public address 10.202.%zu.2\n", r, edgeName(topo.edge[r]), r);
    }
  }
  std::vector<std::string> paths_lines;
  if (!a.paths.empty()) {
    std::ifstream again(a.paths);
    for (std::string line; std::getline(again, line);) paths_lines.push_back(line);
  }
  std::vector<Fault> schedule;
  FaultRunner runner(def, paths_lines, a.paths);  // checks the route changes now, applies faults from start()
  if (!a.faults.empty()) {
    std::ifstream ff(a.faults);
    if (!ff) {
      std::fprintf(stderr, "pccl-wanem: cannot read %s\n", a.faults.c_str());
      return 2;
    }
    if (!parseFaultsFile(ff, a.faults, topo, runner.checker(), &schedule, &error)) {
      std::fprintf(stderr, "pccl-wanem: %s\n", error.c_str());
      return 2;
    }
  }
  if (geteuid() != 0) {
    std::fprintf(stderr, "pccl-wanem: must run as root (it creates network namespaces, veths and a TUN device)\n");
    return 2;
  }
  if (a.command.empty() && !a.probe && a.probe_rate_s <= 0) {
    std::fprintf(stderr, "pccl-wanem: nothing to run: give -- COMMAND... (or --probe)\n");
    return 2;
  }
  if (access("/dev/net/tun", R_OK | W_OK) != 0 || runCommand({"ip", "netns", "list"}) != 0) {
    std::fprintf(stderr, "pccl-wanem: network namespaces or /dev/net/tun are not available here\n");
    return 2;
  }
  char phases_tmpl[] = "/tmp/pccl-wanem-phases.XXXXXX";
  const int phases_fd = mkstemp(phases_tmpl);
  if (phases_fd < 0) {
    std::fprintf(stderr, "pccl-wanem: cannot create a phases file in /tmp: %s\n", std::strerror(errno));
    return 2;
  }
  close(phases_fd);
  chmod(phases_tmpl, 0666);  // the commands may drop privileges
  a.phases = phases_tmpl;
  signal(SIGINT, onSignal);
  signal(SIGTERM, onSignal);
  signal(SIGPIPE, SIG_IGN);
  NetConfig nc;
  nc.ranks = a.ranks;
  nc.cc = a.cc;
  nc.min_tso_segs = a.min_tso_segs;
  Network net(nc);
  if (!net.setUp(&error)) {
    std::fprintf(stderr, "pccl-wanem: setup failed: %s\n", error.c_str());
    unlink(phases_tmpl);
    return 2;
  }
  std::vector<uint32_t> addrs;
  for (int r = 0; r < a.ranks; ++r) addrs.push_back(net.rankAddrValue(r));
  Router router(net.tunFds(), addrs, topo, static_cast<uint64_t>(getpid()));
  router.start([&net] { return net.kernelDrops(); });
  bool made_fifo = false;
  if (!a.control.empty()) {
    struct stat st {};
    if (stat(a.control.c_str(), &st) != 0) {
      made_fifo = mkfifo(a.control.c_str(), 0600) == 0;
    } else if (!S_ISFIFO(st.st_mode)) {
      std::fprintf(stderr, "pccl-wanem: --control %s exists and is not a FIFO\n", a.control.c_str());
    }
  }
  std::fprintf(stderr,
               "pccl-wanem: %d ranks, one-way delay %.1f ms, jitter %.1f ms, loss %.4f%% per segment, rate %.0f Mbit/s "
               "(queue %s), cc %s%s\n",
               a.ranks, a.delay_ms, a.jitter_ms, a.loss_pct, a.rate_mbit, a.queue.c_str(),
               a.cc.empty() ? "default" : a.cc.c_str(), a.paths.empty() ? "" : (", paths from " + a.paths).c_str());
  int status = 0;
  if (a.probe || a.probe_rate_s > 0) status = probeAll(net, topo, a);
  if (!a.command.empty() && g_signal == 0) {
    std::vector<pid_t> pids;
    runner.start(&router, schedule, a.control, topo, a.phases);
    for (int r = 0; r < a.ranks; ++r) pids.push_back(runRank(net, r, a));
    status = std::max(status, waitAll(pids));
  }
  runner.stop();
  if (made_fifo) unlink(a.control.c_str());
  router.stop();
  RunReport rep;
  rep.stats = router.stats();
  rep.run = judge("", rep.stats.total);
  for (const auto& [label, intervals] : readPhases(a.phases, &rep.bad_phase_lines)) {
    rep.phases.push_back(judge(label, router.window(intervals)));
  }
  unlink(phases_tmpl);
  net.teardown();
  printReport(rep, stderr);
  if (!a.stats.empty()) {
    std::ofstream f(a.stats);
    writeJson(rep, f);
  }
  if (g_signal != 0) return 128 + g_signal;
  if (status == 0 && !rep.faithful()) return 3;
  return status;
}
