// pccl-sim: predicts the time of pccl's all-reduce on a network of regions, from the schedules the
// library runs (docs/sim.md). One row per size and algorithm, as pccl-bench prints them.
//   pccl-sim --paths bench/regions.paths -b 4K -e 256M -f 4 --connections 16 --algorithm ring,gather
//   pccl-sim --regions 8x128 --lan-mbit 10000 --wan-mbit 1000 -b 1G -e 1G --json out.json
#include <CLI/CLI.hpp>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "api/comm_config.hpp"
#include "bench.hpp"
#include "predict.hpp"
#include "scenario.hpp"

namespace {
using namespace pccl::sim;

struct Options {
  std::string paths, regions, order = "solver", algorithms = "auto", json, dtype = "float32", levels = "flat";
  uint64_t two_level_bytes = 0;
  uint32_t ranks = 0, connections = 4, segment_bytes = 1u << 20;
  double rate_mbit = 0, delay_ms = 0;
  RegionsSpec spec;
  std::string pair_delays;
  pccl::bench::Options sizes;
  int64_t gather_bytes = -1;
  int warmup = 1, iterations = 1;
  bool no_line_up = false;
  Model model;
  double cpu_gbps = 0;
  double rto_min_ms = 200;
  std::vector<std::string> extra_json;
};

std::string jsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// --json-field KEY=VALUE: a number stays a number, anything else becomes a string.
std::string extraFields(const std::vector<std::string>& fields) {
  std::string out;
  for (const std::string& f : fields) {
    const size_t eq = f.find('=');
    const std::string key = f.substr(0, eq), value = eq == std::string::npos ? "" : f.substr(eq + 1);
    char* end = nullptr;
    std::strtod(value.c_str(), &end);
    const bool number = !value.empty() && end != nullptr && *end == '\0';
    out += ", " + jsonString(key) + ": " + (number ? value : jsonString(value));
  }
  return out;
}

bool buildScenario(const Options& o, Scenario* s, std::string* error) {
  if (!o.paths.empty()) return scenarioFromPaths(o.paths, o.ranks, o.rate_mbit, o.delay_ms, s, error);
  RegionsSpec spec = o.spec;
  if (!parseRegionSizes(o.regions, &spec.sizes, error)) return false;
  if (!o.pair_delays.empty() && !parsePairDelays(o.pair_delays, &spec.pair_delay_ms, error)) return false;
  for (const auto& [pair, ms] : spec.pair_delay_ms) {
    if (pair.second >= spec.sizes.size()) {
      return *error = "--wan-pair-delay-ms names region " + std::to_string(pair.second) + " of " +
                      std::to_string(spec.sizes.size()),
             false;
    }
  }
  *s = scenarioFromRegions(spec);
  return true;
}

// "auto" (what the library picks for each size), "ring", "gather", "two-level", "two-level-gather": the
// algorithms of each row.
bool parseAlgorithms(const std::string& text, std::vector<std::string>* out) {
  std::istringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    Algorithm a;
    if (item != "auto" && !parseAlgorithm(item, &a)) return false;
    out->push_back(item);
  }
  return !out->empty();
}

void printHeader(const Scenario& s, const std::vector<uint32_t>& ring, const Options& o) {
  std::printf("# pccl-sim: %s, %u peers\n# ring (peers):", s.description.c_str(), s.peers);
  for (size_t i = 0; i < ring.size(); ++i) std::printf("%s%u", i ? " -> " : " ", ring[i]);
  std::printf("\n# model: K = %u connections per link, TCP windows %s, goodput %.4f of the IP rate, %llu header "
              "bytes per frame, reduce %s; %d warm-up + %d timed operations, %s\n",
              o.model.connections, o.model.engine.tcp.windows ? "on" : "off", o.model.goodput,
              static_cast<unsigned long long>(o.model.engine.frame_overhead_bytes),
              o.cpu_gbps > 0 ? (std::to_string(o.cpu_gbps) + " GB/s per peer").c_str() : "free", o.warmup, o.iterations,
              o.no_line_up ? "no line-up" : "each after a one-element line-up");
  std::printf("# group: %s\n", o.levels == "two-level" ? "two-level (auto: the library's choice in a two-level group)"
                                                       : "flat (auto: the library's choice in a flat group)");
  std::printf("%-16s %14s %12s %12s %12s %12s %12s %12s %9s\n", "algorithm", "size(B)", "time(us)", "algbw(GB/s)",
              "busbw(GB/s)", "data_in(us)", "commit(us)", "bound(us)", "of_bound");
}

