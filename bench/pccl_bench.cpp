// pccl-bench: nccl-tests-style all-reduce benchmark.
//   pccl-bench --ranks N [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS] [-w WARMUP] [--connections K] ...
// starts a master in this process and N rank processes (this binary in worker mode) on loopback,
// runs float32 (or --dtype) sum all-reduces of every size, verifies every element of every result,
// and prints one row per size: bytes, time, algbw, busbw, wrong-element count. Exit status 1 when any
// element is wrong or any operation fails. --json FILE writes the rows as {"results": [...]}.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "pccl/communicator.hpp"
#include "pccl/master.hpp"

namespace {

struct Options {
  int ranks = 0;
  std::string min_size = "4K", max_size = "64M";
  double factor = 2;
  int iters = 20, warmup = 5;
  uint32_t connections = 4;
  int concurrent = 1;
  std::string backend = "pccl", quant = "none", dtype = "float32", op = "sum";
  bool in_place = false;
  uint32_t segment_bytes = 1 << 20;
  std::string json;
  // worker mode
  bool worker = false;
  std::string master;
  int rank = 0;
};

const std::map<std::string, pccl::DataType> kDtypes = {
    {"int32", pccl::DataType::kInt32},     {"int64", pccl::DataType::kInt64},
    {"float16", pccl::DataType::kFloat16}, {"bfloat16", pccl::DataType::kBfloat16},
    {"float32", pccl::DataType::kFloat32}, {"float64", pccl::DataType::kFloat64}};

size_t elemSize(pccl::DataType t) {
  switch (t) {
    case pccl::DataType::kFloat16: case pccl::DataType::kBfloat16: return 2;
    case pccl::DataType::kInt32: case pccl::DataType::kFloat32: return 4;
    default: return 8;
  }
}

bool parseSize(const std::string& s, size_t* out) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || v < 0) return false;
  std::string unit(end);
  double mult = 1;
  if (unit == "K" || unit == "k" || unit == "KiB") mult = 1024;
  else if (unit == "M" || unit == "MiB") mult = 1024.0 * 1024;
  else if (unit == "G" || unit == "GiB") mult = 1024.0 * 1024 * 1024;
  else if (!unit.empty() && unit != "B") return false;
  *out = static_cast<size_t>(v * mult);
  return true;
}

std::vector<size_t> sizesOf(const Options& o, size_t elem) {
  size_t lo = 0, hi = 0;
  parseSize(o.min_size, &lo);
  parseSize(o.max_size, &hi);
  std::vector<size_t> v;
  for (double s = static_cast<double>(std::max(lo, elem)); s <= static_cast<double>(hi) * 1.0000001; s *= o.factor) {
    v.push_back(static_cast<size_t>(s) / elem * elem);
    if (o.factor <= 1) break;
  }
  return v;
}

// Exactly representable inputs whose sum is exact in every float type: rank r, element k.
double inputValue(int rank, size_t k) { return static_cast<double>(rank + 1) + static_cast<double>(k % 7); }
double expectedSum(int world, size_t k) {
  return world * (world + 1) / 2.0 + static_cast<double>(world) * static_cast<double>(k % 7);
}

void store(pccl::DataType t, void* buf, size_t k, double v) {
  auto* p = static_cast<uint8_t*>(buf);
  switch (t) {
    case pccl::DataType::kInt32: { int32_t x = static_cast<int32_t>(v); std::memcpy(p + 4 * k, &x, 4); break; }
    case pccl::DataType::kInt64: { int64_t x = static_cast<int64_t>(v); std::memcpy(p + 8 * k, &x, 8); break; }
    case pccl::DataType::kFloat32: { float x = static_cast<float>(v); std::memcpy(p + 4 * k, &x, 4); break; }
    case pccl::DataType::kFloat64: std::memcpy(p + 8 * k, &v, 8); break;
    case pccl::DataType::kFloat16: case pccl::DataType::kBfloat16: {
      // Small integers: exact in both formats; build the bits by hand to stay on the public API.
      float f = static_cast<float>(v);
      uint32_t u;
      std::memcpy(&u, &f, 4);
      uint16_t h;
      if (t == pccl::DataType::kBfloat16) {
        h = static_cast<uint16_t>(u >> 16);
      } else {
        const int e = static_cast<int>((u >> 23) & 0xff) - 127 + 15;
        h = f == 0 ? 0 : static_cast<uint16_t>(((u >> 16) & 0x8000) | (e << 10) | ((u >> 13) & 0x3ff));
      }
      std::memcpy(p + 2 * k, &h, 2);
      break;
    }
    default: break;
  }
}

