#include "scenario.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "master/ring_solver.hpp"
#include "topology.hpp"

namespace pccl::sim {

namespace {
bool parseUint(const std::string& s, uint32_t* v) {
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos || s.size() > 9) return false;
  *v = static_cast<uint32_t>(std::strtoul(s.c_str(), nullptr, 10));
  return true;
}

bool parseDouble(const std::string& s, double* v) {
  char* end = nullptr;
  *v = std::strtod(s.c_str(), &end);
  return !s.empty() && end != nullptr && *end == '\0' && *v >= 0;
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::string item;
  std::istringstream in(text);
  while (std::getline(in, item, sep)) out.push_back(item);
  return out;
}

// One more than the largest rank a 'rank I REGION' line names (0 if none).
uint32_t ranksNamed(const std::string& text) {
  uint32_t n = 0;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line.substr(0, line.find('#')));
    std::string kind, rank;
    uint32_t r = 0;
    if (words >> kind >> rank && kind == "rank" && parseUint(rank, &r)) n = std::max(n, r + 1);
  }
  return n;
}
}  // namespace

bool scenarioFromPaths(const std::string& path, uint32_t ranks, double rate_mbit, double delay_ms, Scenario* out,
                       std::string* error) {
  std::ifstream file(path);
  if (!file) return *error = "cannot read " + path, false;
  std::stringstream text;
  text << file.rdbuf();
  if (ranks == 0) ranks = ranksNamed(text.str());
  if (ranks == 0) return *error = path + " names no rank ('rank I REGION'): give --ranks", false;
  wanem::TopologyDefaults d;
  d.ranks = static_cast<int>(ranks);
  d.rate_mbit = rate_mbit;
  d.delay_ms = delay_ms;
  wanem::Topology t;
  std::istringstream in(text.str());
  if (!wanem::buildTopology(d, &in, path, &t, error)) return false;
  Scenario s;
  s.peers = ranks;
  s.region = t.region;
  s.rate_mbit.assign(static_cast<size_t>(ranks) * ranks, 0);
  s.delay_ms.assign(static_cast<size_t>(ranks) * ranks, 0);
  s.queue_bytes.assign(static_cast<size_t>(ranks) * ranks, 0);
  for (uint32_t a = 0; a < ranks; ++a) {
    for (uint32_t b = 0; b < ranks; ++b) {
      if (a == b) continue;
      const size_t i = static_cast<size_t>(a) * ranks + b;
      s.rate_mbit[i] = t.bottleneckMbit(static_cast<int>(a), static_cast<int>(b));
      s.delay_ms[i] = t.paths[a][b].delay_ms;
      // The queue of the slowest link on the way (the sender's uplink first among equals).
      for (const wanem::LinkParams* l : {&t.uplink[a], &t.paths[a][b].link, &t.downlink[b]}) {
        if (l->rate_mbit > 0 && l->rate_mbit == s.rate_mbit[i]) {
          s.queue_bytes[i] = static_cast<double>(l->queue_bytes);
          break;
        }
      }
    }
  }
  s.description = path;
  *out = std::move(s);
  return true;
}

Scenario scenarioFromRegions(const RegionsSpec& spec) {
  Scenario s;
  std::vector<uint32_t> region_of;
  for (size_t i = 0; i < spec.sizes.size(); ++i) {
    for (uint32_t k = 0; k < spec.sizes[i]; ++k) {
      region_of.push_back(static_cast<uint32_t>(i));
      s.region.push_back("r" + std::to_string(i));
    }
  }
  const uint32_t n = static_cast<uint32_t>(region_of.size());
  s.peers = n;
  s.rate_mbit.assign(static_cast<size_t>(n) * n, 0);
  s.delay_ms.assign(static_cast<size_t>(n) * n, 0);
  s.queue_bytes.assign(static_cast<size_t>(n) * n, 0);
  double longest_rtt_ms = 2 * spec.wan_delay_ms;  // through any access link
  for (const auto& [pair, ms] : spec.pair_delay_ms) longest_rtt_ms = std::max(longest_rtt_ms, 2 * ms);
  if (spec.sizes.size() < 2) longest_rtt_ms = 2 * spec.lan_delay_ms;
  const double access_queue = std::max(64.0 * 1024, spec.lan_mbit * 1e6 / 8 * longest_rtt_ms / 1e3);
  for (uint32_t a = 0; a < n; ++a) {
    for (uint32_t b = 0; b < n; ++b) {
      if (a == b) continue;
      const uint32_t ra = region_of[a], rb = region_of[b];
      double rate = spec.lan_mbit, delay = spec.lan_delay_ms;
      if (ra != rb) {
        rate = spec.lan_mbit > 0 ? std::min(spec.lan_mbit, spec.wan_mbit) : spec.wan_mbit;
        delay = spec.wan_delay_ms;
        auto it = spec.pair_delay_ms.find({std::min(ra, rb), std::max(ra, rb)});
        if (it != spec.pair_delay_ms.end()) delay = it->second;
      }
      s.rate_mbit[static_cast<size_t>(a) * n + b] = rate;
      s.delay_ms[static_cast<size_t>(a) * n + b] = delay;
      // Across regions the pair's own path is the bottleneck when the WAN is slower than the LAN.
      const bool path = ra != rb && (spec.lan_mbit <= 0 || spec.wan_mbit < spec.lan_mbit);
      s.queue_bytes[static_cast<size_t>(a) * n + b] =
          path ? std::max(64.0 * 1024, spec.wan_mbit * 1e6 / 8 * 2 * delay / 1e3) : access_queue;
    }
  }
  std::ostringstream d;
  d << spec.sizes.size() << " regions (";
  for (size_t i = 0; i < spec.sizes.size(); ++i) d << (i ? "+" : "") << spec.sizes[i];
  d << " peers), LAN " << spec.lan_mbit << " Mbit/s " << spec.lan_delay_ms << " ms, WAN " << spec.wan_mbit
    << " Mbit/s " << spec.wan_delay_ms << " ms";
  s.description = d.str();
  return s;
}

