// pccl-bench: nccl-tests-style all-reduce benchmark of pccl against Gloo in the same processes.
//   pccl-bench --ranks N [flags]            a master in this process and N rank processes on loopback
//   pccl-bench --master HOST:PORT --world N  one rank of a real run (start one per machine/namespace)
// One row per size, backend and algorithm: bytes, time, algbw, busbw, wrong elements. Exit status 1
// when any element is wrong or any rank fails, 2 for bad flags.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <random>
#include <cstdio>
#include <thread>

#include "bench.hpp"
#include "pccl/master.hpp"
#include "worker.hpp"

using pccl::bench::Options;

namespace {

pid_t spawn(const std::vector<std::string>& argv) {
  const pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv("/proc/self/exe", args.data());
    _exit(127);
  }
  return pid;
}

// Waits for every child until the deadline; kills the rest after it. Returns the worst exit status.
int reap(std::vector<pid_t> pids, int timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  int worst = 0;
  while (!pids.empty()) {
    int st = 0;
    const pid_t p = waitpid(-1, &st, WNOHANG);
    if (p > 0) {
      pids.erase(std::remove(pids.begin(), pids.end(), p), pids.end());
      const int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      worst = std::max(worst, code);
      if (code != 0) {  // one rank failed: the others cannot finish
        for (pid_t q : pids) kill(q, SIGKILL);
      }
      continue;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "pccl-bench: ranks did not finish within %d s\n", timeout_s);
      for (pid_t q : pids) kill(q, SIGKILL);
      worst = std::max(worst, 1);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return worst;
}

int runLocal(const Options& o, const std::vector<std::string>& pass) {
  pccl::MasterConfig mc;
  mc.listen_address = "127.0.0.1:0";
  if (o.encrypt) {
    // A fresh secret for this run; the rank processes inherit it through PCCL_SECRET.
    std::random_device rd;
    mc.secret = std::to_string(rd()) + "-" + std::to_string(rd()) + "-" + std::to_string(rd());
    mc.encrypt = true;
    setenv("PCCL_SECRET", mc.secret.c_str(), 1);
  }
  auto master = pccl::Master::create(mc);
  if (!master.isOk() || !(*master)->start().isOk()) {
    std::fprintf(stderr, "pccl-bench: cannot start the master\n");
    return 1;
  }
  std::vector<std::string> argv = {"pccl-bench", "--master", "127.0.0.1:" + std::to_string((*master)->port()),
                                   "--world", std::to_string(o.ranks)};
  argv.insert(argv.end(), pass.begin(), pass.end());
  std::vector<pid_t> pids;
  for (int r = 0; r < o.ranks; ++r) pids.push_back(spawn(argv));
  return reap(pids, o.timeout_s);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"pccl-bench: all-reduce benchmark, pccl against Gloo (nccl-tests conventions)"};
  // A later flag overrides an earlier one, so scenario scripts can set defaults that users override.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  auto* ranks = app.add_option("--ranks", o.ranks, "spawn a local master and N rank processes")->check(CLI::Range(1, 64));
  auto* master = app.add_option("--master", o.master, "HOST:PORT of a running pccl-master: be one rank of that run");
  ranks->excludes(master);
  app.add_option("--world", o.world, "with --master: ranks to wait for")->check(CLI::Range(1, 1024));
  app.add_option("-b,--minbytes", o.min_size, "smallest size (e.g. 4K)");
  app.add_option("-e,--maxbytes", o.max_size, "largest size (e.g. 256M)");
  app.add_option("-f,--stepfactor", o.factor, "size multiplier between rows")->check(CLI::Range(1.0, 1024.0));
  app.add_option("-n,--iters", o.iters, "timed iterations per size")->check(CLI::Range(1, 100000));
  app.add_option("-w,--warmup", o.warmup, "untimed iterations per size")->check(CLI::Range(0, 100000));
  app.add_option("--connections", o.connections,
                 "pccl: K TCP connections to the ring successor; 0 (default): each link chooses how many carry data")
      ->check(CLI::Range(0, 1024));
  app.add_option("--max-connections", o.max_connections,
                 "pccl, with --connections 0: connections each link opens (0: PCCL_MAX_CONNECTIONS, else 32)")
      ->check(CLI::Range(0, 1024));
  app.add_option("--same-host-connections", o.same_host_connections,
                 "pccl: K to a successor on the same host (all of a --ranks run); 0 = --connections")
      ->check(CLI::Range(0, 1024));
  app.add_option("--concurrent", o.concurrent, "pccl: M operations in flight at once")->check(CLI::Range(1, 64));
  app.add_option("--collective", o.collective,
                 "allreduce, broadcast (from rank 0), allgather or reducescatter; SIZE is a rank's larger buffer")
      ->check(CLI::IsMember({"allreduce", "broadcast", "allgather", "reducescatter"}));
  app.add_option("--backend", o.backend, "pccl, gloo or both")->check(CLI::IsMember({"pccl", "gloo", "both"}));
  app.add_option("--quant", o.quant, "pccl wire format (quantized runs use float32 data in [-1, 1))")
      ->check(CLI::IsMember({"none", "fp16", "bf16", "int8", "fp4"}));
  app.add_option("--compress", o.compress, "pccl: zstd level 1..19 on the wire bytes, 0 = off")
      ->check(CLI::Range(0, 19));
  app.add_option("--dtype", o.dtype, "element type")
      ->check(CLI::IsMember({"int32", "int64", "float16", "bfloat16", "float32", "float64"}));
  app.add_flag("--inplace", o.in_place, "pccl: send == recv");
  app.add_flag("--device", o.device, "pccl: buffers in GPU memory (needs a GPU backend module; docs/gpu.md)");
  app.add_flag("--encrypt", o.encrypt,
               "pccl: encrypt every connection (AES-256-GCM with AES-NI, else ChaCha20-Poly1305); --ranks runs use "
               "a fresh secret, --master runs PCCL_SECRET / PCCL_SECRET_FILE");
  app.add_flag("--sync", o.sync,
               "pccl: time shared-state syncs instead of all-reduces: the last rank's copy of a SIZE-byte state is "
               "stale and it fetches all of it from the others (--compress: zstd on that transfer)");
  app.add_option("--algorithm", o.algorithm,
                 "pccl: how the group's all-reduces run when the ranks sit in several regions (PCCL_REGION): flat, "
                 "hierarchical (two levels: inside each region, then across regions) or auto (the master's cost "
                 "model); the rows' algorithm column says what each size took (ring, gather, two-level, "
                 "two-level-gather)")
      ->check(CLI::IsMember({"flat", "hierarchical", "auto"}));
  app.add_option("--segment-bytes", o.segment_bytes, "pccl: largest pipelining unit")->check(CLI::Range(64u, 64u << 20));
  app.add_flag("--optimize-topology", o.optimize,
               "pccl: once every rank joined, measure the links (pcclOptimizeTopology) and install the ring "
               "with the best bottleneck; the report shows the ring and its predicted bound");
  app.add_option("--json", o.json, "write the rows to this file as {\"results\": [...]}");
  app.add_option("--json-field", o.extra_json, "KEY=VALUE added to every JSON row (repeatable)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_option("--timeout", o.timeout_s, "seconds the whole run may take")->check(CLI::Range(1, 86400));
  app.footer(
      "Environment: PCCL_WANEM_PHASES=FILE: every rank appends \"ROW:BACKEND:ALGORITHM:BYTES BEGIN_NS END_NS\" to "
      "FILE per timed operation (steady-clock ns; pccl-wanem sets it to judge each row on its own, docs/wanem.md); "
      "the library's PCCL_* variables: docs/environment.md.");
  bool check_args = false;
  app.add_flag("--check-args", check_args,
               "check the other flags and exit (0: valid, 2: not) without running anything; scripts that forward "
               "flags to pccl-bench use it to refuse bad ones before they start");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // --help is not an error; everything else is bad usage
  }
  size_t probe = 0;
  if (!pccl::bench::parseSize(o.min_size, &probe) || !pccl::bench::parseSize(o.max_size, &probe)) {
    std::fprintf(stderr, "pccl-bench: sizes look like 4096, 4K, 64M or 1G\n");
    return 2;
  }
  if (o.collective != "allreduce" && o.sync) {
    std::fprintf(stderr, "pccl-bench: --collective %s runs without --sync\n", o.collective.c_str());
    return 2;
  }
  if (o.sync && (o.backend != "pccl" || o.quant != "none" || o.device || o.in_place || o.concurrent != 1)) {
    std::fprintf(stderr, "pccl-bench: --sync runs pccl alone, without --quant, --device, --inplace or --concurrent\n");
    return 2;
  }
  if (!o.sync && (o.quant != "none" || o.compress != 0) && o.dtype != "float32") {
    std::fprintf(stderr, "pccl-bench: --quant/--compress runs use --dtype float32\n");
    return 2;
  }
  if (check_args) return 0;
  if (o.ranks == 0 && o.master.empty()) {
    std::fprintf(stderr, "pccl-bench: give --ranks N (local run) or --master HOST:PORT --world N (one rank of a run)\n");
    return 2;
  }
  if (!o.master.empty() && o.world == 0) {
    std::fprintf(stderr, "pccl-bench: --master needs --world N (how many ranks take part)\n");
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  if (!o.master.empty()) return pccl::bench::runWorker(o);
  // The rank processes get the same flags; only ring rank 0 writes the table and the JSON.
  std::vector<std::string> pass = {"-b", o.min_size, "-e", o.max_size, "-f", std::to_string(o.factor), "-n",
                                   std::to_string(o.iters), "-w", std::to_string(o.warmup), "--connections",
                                   std::to_string(o.connections), "--max-connections", std::to_string(o.max_connections), "--same-host-connections",
                                   std::to_string(o.same_host_connections), "--concurrent", std::to_string(o.concurrent),
                                   "--backend", o.backend, "--collective", o.collective, "--dtype", o.dtype, "--quant", o.quant, "--compress", std::to_string(o.compress), "--segment-bytes",
                                   std::to_string(o.segment_bytes), "--timeout", std::to_string(o.timeout_s)};
  if (o.in_place) pass.push_back("--inplace");
  if (o.device) pass.push_back("--device");
  if (o.sync) pass.push_back("--sync");
  if (o.encrypt) pass.push_back("--encrypt");
  if (o.optimize) pass.push_back("--optimize-topology");
  if (!o.json.empty()) pass.insert(pass.end(), {"--json", o.json});
  for (const auto& f : o.extra_json) pass.insert(pass.end(), {"--json-field", f});
  return runLocal(o, pass);
}
