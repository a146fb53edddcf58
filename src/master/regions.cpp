#include "master/regions.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>
#include <set>

namespace pccl::master {

namespace {

// The round trip of a measured pair, seconds: the smaller of its usable directions (bandwidth and a
// round trip recorded). False when neither direction is usable.
bool pairRtt(const LinkBook& book, const wire::Uuid& a, const wire::Uuid& b, double* rtt) {
  bool found = false;
  for (const MeasuredLink* l : {book.find(a, b), book.find(b, a)}) {
    if (l == nullptr || l->bandwidth == 0 || l->rtt_us == 0) continue;
    const double s = static_cast<double>(l->rtt_us) * 1e-6;
    *rtt = found ? std::min(*rtt, s) : s;
    found = true;
  }
  return found;
}

// Union-find over member indices; the root of a set is its smallest index.
struct Clusters {
  explicit Clusters(size_t n) : parent(n) { std::iota(parent.begin(), parent.end(), size_t{0}); }
  size_t root(size_t i) {
    while (parent[i] != i) i = parent[i] = parent[parent[i]];
    return i;
  }
  void join(size_t a, size_t b) {
    a = root(a);
    b = root(b);
    if (a != b) parent[std::max(a, b)] = std::min(a, b);
  }
  std::vector<size_t> parent;
};

struct Pair {
  size_t a = 0;
  size_t b = 0;
  double rtt = 0;
};

// The declared region most members of `cluster` declared (ties: the smallest name); empty when none did.
std::string commonDeclared(const std::vector<size_t>& cluster, const std::vector<RegionMember>& members) {
  std::map<std::string, size_t> votes;
  for (size_t i : cluster) {
    if (!members[i].declared.empty()) ++votes[members[i].declared];
  }
  std::string best;
  size_t most = 0;
  for (const auto& [name, n] : votes) {
    if (n > most) {
      best = name;
      most = n;
    }
  }
  return best;
}

}  // namespace

double regionThreshold(std::vector<double> rtts, const RegionRule& rule) {
  if (rtts.empty()) return 0;
  for (double& r : rtts) r = std::max(r, rule.floor_s);
  std::sort(rtts.begin(), rtts.end());
  double widest = 0;
  size_t below = 0;
  for (size_t i = 1; i < rtts.size(); ++i) {
    const double ratio = rtts[i] / rtts[i - 1];
    if (ratio > widest) {
      widest = ratio;
      below = i - 1;
    }
  }
  if (widest >= rule.gap) return rtts[below];
  return rtts.back() < rule.gap * rule.floor_s ? std::numeric_limits<double>::infinity() : 0.0;
}

RegionChoice decideRegions(const std::vector<RegionMember>& members, const LinkBook& book, const RegionRule& rule) {
  const size_t n = members.size();
  RegionChoice out;
  out.regions.resize(n);
  std::vector<Pair> pairs;
  std::vector<bool> measured(n, false);
  for (size_t a = 0; a < n; ++a) {
    out.regions[a] = members[a].declared;
    for (size_t b = a + 1; b < n; ++b) {
      double rtt = 0;
      if (!pairRtt(book, members[a].id, members[b].id, &rtt)) continue;
      pairs.push_back(Pair{a, b, rtt});
      measured[a] = measured[b] = true;
    }
  }
  out.pairs = pairs.size();
  if (pairs.empty()) return out;
  std::vector<double> rtts;
  for (const Pair& p : pairs) rtts.push_back(p.rtt);
  out.threshold_s = regionThreshold(rtts, rule);
  Clusters clusters(n);
  for (const Pair& p : pairs) {
    if (std::max(p.rtt, rule.floor_s) <= out.threshold_s) clusters.join(p.a, p.b);
  }
  // Each cluster's members, clusters by their earliest member.
  std::map<size_t, std::vector<size_t>> by_root;
  for (size_t i = 0; i < n; ++i) {
    if (measured[i]) by_root[clusters.root(i)].push_back(i);
  }
  std::set<std::string> taken;  // auto names never reuse a declared one
  for (const RegionMember& m : members) taken.insert(m.declared);
  size_t next_auto = 0;
  for (const auto& [root, cluster] : by_root) {
    const bool undeclared = std::any_of(cluster.begin(), cluster.end(), [&](size_t i) { return members[i].declared.empty(); });
    if (!undeclared) continue;
    std::string name = commonDeclared(cluster, members);
    if (name.empty()) {
      do {
        name = fmt::format("{}{}", wire::kAutoRegionPrefix, next_auto++);
      } while (taken.count(name) != 0);
    }
    for (size_t i : cluster) {
      if (!members[i].declared.empty()) continue;
      out.regions[i] = name;
      ++out.detected;
    }
  }
  return out;
}

std::string regionSummary(const std::vector<std::string>& regions) {
  std::map<std::string, size_t> counts;
  for (const std::string& r : regions) ++counts[r];
  std::string s;
  for (const auto& [name, n] : counts) {
    if (!name.empty()) s += fmt::format("{}{} ({})", s.empty() ? "" : ", ", name, n);
  }
  if (counts.count("") != 0) s += fmt::format("{}(unnamed) ({})", s.empty() ? "" : ", ", counts.at(""));
  return s;
}

}  // namespace pccl::master