bool parseRegionSizes(const std::string& text, std::vector<uint32_t>* sizes, std::string* error) {
  sizes->clear();
  const size_t x = text.find('x');
  uint32_t count = 0, each = 0;
  if (x != std::string::npos) {
    if (!parseUint(text.substr(0, x), &count) || !parseUint(text.substr(x + 1), &each) || count == 0 || each == 0) {
      return *error = "--regions '" + text + "': expected RxM (R regions of M peers) or M1,M2,...", false;
    }
    sizes->assign(count, each);
  } else {
    for (const std::string& item : split(text, ',')) {
      if (!parseUint(item, &each) || each == 0) {
        return *error = "--regions '" + text + "': expected RxM (R regions of M peers) or M1,M2,...", false;
      }
      sizes->push_back(each);
    }
  }
  uint64_t total = 0;
  for (uint32_t v : *sizes) total += v;
  if (total == 0 || total > 4096) return *error = "--regions '" + text + "': 1 to 4096 peers in all", false;
  return true;
}

bool parsePairDelays(const std::string& text, std::map<std::pair<uint32_t, uint32_t>, double>* out,
                     std::string* error) {
  for (const std::string& item : split(text, ',')) {
    const size_t dash = item.find('-'), eq = item.find('=');
    uint32_t a = 0, b = 0;
    double ms = 0;
    if (dash == std::string::npos || eq == std::string::npos || eq < dash || !parseUint(item.substr(0, dash), &a) ||
        !parseUint(item.substr(dash + 1, eq - dash - 1), &b) || !parseDouble(item.substr(eq + 1), &ms) || a == b) {
      return *error = "--wan-pair-delay-ms '" + item + "': expected A-B=MS (two region indices)", false;
    }
    (*out)[{std::min(a, b), std::max(a, b)}] = ms;
  }
  return true;
}

LinkParams linkParams(const Scenario& s, const Model& m, uint32_t from, uint32_t to) {
  LinkParams p;
  p.bytes_per_s = s.rateMbit(from, to) * 1e6 / 8 * m.goodput;
  p.delay = s.delayMs(from, to) / 1e3;
  p.rtt = (s.delayMs(from, to) + s.delayMs(to, from)) / 1e3;
  p.lanes = m.connections;
  p.queue_bytes = s.queueBytes(from, to);
  return p;
}

bool ringOrder(const Scenario& s, const Model& m, const std::string& rule, std::vector<uint32_t>* order,
               std::string* error) {
  const uint32_t n = s.peers;
  order->clear();
  if (rule == "index") {
    for (uint32_t i = 0; i < n; ++i) order->push_back(i);
    return true;
  }
  if (rule == "regions") {
    std::vector<std::string> seen;
    for (const std::string& r : s.region) {
      if (std::find(seen.begin(), seen.end(), r) == seen.end()) seen.push_back(r);
    }
    for (const std::string& r : seen) {
      for (uint32_t i = 0; i < n; ++i) {
        if (s.region[i] == r) order->push_back(i);
      }
    }
    return true;
  }
  if (rule == "solver") {
    master::LinkMatrix links(n);
    for (uint32_t a = 0; a < n; ++a) {
      for (uint32_t b = 0; b < n; ++b) {
        if (a == b) continue;
        const double bw = linkParams(s, m, a, b).bytes_per_s;
        links.set(a, b, bw > 0 ? bw : 1e15, (s.delayMs(a, b) + s.delayMs(b, a)) / 1e3);
      }
    }
    auto ring = master::solveRing(links);
    if (!ring.isOk()) return *error = "the ring solver: " + ring.status().toString(), false;
    *order = ring->order;
    return true;
  }
  std::vector<uint8_t> used(n, 0);
  for (const std::string& item : split(rule, ',')) {
    uint32_t p = 0;
    if (!parseUint(item, &p) || p >= n || used[p]) {
      return *error = "--order '" + rule + "': solver, regions, index or every peer 0.." + std::to_string(n - 1) +
                      " once, comma-separated",
             false;
    }
    used[p] = 1;
    order->push_back(p);
  }
  if (order->size() != n) {
    return *error = "--order '" + rule + "' names " + std::to_string(order->size()) + " of " + std::to_string(n) +
                    " peers",
           false;
  }
  return true;
}

}  // namespace pccl::sim
