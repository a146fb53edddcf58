// pccl-solver-bench: the topology optimiser's solver (src/master/ring_solver.hpp) on random link
// matrices. Part 1 times solveRing for the sizes asked (16, 64, 256 peers by default: exact mode up to 16,
// the heuristic above); part 2 checks the exact mode against brute force over every ring for 3..9 peers
// (same bottleneck; latency no worse). Matrices: peers spread over a few regions, links within a region
// fast, across regions slower and asymmetric, a share of links degraded by a random factor, a few unusable;
// round trips by region distance. Deterministic (seeded).
//   pccl-solver-bench [--peers 16,64,256] [--matrices N] [--check N] [--json FILE]
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "master/ring_solver.hpp"

using pccl::master::LinkMatrix;

namespace {

LinkMatrix regionalMatrix(size_t n, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> regions(2, 5);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  const int r = regions(rng);
  std::vector<int> region(n);
  for (auto& x : region) x = static_cast<int>(u(rng) * r);
  LinkMatrix m(n);
  for (size_t a = 0; a < n; ++a) {
    for (size_t b = 0; b < n; ++b) {
      if (a == b) continue;
      const int d = std::abs(region[a] - region[b]);
      double bw = d == 0 ? 1.25e9 : 1.25e8 / (1 + d) * (0.5 + u(rng));  // 10 Gbit/s in a region, less across
      if (u(rng) < 0.1) bw *= 0.05 + 0.5 * u(rng);                        // a degraded link
      if (u(rng) < 0.01) bw = 0;                                          // a broken one
      m.set(a, b, bw, d == 0 ? 0.0005 + 0.001 * u(rng) : 0.02 * d + 0.01 * u(rng));
    }
  }
  return m;
}

double seconds(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"pccl-solver-bench: time the topology optimiser's ring solver, check it against brute force"};
  std::vector<size_t> peers{16, 64, 256};
  int matrices = 10, check = 200;
  std::string json;
  app.add_option("--peers", peers, "sizes to time")->delimiter(',')->check(CLI::Range(size_t{3}, size_t{4096}));
  app.add_option("--matrices", matrices, "random matrices per size")->check(CLI::Range(1, 100000));
  app.add_option("--check", check, "random matrices per size from 3 to 9 peers compared with brute force")
      ->check(CLI::Range(0, 100000));
  app.add_option("--json", json, "write the results to this file");
  CLI11_PARSE(app, argc, argv);

  std::mt19937_64 rng(20261126);
  std::ostringstream out;
  out << "{\"timing\": [";
  std::printf("%-6s %-9s %10s %10s %10s\n", "#peers", "mode", "min(s)", "median(s)", "max(s)");
  for (size_t i = 0; i < peers.size(); ++i) {
    std::vector<double> t;
    bool exact = false;
    for (int k = 0; k < matrices; ++k) {
      const LinkMatrix m = regionalMatrix(peers[i], rng);
      const auto t0 = std::chrono::steady_clock::now();
      auto r = pccl::master::solveRing(m);
      t.push_back(seconds(std::chrono::steady_clock::now() - t0));
      if (!r.isOk()) {
        std::fprintf(stderr, "pccl-solver-bench: %zu peers: %s\n", peers[i], r.status().toString().c_str());
        return 1;
      }
      exact = r->exact;
    }
    std::sort(t.begin(), t.end());
    const char* mode = exact ? "exact" : "heuristic";
    std::printf("%-6zu %-9s %10.4f %10.4f %10.4f\n", peers[i], mode, t.front(), t[t.size() / 2], t.back());
    out << (i ? ", " : "") << "{\"peers\": " << peers[i] << ", \"mode\": \"" << mode << "\", \"matrices\": " << matrices
        << ", \"time_min_s\": " << t.front() << ", \"time_median_s\": " << t[t.size() / 2]
        << ", \"time_max_s\": " << t.back() << "}";
  }
  out << "], \"exact_vs_brute_force\": [";
  std::printf("%-6s %10s %12s %14s\n", "#peers", "matrices", "same_bottle", "latency_no_worse");
  int failures = 0;
  for (size_t n = 3; n <= 9 && check > 0; ++n) {
    int same = 0, lat_ok = 0;
    for (int k = 0; k < check; ++k) {
      const LinkMatrix m = regionalMatrix(n, rng);
      auto e = pccl::master::solveRing(m);
      auto b = pccl::master::bruteForceRing(m);
      if (e.isOk() != b.isOk()) continue;
      if (!e.isOk()) {
        ++same, ++lat_ok;
        continue;
      }
      same += e->bottleneck == b->bottleneck;
      lat_ok += e->latency <= b->latency * (1 + 1e-9);
    }
    failures += (check - same) + (check - lat_ok);
    std::printf("%-6zu %10d %12d %14d\n", n, check, same, lat_ok);
    out << (n > 3 ? ", " : "") << "{\"peers\": " << n << ", \"matrices\": " << check << ", \"same_bottleneck\": " << same
        << ", \"latency_no_worse\": " << lat_ok << "}";
  }
  out << "]}\n";
  if (!json.empty()) {
    std::ofstream f(json);
    f << out.str();
    if (!f) {
      std::fprintf(stderr, "pccl-solver-bench: cannot write %s\n", json.c_str());
      return 1;
    }
  }
  return failures == 0 ? 0 : 1;
}
