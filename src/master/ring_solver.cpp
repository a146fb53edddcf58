#include "master/ring_solver.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

namespace pccl::master {

namespace {

constexpr size_t kMaxExact = 20;
constexpr double kInf = std::numeric_limits<double>::infinity();

using Order = std::vector<uint32_t>;

// Usable links at or above a threshold, as one bit mask of successors per peer (exact mode, n <= 20).
std::vector<uint32_t> adjacency(const LinkMatrix& m, double threshold) {
  std::vector<uint32_t> adj(m.n, 0);
  for (size_t i = 0; i < m.n; ++i) {
    for (size_t j = 0; j < m.n; ++j) {
      if (i != j && m.bw(i, j) > 0 && m.bw(i, j) >= threshold) adj[i] |= 1u << j;
    }
  }
  return adj;
}

// Is there a Hamiltonian cycle through 0 on these links? ends[mask]: the peers v such that a path
// from 0 visiting exactly `mask` (which holds 0) ends at v.
bool hasCycle(const std::vector<uint32_t>& adj, size_t n) {
  const uint32_t full = (1u << n) - 1;
  std::vector<uint32_t> ends(size_t{1} << n, 0);
  ends[1] = 1;
  for (uint32_t mask = 1; mask <= full; mask += 2) {  // masks holding peer 0
    uint32_t e = ends[mask];
    while (e != 0) {
      const uint32_t v = static_cast<uint32_t>(__builtin_ctz(e));
      e &= e - 1;
      uint32_t next = adj[v] & ~mask;
      while (next != 0) {
        const uint32_t u = static_cast<uint32_t>(__builtin_ctz(next));
        next &= next - 1;
        ends[mask | (1u << u)] |= 1u << u;
      }
    }
  }
  for (uint32_t e = ends[full]; e != 0; e &= e - 1) {
    const uint32_t v = static_cast<uint32_t>(__builtin_ctz(e));
    if (v != 0 && (adj[v] & 1u) != 0) return true;
  }
  return false;
}

// The least-latency Hamiltonian cycle through 0 using only links in `adj` (Held-Karp); empty if none.
Order leastLatencyCycle(const LinkMatrix& m, const std::vector<uint32_t>& adj) {
  const size_t n = m.n;
  const uint32_t full = (1u << n) - 1;
  const size_t states = (size_t{1} << n) * n;
  std::vector<double> cost(states, kInf);
  std::vector<uint8_t> parent(states, 0xFF);
  const auto at = [n](uint32_t mask, uint32_t v) { return static_cast<size_t>(mask) * n + v; };
  cost[at(1, 0)] = 0;
  for (uint32_t mask = 1; mask <= full; mask += 2) {
    for (uint32_t v = 0; v < n; ++v) {
      const double c = cost[at(mask, v)];
      if (c == kInf) continue;
      for (uint32_t next = adj[v] & ~mask; next != 0; next &= next - 1) {
        const uint32_t u = static_cast<uint32_t>(__builtin_ctz(next));
        const size_t to = at(mask | (1u << u), u);
        const double nc = c + m.lat(v, u);
        if (nc < cost[to]) {
          cost[to] = nc;
          parent[to] = static_cast<uint8_t>(v);
        }
      }
    }
  }
  double best = kInf;
  uint32_t last = 0;
  for (uint32_t v = 1; v < n; ++v) {
    if ((adj[v] & 1u) == 0 || cost[at(full, v)] == kInf) continue;
    const double c = cost[at(full, v)] + m.lat(v, 0);
    if (c < best) {
      best = c;
      last = v;
    }
  }
  if (best == kInf) return {};
  Order order(n);
  uint32_t mask = full;
  for (size_t i = n; i-- > 1;) {
    order[i] = last;
    const uint32_t prev = parent[at(mask, last)];
    mask &= ~(1u << last);
    last = prev;
  }
  order[0] = 0;
  return order;
}

// The distinct usable bandwidths, highest first: the only thresholds a bottleneck can take.
std::vector<double> thresholds(const LinkMatrix& m) {
  std::vector<double> t;
  for (size_t i = 0; i < m.n; ++i) {
    for (size_t j = 0; j < m.n; ++j) {
      if (i != j && m.bw(i, j) > 0) t.push_back(m.bw(i, j));
    }
  }
  std::sort(t.begin(), t.end(), std::greater<double>());
  t.erase(std::unique(t.begin(), t.end()), t.end());
  return t;
}

// The largest threshold (index into `t`, highest first) for which `feasible` holds, by binary search;
// feasibility is monotone (a lower threshold keeps every link of a higher one). -1 if none.
template <typename Feasible>
long largestFeasible(const std::vector<double>& t, Feasible feasible) {
  long lo = 0, hi = static_cast<long>(t.size()) - 1, found = -1;
  while (lo <= hi) {
    const long mid = lo + (hi - lo) / 2;
    if (feasible(t[static_cast<size_t>(mid)])) {
      found = mid;
      hi = mid - 1;
    } else {
      lo = mid + 1;
    }
  }
  return found;
}

// ---- heuristic --------------------------------------------------------------------------------------

bool usable(const LinkMatrix& m, uint32_t a, uint32_t b, double threshold) {
  return m.bw(a, b) > 0 && m.bw(a, b) >= threshold;
}

// A randomised depth-first construction of a Hamiltonian cycle through 0 on links >= threshold,
// preferring the successor with the fewest onward choices (Warnsdorff), bounded by `budget` steps.
Order constructCycle(const LinkMatrix& m, double threshold, std::mt19937_64& rng, uint64_t budget) {
  const size_t n = m.n;
  Order path{0};
  std::vector<char> used(n, 0);
  std::vector<uint32_t> out_left(n, 0);  // per peer: usable links to peers not yet on the path
  for (uint32_t a = 0; a < n; ++a) {
    for (uint32_t b = 1; b < n; ++b) out_left[a] += (a != b && usable(m, a, b, threshold)) ? 1 : 0;
  }
  const auto mark = [&](uint32_t x, bool on) {
    used[x] = on ? 1 : 0;
    for (uint32_t a = 0; a < n; ++a) {
      if (a != x && usable(m, a, x, threshold)) on ? --out_left[a] : ++out_left[a];
    }
  };
  used[0] = 1;
  std::vector<std::vector<uint32_t>> choices(n);
  std::vector<std::pair<uint32_t, uint32_t>> ranked;
  const auto fill = [&](uint32_t v, std::vector<uint32_t>& out) {
    ranked.clear();
    for (uint32_t u = 0; u < n; ++u) {
      if (!used[u] && usable(m, v, u, threshold)) ranked.emplace_back(out_left[u], u);
    }
    std::shuffle(ranked.begin(), ranked.end(), rng);
    // Fewest onward choices last (taken first from the back); ties stay shuffled.
    std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    out.clear();
    for (const auto& r : ranked) out.push_back(r.second);
  };
  fill(0, choices[0]);
  uint64_t steps = 0;
  while (!path.empty() && steps++ < budget) {
    const uint32_t v = path.back();
    if (path.size() == n) {
      if (usable(m, v, 0, threshold)) return path;
      mark(v, false);
      path.pop_back();
      continue;
    }
    auto& c = choices[path.size() - 1];
    if (c.empty()) {
      if (path.size() > 1) mark(v, false);
      path.pop_back();
      continue;
    }
    const uint32_t u = c.back();
    c.pop_back();
    mark(u, true);
    path.push_back(u);
    if (path.size() < n) fill(u, choices[path.size() - 1]);
  }
  return {};
}

Order findCycle(const LinkMatrix& m, double threshold, const SolveOptions& o, std::mt19937_64& rng) {
  // Steps per construction (each costs O(n)): room for deep backtracking on small worlds, where a
  // probe's few Hamiltonian cycles are hard to hit, and about 2^25 element visits per probe in all (a
  // probe that fails spends all of them: 256 peers take ~0.5 s).
  const uint64_t n = m.n;
  const uint64_t budget = std::max<uint64_t>(16384, 32 * n);
  const uint64_t affordable = std::max<uint64_t>(4, (uint64_t{1} << 25) / (budget * n));
  const uint64_t attempts = std::min<uint64_t>(std::max<uint32_t>(1, o.attempts), affordable);
  for (uint64_t a = 0; a < attempts; ++a) {
    Order c = constructCycle(m, threshold, rng, budget);
    if (!c.empty()) return c;
  }
  return {};
}

// Descent on the ring's total cost(a, b) over its links, keeping every link ok(a, b); first
// improvement, each move costed in O(1): 2-opt (reverse r[i..j]; its inner links change direction, so
// their reversed costs and ok-ness are accumulated as j grows) and Or-opt (move a run of 1..3 peers
// elsewhere, same direction). Peer 0 stays first. Returns whether anything improved.
template <typename Cost, typename Ok>
bool descend(Order& r, Cost cost, Ok ok, uint32_t rounds) {
  const size_t n = r.size();
  if (n < 4) return false;
  constexpr double kEps = 1e-12;
  bool any = false;
  for (uint32_t round = 0; round < rounds; ++round) {
    bool improved = false;
    for (size_t i = 1; i + 1 < n; ++i) {
      double fwd = 0, rev = 0;
      bool rev_ok = true;
      for (size_t j = i + 1; j < n; ++j) {
        fwd += cost(r[j - 1], r[j]);
        rev += cost(r[j], r[j - 1]);
        rev_ok = rev_ok && ok(r[j], r[j - 1]);
        if (!rev_ok) break;
        const uint32_t before = r[i - 1], after = r[(j + 1) % n];
        if (!ok(before, r[j]) || !ok(r[i], after)) continue;
        const double delta =
            (cost(before, r[j]) + rev + cost(r[i], after)) - (cost(before, r[i]) + fwd + cost(r[j], after));
        if (delta < -kEps) {
          std::reverse(r.begin() + static_cast<long>(i), r.begin() + static_cast<long>(j) + 1);
          improved = true;
          fwd = rev = 0;  // the run is now reversed: start this i again
          rev_ok = true;
          j = i;
        }
      }
    }
    for (size_t len = 1; len <= 3 && len + 1 < n; ++len) {
      for (size_t i = 1; i + len <= n; ++i) {
        const uint32_t first = r[i], last = r[i + len - 1];
        const uint32_t prev = r[i - 1], next = r[(i + len) % n];
        if (!ok(prev, next)) continue;
        const double gain = cost(prev, first) + cost(last, next) - cost(prev, next);
        for (size_t k = 0; k < n; ++k) {
          if (k + 1 >= i && k < i + len) continue;  // no move, or inside the run
          const uint32_t a = r[k], b = r[(k + 1) % n];
          if (!ok(a, first) || !ok(last, b)) continue;
          if (cost(a, first) + cost(last, b) - cost(a, b) - gain >= -kEps) continue;
          Order moved;
          moved.reserve(n);
          for (size_t p = 0; p < n; ++p) {
            if (p >= i && p < i + len) continue;
            moved.push_back(r[p]);
            if (p == k) moved.insert(moved.end(), r.begin() + static_cast<long>(i), r.begin() + static_cast<long>(i + len));
          }
          r = std::move(moved);
          improved = true;
          break;
        }
      }
    }
    if (!improved) break;
    any = true;
  }
  return any;
}

// Raises the ring's bottleneck while a descent can: with every link kept at or above the current
// bottleneck, it minimises the number of links below the next threshold up; at zero the bottleneck
// has risen, and it tries the next one.
void raiseBottleneck(const LinkMatrix& m, const std::vector<double>& t, const SolveOptions& o, Order& r) {
  for (;;) {
    const double b = ringBottleneck(m, r);
    auto above = std::find_if(t.rbegin(), t.rend(), [b](double v) { return v > b; });
    if (above == t.rend()) return;
    const double target = *above;
    descend(
        r, [&](uint32_t a, uint32_t c) { return m.bw(a, c) < target ? 1.0 : 0.0; },
        [&](uint32_t a, uint32_t c) { return usable(m, a, c, b); }, o.descent_rounds);
    if (ringBottleneck(m, r) <= b) return;
  }
}

Status checkMatrix(const LinkMatrix& m, const SolveOptions& o) {
  if (m.n == 0) return Status::invalidArgument("no peers to put in a ring");
  if (m.bandwidth.size() != m.n * m.n || m.rtt.size() != m.n * m.n) {
    return Status::invalidArgument(fmt::format("link matrix of {} peers needs {} entries per table", m.n, m.n * m.n));
  }
  if (m.n > (1u << 16)) return Status::invalidArgument(fmt::format("{} peers: more than a ring solver takes", m.n));
  for (size_t i = 0; i < m.n * m.n; ++i) {
    if (std::isnan(m.bandwidth[i]) || std::isnan(m.rtt[i]) || m.rtt[i] < 0 || std::isinf(m.rtt[i])) {
      return Status::invalidArgument(fmt::format("link {} -> {}: bandwidth {} and RTT {} are not a measurement",
                                                 i / m.n, i % m.n, m.bandwidth[i], m.rtt[i]));
    }
  }
  if (!(o.tolerance >= 0 && o.tolerance < 1)) {
    return Status::invalidArgument(fmt::format("tolerance {} outside [0, 1)", o.tolerance));
  }
  if (o.exact_limit > kMaxExact) {
    return Status::invalidArgument(fmt::format("exact_limit {} above {}", o.exact_limit, kMaxExact));
  }
  return Status::ok();
}

Status noRing(const LinkMatrix& m) {
  for (size_t i = 0; i < m.n; ++i) {
    bool in = false, out = false;
    for (size_t j = 0; j < m.n; ++j) {
      if (j == i) continue;
      out = out || m.bw(i, j) > 0;
      in = in || m.bw(j, i) > 0;
    }
    if (!in || !out) {
      return Status::tooFewPeers(fmt::format("peer {} has no usable link {}: no ring includes it", i, out ? "in" : "out"));
    }
  }
  return Status::tooFewPeers("the usable links admit no ring through every peer");
}

RingChoice finish(const LinkMatrix& m, Order order, bool exact) {
  RingChoice r;
  r.bottleneck = ringBottleneck(m, order);
  r.latency = ringLatency(m, order);
  r.order = std::move(order);
  r.exact = exact;
  return r;
}

}  // namespace

double ringBottleneck(const LinkMatrix& m, const std::vector<uint32_t>& order) {
  if (order.size() < 2) return kInf;
  double b = kInf;
  for (size_t i = 0; i < order.size(); ++i) b = std::min(b, m.bw(order[i], order[(i + 1) % order.size()]));
  return b;
}

double ringLatency(const LinkMatrix& m, const std::vector<uint32_t>& order) {
  if (order.size() < 2) return 0;
  double l = 0;
  for (size_t i = 0; i < order.size(); ++i) l += m.lat(order[i], order[(i + 1) % order.size()]);
  return l;
}

Result<RingChoice> solveRing(const LinkMatrix& m, const SolveOptions& o) {
  PCCL_RETURN_IF_ERROR(checkMatrix(m, o));
  if (m.n == 1) return finish(m, {0}, true);
  if (m.n == 2) {
    if (m.bw(0, 1) <= 0 || m.bw(1, 0) <= 0) return noRing(m);
    return finish(m, {0, 1}, true);
  }
  const std::vector<double> t = thresholds(m);
  if (m.n <= o.exact_limit) {
    const long best = largestFeasible(t, [&](double th) { return hasCycle(adjacency(m, th), m.n); });
    if (best < 0) return noRing(m);
    const double floor = t[static_cast<size_t>(best)] * (1.0 - o.tolerance);
    Order order = leastLatencyCycle(m, adjacency(m, floor));
    return finish(m, std::move(order), true);
  }
  std::mt19937_64 rng(o.seed);
  Order found;
  const long best = largestFeasible(t, [&](double th) {
    Order c = findCycle(m, th, o, rng);
    if (c.empty()) return false;
    if (found.empty() || ringBottleneck(m, c) > ringBottleneck(m, found)) found = std::move(c);
    return true;
  });
  if (best < 0 || found.empty()) return noRing(m);
  raiseBottleneck(m, t, o, found);
  const double floor = ringBottleneck(m, found) * (1.0 - o.tolerance);
  descend(
      found, [&](uint32_t a, uint32_t b) { return m.lat(a, b); },
      [&](uint32_t a, uint32_t b) { return usable(m, a, b, floor); }, o.descent_rounds);
  return finish(m, std::move(found), false);
}

}  // namespace pccl::master

namespace pccl::master {

Result<RingChoice> bruteForceRing(const LinkMatrix& m, double tolerance) {
  if (m.n == 0 || m.n > 11) return Status::invalidArgument(fmt::format("brute force takes 1..11 peers, got {}", m.n));
  std::vector<uint32_t> order(m.n);
  std::iota(order.begin(), order.end(), 0u);
  // Two passes over every ring that starts with 0: the best bottleneck, then the least latency near it.
  double best = 0;
  do {
    best = std::max(best, m.n == 1 ? 1.0 : ringBottleneck(m, order));
  } while (std::next_permutation(order.begin() + 1, order.end()));
  if (best <= 0) return Status::tooFewPeers("no ring over the usable links");
  RingChoice choice;
  choice.exact = true;
  choice.latency = std::numeric_limits<double>::infinity();
  do {
    const double bn = m.n == 1 ? best : ringBottleneck(m, order);
    const double lat = ringLatency(m, order);
    if (bn >= best * (1.0 - tolerance) && lat < choice.latency) {
      choice.order = order;
      choice.bottleneck = bn;
      choice.latency = lat;
    }
  } while (std::next_permutation(order.begin() + 1, order.end()));
  return choice;
}

}  // namespace pccl::master
