// pccl-master: the control-plane daemon. CLI11 over pccl::Master; design.md §8 is the contract.
#include <CLI/CLI.hpp>
#include <cerrno>
#include <csignal>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include "pccl/master.hpp"
#include "pccl/version.h"
#include "util/log.hpp"
#include "util/secret.hpp"

namespace {
// One line an operator (or a supervisor) can grep: what this master is doing now.
void printStatus(const pccl::Master& master) {
  const pccl::MasterStats s = master.stats();
  static const char* const kRoles[] = {"leader", "standby", "recovering", "follower"};
  std::string run;
  for (size_t i = 0; i < 4; ++i) run += "0123456789abcdef"[s.run_id[i] >> 4], run += "0123456789abcdef"[s.run_id[i] & 15];
  std::printf("pccl-master status: role=%s run=%s term=%llu epoch=%llu accepted=%u pending=%u connections=%llu "
              "collectives=%llu building=%d measuring=%d takeovers=%llu step_downs=%llu unreachable=%u\n",
              kRoles[s.role >= 0 && s.role <= 3 ? s.role : 0], run.c_str(), static_cast<unsigned long long>(s.term),
              static_cast<unsigned long long>(s.epoch), s.accepted, s.pending,
              static_cast<unsigned long long>(s.connections), static_cast<unsigned long long>(s.collectives),
              s.building ? 1 : 0, s.measuring ? 1 : 0, static_cast<unsigned long long>(s.takeovers),
              static_cast<unsigned long long>(s.step_downs), s.unreachable);
  std::fflush(stdout);
}
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"pccl-master: membership, ring order and heartbeats for a pccl run"};
  pccl::MasterConfig config;
  std::string secret_file;
  app.add_option("--listen", config.listen_address, "HOST:PORT to listen on (port 0 = any)")->capture_default_str();
  app.add_option("--secret-file", secret_file, "file holding the shared secret peers must prove")->check(CLI::ExistingFile);
  app.add_option("--heartbeat-ms", config.heartbeat_interval_ms, "heartbeat interval")->capture_default_str()
      ->check(CLI::Range(1u, 3600000u));
  app.add_option("--peer-timeout-ms", config.peer_timeout_ms, "silence after which a peer is removed (plus PCCL_TCP_RTO_MAX_MS, 1 s, and one heartbeat interval)")
      ->capture_default_str()->check(CLI::Range(2u, 86400000u));
  app.add_option("--handshake-timeout-ms", config.handshake_timeout_ms, "deadline for a new connection to authenticate")
      ->capture_default_str()->check(CLI::Range(1u, 600000u));
  app.add_flag("--encrypt", config.encrypt, "encrypt every connection (needs --secret-file; peers set encrypt too)");
  app.add_option("--max-peers", config.max_peers, "most peers admitted at once")->capture_default_str()
      ->check(CLI::Range(1u, 65536u));
  if (const char* env = std::getenv("PCCL_ANNOUNCE_WINDOW_MS"); env != nullptr && *env != '\0') {
    char* end = nullptr;
    const unsigned long v = std::strtoul(env, &end, 10);
    if (*end != '\0' || v > 86400000ul || env[0] == '-') {
      std::fprintf(stderr, "pccl-master: PCCL_ANNOUNCE_WINDOW_MS must be 0..86400000, got '%s'\n", env);
      return 2;
    }
    config.announce_window_ms = static_cast<uint32_t>(v);
  }
  app.add_option("--announce-window-ms", config.announce_window_ms,
                 "fail a tag the peers' calls diverge on after this long, naming who is missing; 0 = off "
                 "(default: PCCL_ANNOUNCE_WINDOW_MS, else 30000)")
      ->capture_default_str()->check(CLI::Range(0u, 86400000u));
  app.add_option("--probe-budget-ms", config.probe_budget_ms,
                 "pcclOptimizeTopology: a sender measures a link for at most this long per round")
      ->capture_default_str()->check(CLI::Range(1u, 600000u));
  app.add_option("--probe-bytes", config.probe_bytes, "... or until it sent this many bytes")
      ->capture_default_str()->check(CLI::Range(uint64_t{1}, uint64_t{1} << 50));
  bool auto_optimize = false;
  app.add_flag("--auto-optimize", auto_optimize,
               "every topology update measures the links it lacks (a joiner's) and installs the best ring "
               "(default: PCCL_AUTO_OPTIMIZE=1, else off)");
  app.add_flag("--standby", config.standby,
               "lead no run until a member of one comes back to this master (a second master address for the "
               "peers); newcomers are refused until then");
  app.add_option("--state-file", config.state_file,
                 "keep the run's id and term in this file, so that a master restarted in place waits for the "
                 "run's members before starting a new run")->capture_default_str();
  app.add_option("--rebuild-window-ms", config.rebuild_window_ms,
                 "after taking a run back, wait this long for the last ring's members before going on without "
                 "the missing ones")->capture_default_str()->check(CLI::Range(1u, 3600000u));
  app.add_option("--etcd", config.etcd_url,
                 "elect the leader among this run's masters through etcd at this client URL (http://HOST:PORT); "
                 "the others refuse peers until elected");
  app.add_option("--etcd-prefix", config.etcd_prefix, "etcd keys of this run live under this prefix")
      ->capture_default_str();
  app.add_option("--etcd-lease-ms", config.etcd_lease_ms,
                 "the leader's etcd lease: a frozen or cut-off leader is replaced after about this long")
      ->capture_default_str()->check(CLI::Range(2000u, 600000u));
  app.add_option("--advertise", config.advertise_address,
                 "HOST:PORT peers reach this master at, as etcd names the leader (default: the bound address)");
  uint32_t status_interval_s = 60;
  app.add_option("--status-interval-s", status_interval_s,
                 "print a status line (role, run, term, epoch, members, collectives) this often, and on "
                 "SIGUSR1; 0 = only on SIGUSR1")->capture_default_str()->check(CLI::Range(0u, 86400u));
  std::string log_level;
  app.add_option("--log-level", log_level, "error|warn|info|debug|trace (default: PCCL_LOG_LEVEL, else info)")
      ->check([](const std::string& v) {
        pccl::log::Level l;
        return pccl::log::parseLevel(v, &l) ? std::string() : "unknown log level '" + v + "'";
      });
  app.set_version_flag("--version", "pccl-master " PCCL_VERSION_STRING);
  CLI11_PARSE(app, argc, argv);

  // The daemon logs membership events unless --log-level or PCCL_LOG_LEVEL says otherwise.
  pccl::log::Level level = pccl::log::Level::kInfo;
  if (!log_level.empty()) {
    (void)pccl::log::parseLevel(log_level, &level);
    pccl::log::setLevel(level);
  } else if (const char* env = std::getenv("PCCL_LOG_LEVEL"); env == nullptr || !pccl::log::parseLevel(env, &level)) {
    pccl::log::setLevel(pccl::log::Level::kInfo);  // unset or unknown (the library said so): the daemon's default
  }

  if (auto_optimize) config.auto_optimize = 1;

  if (!secret_file.empty()) {
    pccl::Status s = pccl::readSecretFile(secret_file, &config.secret);  // read in place: no copy to wipe
    if (!s.isOk()) {
      std::fprintf(stderr, "pccl-master: %s\n", s.message().c_str());
      return 2;
    }
  }

  // Block the signals before any thread starts, then wait for them synchronously.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);

  auto master = pccl::Master::create(std::move(config));  // the library wipes the secret it is given
  if (!master.isOk()) {
    std::fprintf(stderr, "pccl-master: %s\n", master.status().toString().c_str());
    return 2;
  }
  pccl::Status started = (*master)->start();
  if (!started.isOk()) {
    std::fprintf(stderr, "pccl-master: %s\n", started.toString().c_str());
    return started.code() == pccl::Code::kInvalidArgument ? 2 : 1;
  }
  std::printf("pccl-master listening on %s\n", (*master)->address().c_str());
  std::fflush(stdout);

  int sig = 0;
  for (;;) {
    timespec wait{static_cast<time_t>(status_interval_s), 0};
    sig = sigtimedwait(&set, nullptr, status_interval_s == 0 ? nullptr : &wait);
    if (sig == SIGINT || sig == SIGTERM) break;
    if (sig == SIGUSR1 || (sig < 0 && errno == EAGAIN)) printStatus(**master);
  }
  std::fprintf(stderr, "pccl-master: %s received, shutting down\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
  (void)(*master)->stop();
  return 0;
}