// Elements of `got` that differ from `want` (one memcmp when all is well).
size_t countWrong(const uint8_t* got, const uint8_t* want, size_t count, size_t elem) {
  if (std::memcmp(got, want, count * elem) == 0) return 0;
  size_t wrong = 0;
  for (size_t k = 0; k < count; ++k) wrong += std::memcmp(got + k * elem, want + k * elem, elem) != 0;
  return wrong;
}

// ---- worker: one rank ---------------------------------------------------------------------------

int runWorker(const Options& o) {
  pccl::CommConfig c;
  c.master_address = o.master;
  c.listen_address = "127.0.0.1:0";
  c.connections_per_peer = o.connections;
  c.segment_bytes = o.segment_bytes;
  auto comm = pccl::Communicator::create(c);
  if (!comm.isOk()) {
    std::fprintf(stderr, "rank %d: %s\n", o.rank, comm.status().toString().c_str());
    return 1;
  }
  pccl::Communicator& cm = **comm;
  pccl::Status s = cm.connect();
  if (s.isOk() && o.rank == 0 && o.ranks > 1) {
    std::string go;
    std::getline(std::cin, go);  // the launcher says when every other rank is waiting for admission
    s = cm.updateTopology();
  }
  if (!s.isOk()) {
    std::fprintf(stderr, "rank %d: %s\n", o.rank, s.toString().c_str());
    return 1;
  }
  if (static_cast<int>(cm.topology().world_size) != o.ranks) {
    std::fprintf(stderr, "rank %d: world size %u, expected %d\n", o.rank, cm.topology().world_size, o.ranks);
    return 1;
  }
  const pccl::DataType dtype = kDtypes.at(o.dtype);
  const size_t elem = elemSize(dtype);
  const std::vector<size_t> sizes = sizesOf(o, elem);
  const size_t max_bytes = sizes.empty() ? 0 : sizes.back();
  const int m = o.concurrent;
  std::vector<std::vector<uint8_t>> send(m, std::vector<uint8_t>(max_bytes)), recv(m, std::vector<uint8_t>(max_bytes));
  for (auto& b : send) {
    for (size_t k = 0; k < max_bytes / elem; ++k) store(dtype, b.data(), k, inputValue(o.rank, k));
  }
  std::vector<uint8_t> expected(max_bytes);
  for (size_t k = 0; k < max_bytes / elem; ++k) store(dtype, expected.data(), k, expectedSum(o.ranks, k));
  uint64_t tag = 1;
  int status = 0;
  float token = 0;
  for (size_t bytes : sizes) {
    const size_t count = bytes / elem;
    std::vector<double> times;
    size_t wrong = 0;
    for (int it = 0; it < o.warmup + o.iters; ++it) {
      if (o.in_place) {
        for (int j = 0; j < m; ++j) std::memcpy(recv[j].data(), send[j].data(), bytes);
      }
      // A one-element all-reduce lines the ranks up, so that no rank's time includes waiting for
      // another rank that is still checking its previous result.
      pccl::ReduceOptions barrier;
      barrier.tag = 0;
      if (!cm.allReduce(&token, &token, 1, pccl::DataType::kFloat32, pccl::RedOp::kMax, barrier).isOk()) {
        std::fprintf(stderr, "rank %d: barrier failed: %s\n", o.rank, cm.lastError().c_str());
        return 1;
      }
      std::vector<pccl::ReduceHandle> handles;
      const auto t0 = std::chrono::steady_clock::now();
      for (int j = 0; j < m; ++j) {
        pccl::ReduceOptions ro;
        ro.tag = tag++;
        const void* src = o.in_place ? recv[j].data() : send[j].data();
        auto h = cm.allReduceAsync(src, recv[j].data(), count, dtype, pccl::RedOp::kSum, ro);
        if (!h.isOk()) {
          std::fprintf(stderr, "rank %d: %s\n", o.rank, h.status().toString().c_str());
          return 1;
        }
        handles.push_back(*h);
      }
      for (auto& h : handles) {
        auto r = h.wait();
        if (!r.isOk()) {
          std::fprintf(stderr, "rank %d: all-reduce of %zu bytes failed: %s\n", o.rank, bytes,
                       r.status().toString().c_str());
          return 1;
        }
      }
      const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      for (int j = 0; j < m; ++j) wrong += countWrong(recv[j].data(), expected.data(), count, elem);
      if (it >= o.warmup) times.push_back(dt);
    }
    if (wrong != 0) status = 1;
    std::printf("RESULT %zu %zu", bytes, wrong);
    for (double t : times) std::printf(" %.9f", t);
    std::printf("\n");
    std::fflush(stdout);
  }
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  std::printf("RSS %ld\n", ru.ru_maxrss);
  std::fflush(stdout);
  (void)cm.leave();
  return status;
}

