#include "master/levels.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <optional>

namespace pccl::master {

namespace {
constexpr uint64_t kSmallestTwoLevelBytes = 64u << 10;
using Members = std::vector<const wire::MemberInfo*>;

using Links = std::vector<std::pair<const wire::MemberInfo*, const wire::MemberInfo*>>;

// A rate (bytes/s) and a one-way delay (s) that stand for some links.
struct Slowest {
  double bandwidth = std::numeric_limits<double>::infinity();
  double delay_s = 0;
};

// The links' (a -> b) rates and their longest one-way delay; nullopt when one is not measured.
std::optional<std::pair<std::vector<double>, double>> measured(const Links& links, const LinkBook& book) {
  std::vector<double> rates;
  double delay_s = 0;
  for (const auto& [a, b] : links) {
    const MeasuredLink* l = book.find(a->id, b->id);
    if (l == nullptr || l->bandwidth == 0) return std::nullopt;
    rates.push_back(static_cast<double>(l->bandwidth));
    delay_s = std::max(delay_s, static_cast<double>(l->rtt_us) / 2e6);
  }
  return std::make_pair(std::move(rates), delay_s);
}

// The slowest of the links: a ring runs at the speed of its slowest link.
std::optional<Slowest> slowest(const Links& links, const LinkBook& book) {
  auto m = measured(links, book);
  if (!m) return std::nullopt;
  Slowest s;
  for (double r : m->first) s.bandwidth = std::min(s.bandwidth, r);
  s.delay_s = m->second;
  return s;
}

// The typical of the links: their median rate (the lower of the middle two) and their longest one-way
// delay. A region's WAN level runs on many of its members' links at once (a piece ring each), and one
// probe that measured a link low (probes of the same path differ by up to half) should not price them
// all: on bench/regions.paths the slowest of a region's 20 links predicted 1.50 s for a 4 MiB two-level
// all-reduce, the median 1.20 s; measured 1.12 s (docs/benchmarks.md, protocol 15).
std::optional<Slowest> typical(const Links& links, const LinkBook& book) {
  auto m = measured(links, book);
  if (!m || m->first.empty()) return std::nullopt;
  auto& rates = m->first;
  std::nth_element(rates.begin(), rates.begin() + (rates.size() - 1) / 2, rates.end());
  return Slowest{rates[(rates.size() - 1) / 2], m->second};
}

// One group's predicted times (seconds) for an all-reduce of `bytes`, from its links.
struct Costs {
  double flat_bandwidth = 0, flat_delay_s = 0;  // the ring's slowest link, 2(N-1)/N of its delays summed
  double n = 0, r = 0;
  struct Region {
    double m = 1;
    std::optional<Slowest> lan, wan;  // lan: the slowest of its ring, none for one member; wan: typical()
  };
  std::vector<Region> regions;
  double flat(double bytes) const { return 2 * (n - 1) / n * bytes / flat_bandwidth + flat_delay_s; }
  double twoLevel(double bytes) const {
    double lan_s = 0, wan_s = 0;
    for (const Region& g : regions) {
      if (g.lan) lan_s = std::max(lan_s, 2 * ((g.m - 1) / g.m * bytes / g.lan->bandwidth + (g.m - 1) * g.lan->delay_s));
      wan_s = std::max(wan_s, 2 * (r - 1) / r * bytes / g.m / g.wan->bandwidth + 2 * (r - 1) * g.wan->delay_s);
    }
    return lan_s + wan_s;
  }
};

// Nullopt when a link it needs is not measured.
std::optional<Costs> costs(const Members& group, const std::vector<Members>& regions, const LinkBook& book) {
  Costs c;
  c.n = static_cast<double>(group.size());
  c.r = static_cast<double>(regions.size());
  Links ring;
  for (size_t i = 0; i < group.size(); ++i) ring.emplace_back(group[i], group[(i + 1) % group.size()]);
  const auto flat = slowest(ring, book);
  if (!flat) return std::nullopt;
  c.flat_bandwidth = flat->bandwidth;
  double delays = 0;
  for (const auto& [a, b] : ring) delays += static_cast<double>(book.find(a->id, b->id)->rtt_us) / 2e6;
  c.flat_delay_s = 2 * (c.n - 1) / c.n * delays;
  for (const Members& region : regions) {
    Costs::Region g;
    g.m = static_cast<double>(region.size());
    if (region.size() > 1) {
      Links inside;
      for (size_t i = 0; i < region.size(); ++i) inside.emplace_back(region[i], region[(i + 1) % region.size()]);
      g.lan = slowest(inside, book);
      if (!g.lan) return std::nullopt;
    }
    Links out;
    for (const auto* a : region) {
      for (const Members& other : regions) {
        if (&other == &region) continue;
        for (const auto* b : other) out.emplace_back(a, b);
      }
    }
    g.wan = typical(out, book);
    if (!g.wan) return std::nullopt;
    c.regions.push_back(g);
  }
  return c;
}

LevelsChoice model(const Members& group, const std::vector<Members>& regions, const LinkBook& book,
                   const LevelsRule& rule) {
  const auto c = costs(group, regions, book);
  if (!c) return {wire::Levels::kTwoLevel, 0, "two-level (regions, links not all measured)"};
  const double bytes = static_cast<double>(rule.model_bytes);
  const double flat_s = c->flat(bytes), two_s = c->twoLevel(bytes);
  const std::string numbers = fmt::format("predicted {:.0f} MiB: flat {:.1f} ms, two-level {:.1f} ms",
                                          bytes / (1 << 20), flat_s * 1e3, two_s * 1e3);
  if (two_s > rule.margin * flat_s) return {wire::Levels::kFlat, 0, "flat (" + numbers + ")"};
  // From the largest size down: the last size of an unbroken run of two-level wins.
  uint64_t from = uint64_t{1} << 30;
  for (uint64_t s = from; s >= kSmallestTwoLevelBytes; s /= 2) {
    const double size = static_cast<double>(s);
    if (c->twoLevel(size) > rule.margin * c->flat(size)) break;
    from = s == kSmallestTwoLevelBytes ? 0 : s;  // winning down to the smallest: every size
  }
  const std::string sizes = from == 0 ? std::string("every size") : fmt::format("from {} KiB up", from >> 10);
  return {wire::Levels::kTwoLevel, from, fmt::format("two-level {} ({})", sizes, numbers)};
}
}  // namespace

std::map<uint32_t, LevelsChoice> decideLevels(const std::vector<wire::MemberInfo>& ring,
                                              const std::map<wire::Uuid, uint8_t>& asked, const LinkBook& book,
                                              const LevelsRule& rule) {
  std::map<uint32_t, Members> groups;
  for (const auto& m : ring) groups[m.group].push_back(&m);
  std::map<uint32_t, LevelsChoice> out;
  for (const auto& [group, members] : groups) {
    std::vector<std::string> names;
    std::vector<Members> regions;
    for (const auto* m : members) {
      auto it = std::find(names.begin(), names.end(), m->region);
      if (it == names.end()) {
        names.push_back(m->region);
        regions.emplace_back();
        it = names.end() - 1;
      }
      regions[static_cast<size_t>(it - names.begin())].push_back(m);
    }
    bool flat = false, two = false;
    for (const auto* m : members) {
      auto a = asked.find(m->id);
      const uint8_t want = a == asked.end() ? 0 : a->second;
      flat = flat || want == static_cast<uint8_t>(wire::Levels::kFlat);
      two = two || want == static_cast<uint8_t>(wire::Levels::kTwoLevel);
    }
    const bool nothing = regions.size() <= 1 ||
                         std::all_of(regions.begin(), regions.end(), [](const Members& r) { return r.size() <= 1; });
    // Two levels link members that are not ring neighbours: two that cannot be dialled might be paired.
    bool unlinkable = false;
    for (const auto* a : members) {
      for (const auto* b : members) unlinkable = unlinkable || (a != b && !wire::linkable(*a, *b));
    }
    if (flat) {
      out[group] = {wire::Levels::kFlat, 0, "flat (asked)"};
    } else if (nothing) {
      out[group] = {wire::Levels::kFlat, 0, regions.size() <= 1 ? "flat (one region)" : "flat (one member per region)"};
    } else if (unlinkable) {
      out[group] = {wire::Levels::kFlat, 0, "flat (two members cannot be dialled: two levels might pair them)"};
    } else if (two) {
      out[group] = {wire::Levels::kTwoLevel, 0, "two-level (asked)"};
    } else {
      out[group] = model(members, regions, book, rule);
    }
  }
  return out;
}

}  // namespace pccl::master
