// The regions of a group's ring as the collectives see them (docs/algorithms.md "Regions"): which
// region each group rank is in, and each region's members in ring order. Built from the regions the
// master sent in the TopologyUpdate (wire::MemberInfo::region), so every peer of a ring holds the same
// layout for one epoch. Pure.
#ifndef PCCL_COLLECTIVE_REGION_LAYOUT_HPP_
#define PCCL_COLLECTIVE_REGION_LAYOUT_HPP_

#include <cstdint>
#include <string>
#include <vector>

namespace pccl::collective {

struct RegionLayout {
  std::vector<std::string> names;              // the regions, by their first member in ring order
  std::vector<uint32_t> region_of;             // per group rank: its region (index into names)
  std::vector<std::vector<uint32_t>> members;  // per region: its members' group ranks, in ring order
  std::vector<uint32_t> index_in_region;       // per group rank: its position in members[region_of]

  size_t regions() const { return names.size(); }
  size_t ranks() const { return region_of.size(); }
  // The most members any region has (0 for an empty ring).
  size_t largest() const;
  // True when two levels have nothing to work with: at most one region, or only one-member regions.
  bool flat() const { return regions() <= 1 || largest() <= 1; }
};

// `regions`: the region of each member of the group's ring, by group rank.
RegionLayout regionLayout(const std::vector<std::string>& regions);

}  // namespace pccl::collective

#endif  // PCCL_COLLECTIVE_REGION_LAYOUT_HPP_