// ---- launcher -----------------------------------------------------------------------------------

struct Child {
  pid_t pid = -1;
  int in = -1, out = -1;
  std::string buffer;
  std::vector<std::string> lines;
};

Child spawn(const std::vector<std::string>& argv) {
  int in[2], out[2];
  Child c;
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) return c;
  c.pid = fork();
  if (c.pid == 0) {
    dup2(in[0], STDIN_FILENO);
    dup2(out[1], STDOUT_FILENO);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv("/proc/self/exe", args.data());
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  c.in = in[1];
  c.out = out[0];
  return c;
}

// Reads every child's stdout to EOF (lines kept), with a deadline.
bool collect(std::vector<Child>& kids, int timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  for (;;) {
    std::vector<pollfd> fds;
    std::vector<Child*> who;
    for (auto& k : kids) {
      if (k.out >= 0) {
        fds.push_back(pollfd{k.out, POLLIN, 0});
        who.push_back(&k);
      }
    }
    if (fds.empty()) return true;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    if (poll(fds.data(), fds.size(), static_cast<int>(left.count())) <= 0) continue;
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      char buf[4096];
      const ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n <= 0) {
        close(who[i]->out);
        who[i]->out = -1;
        continue;
      }
      who[i]->buffer.append(buf, static_cast<size_t>(n));
      size_t nl;
      while ((nl = who[i]->buffer.find('\n')) != std::string::npos) {
        who[i]->lines.push_back(who[i]->buffer.substr(0, nl));
        who[i]->buffer.erase(0, nl + 1);
        if (who[i] == &kids[0]) std::fprintf(stderr, ".");  // progress for long runs
      }
    }
  }
}

struct Row {
  size_t bytes = 0;
  size_t wrong = 0;
  std::vector<std::vector<double>> times;  // per rank, per iteration
};

