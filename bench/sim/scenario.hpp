// What pccl-sim simulates: the peers, their regions, and every ordered pair's path (the slowest rate
// on it and its one-way delay), from a pccl-wanem paths file (the emulated scenarios' own files,
// docs/wanem.md) or from a few numbers (regions of given sizes, LAN and WAN rates and delays); and the
// ring's order (the topology optimiser's solver on the configured links, by region, or given).
// Pure: parsing and arithmetic.
#ifndef PCCL_SIM_SCENARIO_HPP_
#define PCCL_SIM_SCENARIO_HPP_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "engine.hpp"

namespace pccl::sim {

struct Scenario {
  uint32_t peers = 0;
  std::vector<std::string> region;  // per peer ("" when none)
  std::vector<double> rate_mbit;    // [from * peers + to]: the slowest rate on the path, IP Mbit/s; 0 = unlimited
  std::vector<double> delay_ms;     // [from * peers + to]: one way
  std::vector<double> queue_bytes;  // [from * peers + to]: the drop-tail queue of the pair's slowest link
  std::string description;          // for reports

  double rateMbit(uint32_t a, uint32_t b) const { return rate_mbit[static_cast<size_t>(a) * peers + b]; }
  double delayMs(uint32_t a, uint32_t b) const { return delay_ms[static_cast<size_t>(a) * peers + b]; }
  double queueBytes(uint32_t a, uint32_t b) const { return queue_bytes[static_cast<size_t>(a) * peers + b]; }
};

// A pccl-wanem paths file with pccl-wanem's defaults for what it does not set (--rate-mbit, --delay-ms).
// `ranks` 0: one more than the largest rank its 'rank' lines name. The rate of a pair is the slowest of
// the sender's uplink, the path's own bottleneck and the receiver's downlink (wanem::Topology), its
// queue that link's.
bool scenarioFromPaths(const std::string& path, uint32_t ranks, double rate_mbit, double delay_ms, Scenario* out,
                       std::string* error);

// Regions of `sizes[i]` peers (peers numbered region by region), named r0, r1, ...: every peer's
// access link at `lan_mbit`; pairs within a region `lan_delay_ms` apart; pairs across regions limited
// to `wan_mbit` (each pair its own path) and `wan_delay_ms` apart unless `pair_delay_ms` names that
// region pair (region indices, either order). Queues as pccl-wanem sizes them by default: one
// bandwidth-delay product (an access link's over the longest round trip through it, a path's over its own).
struct RegionsSpec {
  std::vector<uint32_t> sizes;
  double lan_mbit = 10000, lan_delay_ms = 0.25, wan_mbit = 1000, wan_delay_ms = 40;
  std::map<std::pair<uint32_t, uint32_t>, double> pair_delay_ms;
};
Scenario scenarioFromRegions(const RegionsSpec& spec);
// "4,3,2" or "8x128" (8 regions of 128) into sizes.
bool parseRegionSizes(const std::string& text, std::vector<uint32_t>* sizes, std::string* error);
// "0-1=25,1-2=80" into pair delays.
bool parsePairDelays(const std::string& text, std::map<std::pair<uint32_t, uint32_t>, double>* out, std::string* error);

// The model's knobs that are not the network (docs/sim.md).
struct Model {
  double goodput = 1448.0 / 1500.0;  // TCP payload per IP byte (MSS 1448 with timestamps, MTU 1500)
  uint32_t connections = 4;          // K, the lanes of every link
  EngineParams engine;
};
LinkParams linkParams(const Scenario& s, const Model& m, uint32_t from, uint32_t to);
// The engine's link callback over a scenario and a model: Engine(peers, params, &ScenarioLinks::of, &links).
struct ScenarioLinks {
  const Scenario* s;
  const Model* m;
  static LinkParams of(const void* ctx, uint32_t from, uint32_t to) {
    const auto* c = static_cast<const ScenarioLinks*>(ctx);
    return linkParams(*c->s, *c->m, from, to);
  }
};

// The ring the library would run: "solver" (the topology optimiser's solver, src/master/ring_solver,
// on the configured rates and round trips: what pcclOptimizeTopology installs when it measures them
// well), "regions" (region by region in order of first appearance, each in peer order), "index"
// (peer order: the join order) or a comma-separated list of every peer.
bool ringOrder(const Scenario& s, const Model& m, const std::string& rule, std::vector<uint32_t>* order,
               std::string* error);

}  // namespace pccl::sim

#endif  // PCCL_SIM_SCENARIO_HPP_