int run(const Options& o) {
  Scenario s;
  std::string error;
  if (!buildScenario(o, &s, &error)) return std::fprintf(stderr, "pccl-sim: %s\n", error.c_str()), 2;
  std::vector<uint32_t> ring;
  if (!ringOrder(s, o.model, o.order, &ring, &error)) return std::fprintf(stderr, "pccl-sim: %s\n", error.c_str()), 2;
  pccl::DataType dtype;
  pccl::bench::dtypeOf(o.dtype, &dtype);
  const size_t elem = pccl::bench::elemSize(dtype);
  std::vector<std::string> algorithms;
  parseAlgorithms(o.algorithms, &algorithms);
  pccl::CommConfig config;
  config.gather_bytes = o.gather_bytes;
  RunSpec run;
  run.warmup = o.warmup;
  run.iterations = o.iterations;
  run.line_up = !o.no_line_up;
  run.gather_bytes = pccl::gatherLimit(config, false);  // the peers are on different hosts
  // The regions over the ring's order, as the library plans them (regionLayout, twoLevelRing).
  std::vector<std::string> region_by_rank;
  for (uint32_t peer : ring) region_by_rank.push_back(s.region[peer]);
  auto planned = std::make_shared<pccl::collective::TwoLevelRing>(*twoLevelRingOf(region_by_rank));
  planned->min_bytes = o.two_level_bytes;
  const std::shared_ptr<const pccl::collective::TwoLevelRing> regions = planned;
  printHeader(s, ring, o);
  std::ostringstream rows;
  size_t row_count = 0;
  for (size_t bytes : pccl::bench::sizesOf(o.sizes, elem)) {
    CallSpec call;
    call.world = s.peers;
    call.count = bytes / elem;
    call.elem_bytes = elem;
    call.segment_bytes = o.segment_bytes;
    call.regions = regions;
    call.two_level_group = o.levels == "two-level";
    for (const std::string& name : algorithms) {
      Algorithm a = libraryChoice(call, run.gather_bytes);
      if (name != "auto") parseAlgorithm(name, &a);
      if (!runnable(a, call)) {
        std::printf("%-16s %14zu %12s (%s)\n", algorithmName(a), bytes, "-",
                    a == Algorithm::kGather || a == Algorithm::kTwoLevelGather
                        ? "the library cannot gather this: world - 1 inputs exceed the eager limit"
                        : "no regions with more than one member, or more pieces than the library allows");
        continue;
      }
      const Prediction p = predict(s, ring, o.model, call, a, run);
      const double algbw = static_cast<double>(bytes) / p.time_s / 1e9;
      const double busbw = algbw * 2.0 * (s.peers - 1) / s.peers;
      const double of_bound = p.link_bound_s > 0 ? p.link_bound_s / p.time_s * 100 : 0;
      std::printf("%-16s %14zu %12.1f %12.4f %12.4f %12.1f %12.1f %12.1f %8.1f%%\n", algorithmName(a), bytes,
                  p.time_s * 1e6, algbw, busbw, p.data_in_s * 1e6, p.commit_s * 1e6, p.link_bound_s * 1e6, of_bound);
      std::fflush(stdout);
      rows << (row_count++ ? ",\n" : "") << "  {\"tool\": \"pccl-sim\", \"algorithm\": \"" << algorithmName(a)
           << "\", \"chosen_by\": " << jsonString(name) << ", \"ranks\": " << s.peers << ", \"regions\": [";
      for (uint32_t i = 0; i < s.peers; ++i) rows << (i ? ", " : "") << jsonString(s.region[i]);
      rows << "], \"ring\": [";
      for (size_t i = 0; i < ring.size(); ++i) rows << (i ? ", " : "") << ring[i];
      rows << "], \"connections\": " << o.model.connections << ", \"dtype\": " << jsonString(o.dtype)
           << ", \"bytes\": " << bytes << ", \"time_s\": " << p.time_s << ", \"times_s\": [";
      for (size_t i = 0; i < p.times_s.size(); ++i) rows << (i ? ", " : "") << p.times_s[i];
      rows << "], \"data_in_s\": " << p.data_in_s << ", \"commit_s\": " << p.commit_s
           << ", \"link_bound_s\": " << p.link_bound_s << ", \"max_sent_bytes\": " << p.max_sent_bytes
           << ", \"algbw_gbps\": " << algbw << ", \"busbw_gbps\": " << busbw << ", \"events\": " << p.events
           << ", \"warmup\": " << o.warmup << ", \"iterations\": " << o.iterations
           << ", \"levels\": " << jsonString(o.levels) << ", \"line_up\": " << (o.no_line_up ? "false" : "true") << ", \"gather_bytes\": " << run.gather_bytes
           << ", \"model\": {\"goodput\": " << o.model.goodput
           << ", \"frame_overhead_bytes\": " << o.model.engine.frame_overhead_bytes
           << ", \"cpu_gbps\": " << o.cpu_gbps << ", \"tcp_windows\": " << (o.model.engine.tcp.windows ? "true" : "false")
           << "}, \"scenario\": " << jsonString(s.description)
           << extraFields(o.extra_json) << "}";
    }
  }
  if (!o.json.empty()) {
    std::ofstream f(o.json);
    f << "{\"results\": [\n" << rows.str() << "\n]}\n";
    if (!f) return std::fprintf(stderr, "pccl-sim: cannot write %s\n", o.json.c_str()), 1;
  }
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  Options o;
  o.sizes.min_size = "4K";
  o.sizes.max_size = "64M";
  o.sizes.factor = 2;
  CLI::App app{
      "pccl-sim: predicts pccl's all-reduce time on a network of regions from the library's own schedules "
      "(docs/sim.md)"};
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  auto* paths = app.add_option("--paths", o.paths, "a pccl-wanem paths file (docs/wanem.md): ranks, regions, links, paths")
                    ->check(CLI::ExistingFile);
  app.add_option("--ranks", o.ranks, "with --paths: peers (default: one more than its largest 'rank' line)")
      ->check(CLI::Range(1, 4096));
  app.add_option("--rate-mbit", o.rate_mbit, "with --paths: every access link's rate where the file sets none (as pccl-wanem; 0 = unlimited)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--delay-ms", o.delay_ms, "with --paths: one-way delay where the file sets none (as pccl-wanem)")
      ->check(CLI::NonNegativeNumber);
  auto* regions = app.add_option("--regions", o.regions, "instead of --paths: region sizes, \"4,3,2\" or \"8x128\"");
  paths->excludes(regions);
  app.add_option("--lan-mbit", o.spec.lan_mbit, "with --regions: every peer's access link (IP Mbit/s)")
      ->check(CLI::PositiveNumber);
  app.add_option("--lan-delay-ms", o.spec.lan_delay_ms, "with --regions: one way within a region")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--wan-mbit", o.spec.wan_mbit, "with --regions: each pair's path across regions (IP Mbit/s)")
      ->check(CLI::PositiveNumber);
  app.add_option("--wan-delay-ms", o.spec.wan_delay_ms, "with --regions: one way across regions")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--wan-pair-delay-ms", o.pair_delays, "with --regions: per region pair, \"0-1=25,1-2=80\"");
  app.add_option("--order", o.order,
                 "the ring: solver (the topology optimiser's, on the configured links), regions, index, or every peer "
                 "listed (\"0,3,1,2\")");
  app.add_option("--algorithm", o.algorithms,
                 "auto (the library's choice per size), ring, gather, two-level, two-level-gather, or a "
                 "comma-separated list of them");
  app.add_option("--levels", o.levels,
                 "the group's decision (the master's, docs/algorithms.md §12): flat, or two-level (the regions of "
                 "the paths file or --regions, over the ring's order); what auto picks from")
      ->check(CLI::IsMember({"flat", "two-level"}));
  app.add_option("--two-level-bytes", o.two_level_bytes,
                 "with --levels two-level: the master's two_level_bytes (docs/algorithms.md §12): auto runs calls "
                 "of fewer bytes that do not gather in two levels on the flat ring (default 0: every size)");
  app.add_option("-b,--minbytes", o.sizes.min_size, "smallest size (e.g. 4K)");
  app.add_option("-e,--maxbytes", o.sizes.max_size, "largest size (e.g. 1G)");
  app.add_option("-f,--stepfactor", o.sizes.factor, "size multiplier between rows")->check(CLI::Range(1.0, 1024.0));
  app.add_option("--dtype", o.dtype, "element type")
      ->check(CLI::IsMember({"int32", "int64", "float16", "bfloat16", "float32", "float64"}));
  app.add_option("--segment-bytes", o.segment_bytes, "the library's largest segment")->check(CLI::Range(64u, 64u << 20));
  app.add_option("--connections", o.model.connections, "K connections per ring link (pccl-bench --connections)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--gather-bytes", o.gather_bytes,
                 "the gather limit (CommConfig::gather_bytes; -1: the library's default across hosts)")
      ->check(CLI::Range(int64_t{-1}, int64_t{4} << 20));
  app.add_option("-w,--warmup", o.warmup, "untimed operations first (each after its line-up)")->check(CLI::Range(0, 100));
  app.add_option("-n,--iters", o.iterations, "timed operations (the row: their median)")->check(CLI::Range(1, 100));
  app.add_flag("--no-line-up", o.no_line_up,
               "every member calls at time 0 and each call when its previous one ended (pccl-bench lines the "
               "ranks up with a one-element all-reduce before each operation)");
  app.add_option("--goodput", o.model.goodput, "TCP payload per IP byte (default 1448/1500)")
      ->check(CLI::Range(0.01, 1.0));
  app.add_option("--frame-bytes", o.model.engine.frame_overhead_bytes, "header bytes per data frame")
      ->check(CLI::Range(uint64_t{0}, uint64_t{1} << 20));
  app.add_option("--cpu-gbps", o.cpu_gbps, "a peer reduces received data at this rate (GB/s); 0: free")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--tcp-windows", o.model.engine.tcp.windows,
                 "1: each connection's TCP window limits it (slow start, restart after idle, losses at a full "
                 "queue); 0: a link's busy connections share its rate from the first byte")
      ->check(CLI::Range(0, 1));
  app.add_option("--tcp-rto-min-ms", o.rto_min_ms, "with --tcp-windows 1: Linux's minimum RTO over the RTT (a window "
                 "restarts after idling longer than RTT + this)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--tcp-initial-segments", o.model.engine.tcp.initial_segments, "with --tcp-windows 1: the initial "
                 "(and restart) window in segments")
      ->check(CLI::Range(1.0, 1000.0));
  app.add_option("--json", o.json, "write the rows to this file as {\"results\": [...]}");
  app.add_option("--json-field", o.extra_json, "KEY=VALUE added to every JSON row (repeatable)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  size_t probe = 0;
  if (!pccl::bench::parseSize(o.sizes.min_size, &probe) || !pccl::bench::parseSize(o.sizes.max_size, &probe)) {
    std::fprintf(stderr, "pccl-sim: sizes look like 4096, 4K, 64M or 1G\n");
    return 2;
  }
  std::vector<std::string> algorithms;
  if (!parseAlgorithms(o.algorithms, &algorithms)) {
    std::fprintf(stderr,
                 "pccl-sim: --algorithm '%s': auto, ring, gather, two-level, two-level-gather or a comma-separated "
                 "list of them\n",
                 o.algorithms.c_str());
    return 2;
  }
  if (o.paths.empty() && o.regions.empty()) {
    std::fprintf(stderr, "pccl-sim: give --paths FILE or --regions SIZES\n%s", app.help().c_str());
    return 2;
  }
  o.model.engine.cpu_bytes_per_s = o.cpu_gbps * 1e9;
  o.model.engine.tcp.rto_min = o.rto_min_ms / 1e3;
  return run(o);
}
