#include "master/ring_order.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>

#include "master/relays.hpp"
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

// Every pair of the group that can have a direct link was measured.
bool covered(const std::vector<const wire::MemberInfo*>& members, const LinkBook& book) {
  for (const auto* a : members) {
    for (const auto* b : members) {
      if (a != b && wire::linkable(*a, *b) && !book.has(a->id, b->id)) return false;
    }
  }
  return true;
}

// The links of two members that cannot link directly, in `m`: unusable (0) unless `relayed`, then
// through the group's best relay (a member that can be dialled: the slower of its two hops, halved, as
// the relay's own links carry its ring traffic too; the two round trips summed), else unusable.
void relayedLinks(const std::vector<const wire::MemberInfo*>& members, LinkMatrix& m, bool relayed) {
  const LinkMatrix direct = m;
  for (size_t a = 0; a < members.size(); ++a) {
    for (size_t b = 0; b < members.size(); ++b) {
      if (a == b || wire::linkable(*members[a], *members[b])) continue;
      double bw = 0, rtt = 0;
      for (size_t r = 0; relayed && r < members.size(); ++r) {
        if (r == a || r == b || members[r]->inbound == 0) continue;
        const double via = std::min(direct.bw(a, r), direct.bw(r, b)) / 2;
        if (via > bw) {
          bw = via;
          rtt = direct.lat(a, r) + direct.lat(r, b);
        }
      }
      m.set(a, b, bw, rtt);
    }
  }
}

// Whether the ring `order` (indices into `members`) puts two members that cannot link side by side.
bool adjacentUnlinkable(const std::vector<const wire::MemberInfo*>& members, const std::vector<uint32_t>& order) {
  if (order.size() < 2) return false;
  for (size_t i = 0; i < order.size(); ++i) {
    if (!wire::linkable(*members[order[i]], *members[order[(i + 1) % order.size()]])) return true;
  }
  return false;
}

// `order` with a member that can be dialled after each one that cannot, where there are enough: the
// dialable ones in their order, each followed by the next undialable one still to place.
std::vector<uint32_t> spreadUndialable(const std::vector<const wire::MemberInfo*>& members,
                                       const std::vector<uint32_t>& order) {
  std::vector<uint32_t> open, closed;
  for (uint32_t i : order) (members[i]->inbound != 0 ? open : closed).push_back(i);
  if (closed.size() > open.size()) return order;  // no such ring: the build reports the link that fails
  std::vector<uint32_t> out;
  size_t next = 0;
  for (uint32_t i : open) {
    out.push_back(i);
    if (next < closed.size()) out.push_back(closed[next++]);
  }
  return out;
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
    std::vector<const wire::MemberInfo*> members;
    for (size_t i : group) {
      ids.push_back(joined[i].id);
      members.push_back(&joined[i]);
    }
    std::vector<uint32_t> identity(group.size());
    for (uint32_t i = 0; i < identity.size(); ++i) identity[i] = i;
    std::vector<uint32_t> order;
    const bool have_links = group.size() >= 2 && covered(members, book);
    LinkMatrix m = have_links ? book.matrix(ids) : LinkMatrix(0);
    if (have_links && group.size() >= 3) {
      // Direct links only when a ring of them exists (no relay then); else relayed ones count too.
      relayedLinks(members, m, false);
      Result<RingChoice> choice = solveRing(m, options);
      if (!choice.isOk()) {
        relayedLinks(members, m, true);
        choice = solveRing(m, options);
      }
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
      if (adjacentUnlinkable(members, order)) order = spreadUndialable(members, order);
    }
    if (adjacentUnlinkable(members, order)) {
      PCCL_LOG_INFO(kLog, "group {}: no ring keeps apart the members that cannot be dialled ({}): the links "
                    "between two of them run through relays (docs/concepts.md \"Reachability\")",
                    joined[group[0]].group, names(ids, order));
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
        if (a == b || !wire::linkable(joined[a], joined[b])) continue;
        if (all || !book.has(joined[a].id, joined[b].id)) pairs.emplace_back(a, b);
      }
    }
  }
  return pairs;
}

std::vector<size_t> withheld(const std::vector<wire::MemberInfo>& joined, const std::vector<bool>& pending) {
  std::vector<size_t> out;
  if (anyDialable(joined)) return out;  // a relay for every link that needs one
  for (const std::vector<size_t>& group : groupsOf(joined)) {
    size_t n = group.size();
    size_t closed = n;
    for (auto it = group.rbegin(); it != group.rend() && n >= 2 && closed > n / 2; ++it) {
      if (joined[*it].inbound != 0 || !pending[*it]) continue;
      out.push_back(*it);
      --n;
      --closed;
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace pccl::master