int runLauncher(const Options& o, const std::vector<std::string>& passthrough) {
  pccl::MasterConfig mc;
  mc.listen_address = "127.0.0.1:0";
  auto master = pccl::Master::create(mc);
  if (!master.isOk() || !(*master)->start().isOk()) {
    std::fprintf(stderr, "pccl-bench: cannot start the master\n");
    return 1;
  }
  const std::string address = "127.0.0.1:" + std::to_string((*master)->port());
  std::vector<Child> kids;
  for (int r = 0; r < o.ranks; ++r) {
    std::vector<std::string> argv = {"pccl-bench", "--worker", "--master", address, "--rank", std::to_string(r)};
    argv.insert(argv.end(), passthrough.begin(), passthrough.end());
    kids.push_back(spawn(argv));
    if (r == 0 && !(*master)->waitFor([](const pccl::MasterStats& s) { return s.accepted == 1; }, 30000)) {
      std::fprintf(stderr, "pccl-bench: rank 0 did not join\n");
      return 1;
    }
  }
  const int n = o.ranks;
  if (n > 1) {
    if (!(*master)->waitFor([n](const pccl::MasterStats& s) { return s.pending == static_cast<uint32_t>(n - 1); },
                            60000)) {
      std::fprintf(stderr, "pccl-bench: ranks did not join within 60 s\n");
      return 1;
    }
    if (write(kids[0].in, "go\n", 3) != 3) return 1;
  }
  std::fprintf(stderr, "pccl-bench: %d ranks running", n);
  const bool finished = collect(kids, 3600);
  std::fprintf(stderr, "\n");
  int failed = 0;
  for (auto& k : kids) {
    if (!finished) kill(k.pid, SIGKILL);
    int st = 0;
    waitpid(k.pid, &st, 0);
    failed += !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    close(k.in);
  }
  // Merge the ranks' rows.
  std::vector<Row> rows;
  long max_rss_kb = 0;
  for (const auto& k : kids) {
    size_t i = 0;
    for (const auto& line : k.lines) {
      std::istringstream in(line);
      std::string word;
      in >> word;
      if (word == "RSS") {
        long kb = 0;
        in >> kb;
        max_rss_kb = std::max(max_rss_kb, kb);
        continue;
      }
      if (word != "RESULT") continue;
      if (rows.size() <= i) rows.emplace_back();
      Row& row = rows[i++];
      size_t wrong = 0;
      in >> row.bytes >> wrong;
      row.wrong += wrong;
      std::vector<double> t;
      double v;
      while (in >> v) t.push_back(v);
      row.times.push_back(t);
    }
  }
  const double bus = n > 1 ? 2.0 * (n - 1) / n : 1.0;
  std::printf("# pccl-bench: backend pccl, %d ranks, %u connections, dtype %s, op sum, %s, %d concurrent\n", n,
              o.connections, o.dtype.c_str(), o.in_place ? "in-place" : "out-of-place", o.concurrent);
  std::printf("%14s %12s %12s %12s %10s\n", "size(B)", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "wrong");
  std::ostringstream json;
  json << "{\"results\": [";
  size_t total_wrong = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    Row& row = rows[i];
    // Per iteration the slowest rank's time; the row reports the median over iterations.
    std::vector<double> per_iter;
    for (size_t it = 0; !row.times.empty() && it < row.times[0].size(); ++it) {
      double worst = 0;
      for (const auto& r : row.times) worst = std::max(worst, it < r.size() ? r[it] : 0.0);
      per_iter.push_back(worst);
    }
    std::sort(per_iter.begin(), per_iter.end());
    const double t = per_iter.empty() ? 0 : per_iter[per_iter.size() / 2];
    const double algbw = t > 0 ? static_cast<double>(row.bytes) * o.concurrent / t / 1e9 : 0;
    total_wrong += row.wrong;
    std::printf("%14zu %12.1f %12.3f %12.3f %10zu\n", row.bytes, t * 1e6, algbw, algbw * bus, row.wrong);
    json << (i ? ", " : "") << "{\"backend\": \"pccl\", \"algorithm\": \"ring\", \"ranks\": " << n
         << ", \"connections\": " << o.connections << ", \"concurrent\": " << o.concurrent << ", \"quant\": \""
         << o.quant << "\", \"dtype\": \"" << o.dtype << "\", \"in_place\": " << (o.in_place ? "true" : "false")
         << ", \"bytes\": " << row.bytes << ", \"time_s\": " << t << ", \"algbw_gbps\": " << algbw
         << ", \"busbw_gbps\": " << algbw * bus << ", \"wrong\": " << row.wrong
         << ", \"peak_rss_bytes\": " << max_rss_kb * 1024 << "}";
  }
  json << "]}\n";
  std::printf("# peak resident memory of the largest rank: %.1f MiB\n", max_rss_kb / 1024.0);
  if (!o.json.empty()) {
    std::ofstream f(o.json);
    f << json.str();
  }
  if (!finished) std::fprintf(stderr, "pccl-bench: ranks did not finish within the deadline\n");
  if (failed) std::fprintf(stderr, "pccl-bench: %d rank(s) failed\n", failed);
  if (total_wrong) std::fprintf(stderr, "pccl-bench: %zu wrong elements\n", total_wrong);
  return (!finished || failed || total_wrong) ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"pccl-bench: all-reduce benchmark (nccl-tests conventions)"};
  app.add_option("--ranks", o.ranks, "spawn a local master and N rank processes")->check(CLI::Range(1, 64));
  app.add_option("-b,--minbytes", o.min_size, "smallest size (e.g. 4K)");
  app.add_option("-e,--maxbytes", o.max_size, "largest size (e.g. 256M)");
  app.add_option("-f,--stepfactor", o.factor, "size multiplier between rows")->check(CLI::Range(1.0, 1024.0));
  app.add_option("-n,--iters", o.iters, "timed iterations per size")->check(CLI::Range(1, 100000));
  app.add_option("-w,--warmup", o.warmup, "untimed iterations per size")->check(CLI::Range(0, 100000));
  app.add_option("--connections", o.connections, "K: TCP connections to the ring successor")->check(CLI::Range(1, 1024));
  app.add_option("--concurrent", o.concurrent, "M: operations in flight at once")->check(CLI::Range(1, 64));
  app.add_option("--backend", o.backend, "pccl (gloo arrives with the Gloo comparison)")->check(CLI::IsMember({"pccl"}));
  app.add_option("--quant", o.quant, "wire format")->check(CLI::IsMember({"none"}));
  app.add_option("--dtype", o.dtype, "element type")->check(CLI::IsMember({"int32", "int64", "float16", "bfloat16", "float32", "float64"}));
  app.add_flag("--inplace", o.in_place, "send == recv");
  app.add_option("--segment-bytes", o.segment_bytes, "largest pipelining unit")->check(CLI::Range(64u, 64u << 20));
  app.add_option("--json", o.json, "write the rows to this file");
  app.add_flag("--worker", o.worker)->group("");
  app.add_option("--master", o.master, "HOST:PORT")->group("");
  app.add_option("--rank", o.rank)->group("");
  CLI11_PARSE(app, argc, argv);
  size_t probe;
  if (!parseSize(o.min_size, &probe) || !parseSize(o.max_size, &probe)) {
    std::fprintf(stderr, "pccl-bench: sizes look like 4096, 4K, 64M or 1G\n");
    return 2;
  }
  if (o.worker) return runWorker(o);
  if (o.ranks <= 0) {
    std::fprintf(stderr, "pccl-bench: --ranks N is required (joining a remote --master arrives with the Gloo comparison)\n");
    return 2;
  }
  // Workers get the same flags (minus --json): the launcher re-executes this binary per rank.
  std::vector<std::string> pass = {"--ranks", std::to_string(o.ranks), "-b", o.min_size, "-e", o.max_size,
                                   "-f", std::to_string(o.factor), "-n", std::to_string(o.iters), "-w",
                                   std::to_string(o.warmup), "--connections", std::to_string(o.connections),
                                   "--concurrent", std::to_string(o.concurrent), "--dtype", o.dtype,
                                   "--segment-bytes", std::to_string(o.segment_bytes)};
  if (o.in_place) pass.push_back("--inplace");
  signal(SIGPIPE, SIG_IGN);
  return runLauncher(o, pass);
}
