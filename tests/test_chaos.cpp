// The chaos test (docs/security.md, "Chaos"): a pccl-master process and 6 chaos_peer processes looping
// all-reduces while this driver SIGKILLs peers (and restarts them), SIGSTOPs them for a while (a short
// freeze is survived, a long one gets the peer dropped and it rejoins) at random, and twice SIGKILLs the
// master and restarts it at the same address (with its state file) 0.3..2.5 s later: the peers'
// rings go on meanwhile and the restarted master takes the run back. Then a quiet phase in
// which every peer must be back in one ring doing operations. Invariants, checked on the peers' logs
// and the master's /proc entries:
//   - every successful operation on every peer has the correct result, and every peer of the same
//     operation (epoch, k-th success in that epoch) holds the same bytes;
//   - no pccl call overran its deadline (except calls of a peer that was frozen meanwhile);
//   - the master's resident memory and open file count stay flat (from a baseline taken after its last
//     restart);
//   - the run, and every process's exit after SIGTERM, end on time.
// It runs twice: on one flat ring, and with the peers in two regions of three running two-level
// all-reduces (docs/algorithms.md §12), which must then have happened.
// PCCL_CHAOS_SECONDS sets each chaos phase (default 30); a long value is the soak mode for manual runs.
#include <catch2/catch.hpp>

#include <dirent.h>
#include <signal.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "test_support.hpp"

using namespace pccl;
using namespace pccl::test;

