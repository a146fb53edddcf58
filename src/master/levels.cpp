#include "master/levels.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <optional>

namespace pccl::master {

namespace {
using Members = std::vector<const wire::MemberInfo*>;

// The slowest of the links (a -> b) given, as (bytes/s, one-way seconds); nullopt when one is not measured.
struct Slowest {
  double bandwidth = std::numeric_limits<double>::infinity();
  double delay_s = 0;
};
std::optional<Slowest> slowest(const std::vector<std::pair<const wire::MemberInfo*, const wire::MemberInfo*>>& links,
                               const LinkBook& book) {
  Slowest s;
  for (const auto& [a, b] : links) {
    const MeasuredLink* l = book.find(a->id, b->id);
    if (l == nullptr || l->bandwidth == 0) return std::nullopt;
    s.bandwidth = std::min(s.bandwidth, static_cast<double>(l->bandwidth));
    s.delay_s = std::max(s.delay_s, static_cast<double>(l->rtt_us) / 2e6);
  }
  return s;
}

LevelsChoice model(const Members& group, const std::vector<Members>& regions, const LinkBook& book,
                   const LevelsRule& rule) {
  const double bytes = static_cast<double>(rule.model_bytes);
  const double n = static_cast<double>(group.size());
  std::vector<std::pair<const wire::MemberInfo*, const wire::MemberInfo*>> ring;
  for (size_t i = 0; i < group.size(); ++i) ring.emplace_back(group[i], group[(i + 1) % group.size()]);
  const auto flat_links = slowest(ring, book);
  double lan_s = 0, wan_s = 0;
  bool measured = flat_links.has_value();
  const double r = static_cast<double>(regions.size());
  for (const Members& region : regions) {
    const double m = static_cast<double>(region.size());
    if (region.size() > 1) {
      std::vector<std::pair<const wire::MemberInfo*, const wire::MemberInfo*>> inside;
      for (size_t i = 0; i < region.size(); ++i) inside.emplace_back(region[i], region[(i + 1) % region.size()]);
      const auto l = slowest(inside, book);
      measured = measured && l.has_value();
      if (l) lan_s = std::max(lan_s, 2 * ((m - 1) / m * bytes / l->bandwidth + (m - 1) * l->delay_s));
    }
    std::vector<std::pair<const wire::MemberInfo*, const wire::MemberInfo*>> out;
    for (const auto* a : region) {
      for (const Members& other : regions) {
        if (&other == &region) continue;
        for (const auto* b : other) out.emplace_back(a, b);
      }
    }
    const auto w = slowest(out, book);
    measured = measured && w.has_value();
    if (w) wan_s = std::max(wan_s, 2 * (r - 1) / r * bytes / m / w->bandwidth + 2 * (r - 1) * w->delay_s);
  }
  if (!measured) return {wire::Levels::kTwoLevel, "two-level (regions, links not all measured)"};
  const double flat_s = 2 * (n - 1) / n * bytes / flat_links->bandwidth + 2 * (n - 1) * flat_links->delay_s;
  const double two_s = lan_s + wan_s;
  const std::string numbers = fmt::format("predicted {:.0f} MiB: flat {:.1f} ms, two-level {:.1f} ms",
                                          bytes / (1 << 20), flat_s * 1e3, two_s * 1e3);
  if (two_s <= rule.margin * flat_s) return {wire::Levels::kTwoLevel, "two-level (" + numbers + ")"};
  return {wire::Levels::kFlat, "flat (" + numbers + ")"};
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
    if (flat) {
      out[group] = {wire::Levels::kFlat, "flat (asked)"};
    } else if (nothing) {
      out[group] = {wire::Levels::kFlat, regions.size() <= 1 ? "flat (one region)" : "flat (one member per region)"};
    } else if (two) {
      out[group] = {wire::Levels::kTwoLevel, "two-level (asked)"};
    } else {
      out[group] = model(members, regions, book, rule);
    }
  }
  return out;
}

}  // namespace pccl::master
