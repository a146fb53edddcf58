#include "master/relays.hpp"

#include <algorithm>
#include <map>

namespace pccl::master {

bool anyDialable(const std::vector<wire::MemberInfo>& members) {
  return std::any_of(members.begin(), members.end(), [](const wire::MemberInfo& m) { return m.inbound != 0; });
}

size_t assignRelays(std::vector<wire::MemberInfo>& ring) {
  std::map<uint32_t, std::vector<size_t>> groups;  // ring indices per group, in ring order
  for (size_t i = 0; i < ring.size(); ++i) {
    ring[i].relay = wire::Uuid{};
    groups[ring[i].group].push_back(i);
  }
  std::vector<size_t> load(ring.size(), 0);
  size_t unrelayed = 0;
  for (const auto& [group, members] : groups) {
    if (members.size() < 2) continue;
    for (size_t k = 0; k < members.size(); ++k) {
      const size_t a = members[k], b = members[(k + 1) % members.size()];
      if (wire::linkable(ring[a], ring[b])) continue;
      size_t best = ring.size();
      for (size_t r = 0; r < ring.size(); ++r) {
        if (r == a || r == b || ring[r].inbound == 0) continue;
        if (best == ring.size() || load[r] < load[best]) best = r;
      }
      if (best == ring.size()) {
        ++unrelayed;
        continue;
      }
      ring[a].relay = ring[best].id;
      ++load[best];
    }
  }
  return unrelayed;
}

}  // namespace pccl::master