namespace {

constexpr int kPeers = 6;

int64_t realMs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

long rssKb(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string key;
  long value = -1;
  while (f >> key) {
    if (key == "VmRSS:") {
      f >> value;
      return value;
    }
  }
  return -1;
}

int openFds(pid_t pid) {
  DIR* d = opendir(("/proc/" + std::to_string(pid) + "/fd").c_str());
  if (d == nullptr) return -1;
  int n = 0;
  while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

// "key=value" fields of a log line.
std::map<std::string, std::string> fields(const std::string& line) {
  std::map<std::string, std::string> out;
  std::istringstream in(line);
  std::string word;
  in >> word;
  out["kind"] = word;
  while (in >> word) {
    const size_t eq = word.find('=');
    if (eq != std::string::npos) out[word.substr(0, eq)] = word.substr(eq + 1);
  }
  return out;
}

struct Peer {
  std::unique_ptr<ChildProcess> proc;
  std::string log;
  std::vector<std::pair<int64_t, int64_t>> frozen;  // [SIGSTOP, SIGCONT] in CLOCK_REALTIME ms
  int64_t restart_at = 0;                           // killed: when to start it again
};

// One chaos run. `regions`: the peers sit in two regions of three and ask for two-level all-reduces
// (docs/algorithms.md §12; no gather, so every operation runs in two levels while both regions have
// more than one member).
void runChaos(bool regions) {
  const char* env = std::getenv("PCCL_CHAOS_SECONDS");
  const int chaos_s = env != nullptr ? std::atoi(env) : 30;
  // Under the test's working directory (the build tree).
  const std::string dir = regions ? "chaos-logs-regions" : "chaos-logs";
  REQUIRE(std::system(("rm -rf " + dir + " && mkdir -p " + dir).c_str()) == 0);

  // Under ASan, freed memory sits in a 256 MB quarantine and RSS would grow by that much whatever the
  // master does: a small quarantine keeps the memory check meaningful (LeakSanitizer still runs at exit).
  const char* asan = std::getenv("ASAN_OPTIONS");
  const std::string master_asan = std::string("ASAN_OPTIONS=") + (asan != nullptr ? asan : "") +
                                  (asan != nullptr && *asan != '\0' ? ":" : "") + "quarantine_size_mb=1";
  const std::string state = dir + "/master.state";
  auto startMaster = [&](const std::string& listen) {
    return std::make_unique<ChildProcess>(
        std::vector<std::string>{PCCL_MASTER_BIN, "--listen", listen, "--heartbeat-ms", "200", "--peer-timeout-ms",
                                 "2000", "--state-file", state, "--rebuild-window-ms", "4000", "--status-interval-s",
                                 "0"},
        std::vector<std::string>{master_asan});
  };
  std::unique_ptr<ChildProcess> master = startMaster("127.0.0.1:0");
  auto line = master->waitForLine("listening on", 10000);
  REQUIRE(line);
  const std::string address = line->substr(line->rfind(' ') + 1);

  std::vector<Peer> peers(kPeers);
  auto start = [&](int i) {
    peers[i].log = dir + "/peer" + std::to_string(i) + ".log";
    std::vector<std::string> vars;
    if (regions) {
      vars = {std::string("PCCL_REGION=") + (i % 2 == 0 ? "west" : "east"), "PCCL_ALGORITHM=hierarchical",
             "PCCL_GATHER_BYTES=0"};
    }
    peers[i].proc = std::make_unique<ChildProcess>(
        std::vector<std::string>{PCCL_CHAOS_PEER_BIN, "--master", address, "--log", peers[i].log, "--quiet-file",
                                 dir + "/quiet"},
        vars);
  };
  for (int i = 0; i < kPeers; ++i) start(i);

  std::mt19937 rng(12345);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  // Warm-up: the peers join (each waits for the others' votes); the master's baseline is taken then.
  std::this_thread::sleep_for(std::chrono::seconds(8));  // a scripted schedule, not a wait for an event
  long rss0 = rssKb(master->pid());
  int fds0 = openFds(master->pid());

  const int64_t chaos_start = realMs();
  const int64_t chaos_end = chaos_start + chaos_s * 1000LL;
  // The master dies at a quarter and at half of the chaos phase; its memory baseline is taken again 8 s
  // after the last restart (the peers are back by then).
  std::vector<int64_t> master_kills{chaos_start + chaos_s * 250LL, chaos_start + chaos_s * 500LL};
  int64_t master_restart_at = 0, rebaseline_at = 0;
  int kills = 0, freezes = 0, long_freezes = 0, master_deaths = 0;
  while (realMs() < chaos_end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(pick(300, 1500)));  // the next random event
    if (!master_kills.empty() && realMs() >= master_kills.front() && master_restart_at == 0) {
      master_kills.erase(master_kills.begin());
      master.reset();      // SIGKILL and reap
      rss0 = -1;           // its memory says nothing about the next one
      rebaseline_at = 0;   // nor does a baseline still due (the next restart sets one)
      master_restart_at = realMs() + pick(300, 2500);
      ++master_deaths;
    }
    if (master_restart_at != 0 && realMs() >= master_restart_at) {
      master_restart_at = 0;
      master = startMaster(address);
      REQUIRE(master->waitForLine("listening on", 10000));
      rebaseline_at = realMs() + 8000;
    }
    if (rebaseline_at != 0 && realMs() >= rebaseline_at && master) {
      rebaseline_at = 0;
      rss0 = rssKb(master->pid());
      fds0 = openFds(master->pid());
    }
    for (int i = 0; i < kPeers; ++i) {  // restart the killed peers that are due
      if (peers[i].restart_at != 0 && realMs() >= peers[i].restart_at) {
        peers[i].restart_at = 0;
        start(i);
      }
    }
    const int victim = pick(0, kPeers - 1);
    if (peers[victim].restart_at != 0) continue;  // down already
    const int action = pick(0, 9);
    if (action < 3) {  // SIGKILL; restart in 0.5..3 s
      peers[victim].proc.reset();  // the destructor SIGKILLs and reaps
      peers[victim].restart_at = realMs() + pick(500, 3000);
      ++kills;
    } else if (action < 6) {
      // Freeze: short (survived) or past the master's limit (dropped, rejoins): the 2 s peer timeout, 1 s
      // for TCP to see a dark path back and a 200 ms heartbeat (docs/algorithms.md §6, "Network faults").
      const int ms = action == 5 ? pick(3700, 5000) : pick(100, 1200);
      const int64_t t0 = realMs();
      peers[victim].proc->signal(SIGSTOP);
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
      peers[victim].proc->signal(SIGCONT);
      peers[victim].frozen.emplace_back(t0, realMs());
      ++freezes;
      long_freezes += ms > 3200;
    }  // else: a quiet interval
  }
  for (int i = 0; i < kPeers; ++i) {
    if (peers[i].restart_at != 0) {
      peers[i].restart_at = 0;
      start(i);
    }
  }
  if (master_restart_at != 0) {  // a chaos phase too short for the schedule
    master = startMaster(address);
    REQUIRE(master->waitForLine("listening on", 10000));
    rss0 = -1;
  }
  // Quiet phase: every peer back in one ring of 6, doing operations. Waited for as an event (each
  // peer says when its operations run with all 6), with a deadline generous enough for sanitizers.
  const int64_t quiet_start = realMs();
  REQUIRE(std::system(("touch " + dir + "/quiet").c_str()) == 0);
  const auto quiet_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(150);
  for (int i = 0; i < kPeers; ++i) {
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(quiet_deadline - std::chrono::steady_clock::now());
      auto l = peers[i].proc->waitForLine("quiet-ok world=", static_cast<int>(std::max<int64_t>(left.count(), 0)));
      if (!l || l->find("world=" + std::to_string(kPeers)) != std::string::npos) break;
    }
  }
  WARN("chaos: every peer back in one ring of " << kPeers << " after " << (realMs() - quiet_start) << " ms");
  std::this_thread::sleep_for(std::chrono::seconds(3));  // a few more operations with all 6 (a schedule)
  const long rss1 = rssKb(master->pid());
  const int fds1 = openFds(master->pid());

