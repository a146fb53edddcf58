#include "master/tag_divergence.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <utility>

namespace pccl::master {

namespace {
using wire::shortId;
constexpr size_t kMaxNamed = 8;  // peers named per list in a message

std::string rankOf(const wire::Uuid& id, const std::vector<wire::Uuid>& members) {
  auto it = std::find(members.begin(), members.end(), id);
  return it == members.end() ? "?" : std::to_string(it - members.begin());
}

template <typename T, typename Fn>
std::string listOf(const std::vector<T>& items, Fn name) {
  std::string s;
  for (size_t i = 0; i < items.size() && i < kMaxNamed; ++i) {
    if (i > 0) s += i + 1 == items.size() ? " and " : ", ";
    s += name(items[i]);
  }
  if (items.size() > kMaxNamed) s += fmt::format(" and {} more", items.size() - kMaxNamed);
  return s;
}
}  // namespace

std::vector<CrossedTag> findCrossedTags(const std::map<uint64_t, std::set<wire::Uuid>>& announced,
                                        const std::vector<wire::Uuid>& members) {
  std::map<wire::Uuid, size_t> index;
  for (size_t i = 0; i < members.size(); ++i) index[members[i]] = i;
  // Every member's announced tags, sorted (the map is in tag order).
  std::vector<std::vector<uint64_t>> tags(members.size());
  for (const auto& [tag, who] : announced) {
    for (const auto& id : who) {
      auto it = index.find(id);
      if (it != index.end()) tags[it->second].push_back(tag);
    }
  }
  // escapes(m, a): m announced a tag that a has not. Memoised per pair: O(M² · tags) at most.
  std::map<std::pair<size_t, size_t>, bool> memo;
  auto escapes = [&](size_t m, size_t a) {
    auto [it, fresh] = memo.try_emplace({m, a}, false);
    if (fresh) it->second = !std::includes(tags[a].begin(), tags[a].end(), tags[m].begin(), tags[m].end());
    return it->second;
  };

  std::vector<CrossedTag> out;
  for (const auto& [tag, who] : announced) {
    CrossedTag t;
    t.tag = tag;
    bool crossed = false;
    for (size_t m = 0; m < members.size(); ++m) {
      if (who.count(members[m]) != 0) continue;
      MissingMember mm;
      mm.peer = members[m];
      for (const auto& id : who) {
        auto a = index.find(id);
        if (tags[m].empty() || a == index.end() || !escapes(m, a->second)) continue;
        std::vector<uint64_t> only_m;
        const auto& ta = tags[a->second];
        std::set_difference(tags[m].begin(), tags[m].end(), ta.begin(), ta.end(), std::back_inserter(only_m));
        mm.waiting = true;
        mm.waits_in = only_m.front();  // not empty: that is what escapes() said
        mm.not_called_by = id;
        crossed = true;
        break;
      }
      t.missing.push_back(mm);
    }
    if (crossed) out.push_back(std::move(t));
  }
  return out;
}

std::string describeCrossedTag(const CrossedTag& t, const std::set<wire::Uuid>& announcers,
                               const std::vector<wire::Uuid>& members) {
  // Announcers in ring order, so that the message reads the same on every run.
  std::vector<wire::Uuid> called;
  for (const auto& id : members) {
    if (announcers.count(id) != 0) called.push_back(id);
  }
  const std::string by = listOf(called, [&](const wire::Uuid& id) {
    return fmt::format("peer {} (rank {})", shortId(id), rankOf(id, members));
  });
  const std::string not_by = listOf(t.missing, [&](const MissingMember& m) {
    if (!m.waiting) return fmt::format("peer {} (rank {})", shortId(m.peer), rankOf(m.peer, members));
    return fmt::format("peer {} (rank {}, waiting in tag {}, which {} did not call)", shortId(m.peer),
                       rankOf(m.peer, members), m.waits_in, shortId(m.not_called_by));
  });
  return fmt::format("tag {} was called by {} but not by {}", t.tag, by, not_by);
}

}  // namespace pccl::master
