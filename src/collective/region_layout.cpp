#include "collective/region_layout.hpp"

#include <algorithm>
#include <map>

namespace pccl::collective {

size_t RegionLayout::largest() const {
  size_t most = 0;
  for (const auto& m : members) most = std::max(most, m.size());
  return most;
}

RegionLayout regionLayout(const std::vector<std::string>& regions) {
  RegionLayout out;
  std::map<std::string, uint32_t> index;
  for (uint32_t rank = 0; rank < regions.size(); ++rank) {
    auto [it, fresh] = index.emplace(regions[rank], static_cast<uint32_t>(out.names.size()));
    if (fresh) {
      out.names.push_back(regions[rank]);
      out.members.emplace_back();
    }
    out.region_of.push_back(it->second);
    out.index_in_region.push_back(static_cast<uint32_t>(out.members[it->second].size()));
    out.members[it->second].push_back(rank);
  }
  return out;
}

}  // namespace pccl::collective