  // Stop: every process leaves on SIGTERM, on time. The peers do not stop at once: those still running
  // after others left re-form a smaller ring and log operations with fewer peers, so the quiet-phase
  // check below looks only at operations that ended before this moment.
  const int64_t stop_ms = realMs();
  for (auto& p : peers) p.proc->signal(SIGTERM);
  for (auto& p : peers) CHECK(p.proc->waitExit(15000) == 0);
  master->signal(SIGTERM);
  CHECK(master->waitExit(5000) == 0);

  // ---- the invariants, from the logs --------------------------------------------------------------
  std::map<std::pair<std::string, std::string>, std::set<std::string>> hashes;  // (epoch, seq) -> hashes
  size_t ok_ops = 0, wrong = 0, overruns = 0, quiet_ops_full = 0, two_level_ops = 0;
  std::set<int> quiet_peers;
  for (int i = 0; i < kPeers; ++i) {
    std::ifstream f(peers[i].log);
    std::string l, last_ok;
    while (std::getline(f, l)) {
      auto kv = fields(l);
      if (kv["kind"] == "ok") {
        ++ok_ops;
        wrong += std::stoull(kv["wrong"]);
        hashes[{kv["epoch"], kv["seq"]}].insert(kv["hash"]);
        if (kv["world"] == std::to_string(kPeers)) quiet_ops_full += 1;
        two_level_ops += kv["hier"] == "1";
        if (std::stoll(kv["t"]) < stop_ms) last_ok = l;
      } else if (kv["kind"] == "overrun") {
        const int64_t s = std::stoll(kv["start"]), e = std::stoll(kv["end"]);
        bool was_frozen = false;
        for (const auto& fr : peers[i].frozen) was_frozen = was_frozen || (fr.first < e && fr.second > s);
        if (!was_frozen) {
          ++overruns;
          WARN("peer " << i << ": " << l);
        }
      }
    }
    // In the quiet phase this peer completed operations with all 6 (its last "ok" line before the stop).
    if (!last_ok.empty() && fields(last_ok)["world"] == std::to_string(kPeers)) quiet_peers.insert(i);
  }
  size_t split = 0;
  for (const auto& [op, hs] : hashes) split += hs.size() > 1;
  INFO("kills " << kills << ", freezes " << freezes << " (" << long_freezes << " past the timeout), "
                << ok_ops << " successful operations over " << hashes.size() << " distinct ones; quiet phase from "
                << quiet_start);
  WARN("chaos: " << master_deaths << " master kills and restarts, " << kills << " kills, " << freezes << " freezes (" << long_freezes << " past the peer timeout), "
                 << ok_ops << " successful operations (" << hashes.size() << " distinct), master RSS " << rss0
                 << " -> " << rss1 << " kB, fds " << fds0 << " -> " << fds1);
  CHECK(kills + freezes > 0);
  CHECK(ok_ops > 100);
  CHECK(wrong == 0);
  CHECK(split == 0);          // byte-identical on every peer of every operation
  CHECK(overruns == 0);       // no call past its deadline
  CHECK(quiet_peers.size() == kPeers);  // everyone back in one ring of 6 at the end
  CHECK(quiet_ops_full > 0);
  // Two-level operations happened exactly in the run with regions.
  INFO(two_level_ops << " two-level operations");
  CHECK((two_level_ops > 0) == regions);
  // The master's memory and descriptors stay flat (same 6 peers connected at both samples).
  INFO("master RSS " << rss0 << " -> " << rss1 << " kB, fds " << fds0 << " -> " << fds1);
  CHECK(master_deaths > 0);
  CHECK(rss1 > 0);
  if (rss0 > 0) {  // a baseline taken after the last restart
    CHECK(rss1 <= rss0 + 8 * 1024);
    CHECK(fds1 <= fds0 + 2);
  }
}

}  // namespace

TEST_CASE("chaos: 6 peers loop all-reduces through random kills, freezes and restarts, flat and in two regions",
          "[chaos]") {
  SECTION("one flat ring") { runChaos(false); }
  SECTION("two regions of three, two-level all-reduces") { runChaos(true); }
}
