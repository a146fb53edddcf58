#include "master/ring_order.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>

#include "util/log.hpp"

namespace pccl::master {

namespace {
constexpr const char* kLog = "master";

// Member indices (into `joined`) per group, groups in the order their first member joined.
std::vector<std::vector<size_t>> groupsOf(const std::vector<wire::MemberInfo>& joined) {
  std::vector<std::vector<size_t>> groups;
  std::map<uint32_t, size_t> slot;
  for (size_t i = 0; i < joined.size(); ++i) {
    auto [it, fresh] = slot.emplace(joined[i].group, groups.size());
    if (fresh) groups.emplace_back();
    groups[it->second].push_back(i);
  }
  return groups;
}

bool covered(const std::vector<wire::Uuid>& ids, const LinkBook& book) {
  for (const auto& a : ids) {
    for (const auto& b : ids) {
      if (a != b && !book.has(a, b)) return false;
    }
  }
  return true;
}

std::string names(const std::vector<wire::Uuid>& ids, const std::vector<uint32_t>& order) {
  std::string s;
  for (uint32_t i : order) s += (s.empty() ? "" : " -> ") + wire::shortId(ids[i]);
  return s;
}

double mbps(double bytes_per_second) { return bytes_per_second / 1e6; }
}  // namespace

RingOrder orderRing(const std::vector<wire::MemberInfo>& joined, const std::vector<wire::MemberInfo>& previous,
                    const LinkBook& book, const SolveOptions& options) {
  RingOrder out;
  double best = std::numeric_limits<double>::infinity();
  double join = std::numeric_limits<double>::infinity();
  bool known = true;
  for (const std::vector<size_t>& group : groupsOf(joined)) {
    std::vector<wire::Uuid> ids;
    for (size_t i : group) ids.push_back(joined[i].id);
    std::vector<uint32_t> identity(group.size());
    for (uint32_t i = 0; i < identity.size(); ++i) identity[i] = i;
    std::vector<uint32_t> order;
    const bool have_links = group.size() >= 2 && covered(ids, book);
    LinkMatrix m = have_links ? book.matrix(ids) : LinkMatrix(0);
    if (have_links && group.size() >= 3) {
      Result<RingChoice> choice = solveRing(m, options);
      if (choice.isOk()) {
        order = choice->order;
        out.measured = true;
        out.summary += fmt::format("{}group {}: {} (bottleneck {:.1f} MB/s, total rtt {:.1f} ms, {}; join order "
                                   "{:.1f} MB/s)",
                                   out.summary.empty() ? "" : "; ", joined[group[0]].group, names(ids, order),
                                   mbps(choice->bottleneck), choice->latency * 1e3,
                                   choice->exact ? "exact" : "heuristic", mbps(ringBottleneck(m, identity)));
      } else {
        PCCL_LOG_WARN(kLog, "group {}: no ring over the measured links ({}); keeping the previous order",
                      joined[group[0]].group, choice.status().message());
      }
    }
    if (order.empty()) {
      // The previous ring's order, then newcomers in join order.
      for (const auto& p : previous) {
        auto it = std::find(ids.begin(), ids.end(), p.id);
        if (it != ids.end()) order.push_back(static_cast<uint32_t>(it - ids.begin()));
      }
      for (uint32_t i = 0; i < ids.size(); ++i) {
        if (std::find(order.begin(), order.end(), i) == order.end()) order.push_back(i);
      }
    }
    for (uint32_t i : order) out.ring.push_back(joined[group[i]]);
    if (group.size() >= 2) {
      if (have_links) {
        best = std::min(best, ringBottleneck(m, order));
        join = std::min(join, ringBottleneck(m, identity));
      } else {
        known = false;
      }
    }
  }
  if (known && best != std::numeric_limits<double>::infinity()) {
    out.bottleneck = best;
    out.join_bottleneck = join;
  }
  return out;
}

std::vector<ProbePair> linksToMeasure(const std::vector<wire::MemberInfo>& joined, const LinkBook& book, bool all) {
  std::vector<ProbePair> pairs;
  for (const std::vector<size_t>& group : groupsOf(joined)) {
    if (!all && group.size() < 3) continue;  // two peers have one ring whatever was measured
    for (size_t a : group) {
      for (size_t b : group) {
        if (a != b && (all || !book.has(joined[a].id, joined[b].id))) pairs.emplace_back(a, b);
      }
    }
  }
  return pairs;
}

}  // namespace pccl::master
