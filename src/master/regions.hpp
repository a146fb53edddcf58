// The regions of a ring (docs/algorithms.md "Regions"): which members sit together behind fast, close
// links. The master decides them at every ring build and sends each member's in the TopologyUpdate
// (wire::MemberInfo::region), so every peer knows every member's region, the same for one epoch.
//
//   - a member that declared a region (CommConfig::region, PCCL_REGION) is in it;
//   - the others are placed from the links the master measured (LinkBook): members whose round trips
//     to each other are far below the rest are one region (single linkage under a threshold found in
//     the largest gap of the measured round trips, regionThreshold). A detected cluster that holds
//     declared members lends its undeclared ones its most common declared region; one without is
//     named "auto-0", "auto-1", ... by its earliest member in the order given (the join order);
//   - an undeclared member without a usable measured link is in the unnamed region "".
// Pure functions: no I/O, no clocks.
// Thread: MasterServer's event loop only.
#ifndef PCCL_MASTER_REGIONS_HPP_
#define PCCL_MASTER_REGIONS_HPP_

#include <string>
#include <vector>

#include "master/link_survey.hpp"
#include "wire/messages.hpp"

namespace pccl::master {

struct RegionRule {
  // Round trips below this count as this: one LAN or metro, whatever their jitter (a loaded host's
  // loopback measures anything from 30 us to milliseconds).
  double floor_s = 0.005;
  // A split between near and far needs the next measured round trip to be at least this many times
  // the one below it.
  double gap = 4.0;
};

// The near/far threshold over the round trips of the measured pairs (seconds, any order): pairs at or
// below it are near. Each value is first raised to rule.floor_s. The largest ratio between two
// consecutive sorted values, when it is at least rule.gap, splits them: the threshold is the lower of
// the two. Without such a gap the links are all alike: all near (the largest is below
// rule.gap x rule.floor_s: one LAN) or all far (0: every member its own region). No values: 0.
double regionThreshold(std::vector<double> rtts, const RegionRule& rule = {});

struct RegionMember {
  wire::Uuid id{};
  std::string declared;  // empty: declared nothing
};

struct RegionChoice {
  std::vector<std::string> regions;  // one per member, in the order given
  size_t detected = 0;               // members placed by the links
  size_t pairs = 0;                  // measured pairs the detection looked at
  double threshold_s = 0;            // regionThreshold over them (pairs == 0: unused)
};

// The effective region of every member of `members` (the ring's members in join order) from what
// they declared and the links in `book`.
RegionChoice decideRegions(const std::vector<RegionMember>& members, const LinkBook& book,
                           const RegionRule& rule = {});

// "eu-west (3), us-east (2), (unnamed) (1)": regions by name, the unnamed one last.
std::string regionSummary(const std::vector<std::string>& regions);

}  // namespace pccl::master

#endif  // PCCL_MASTER_REGIONS_HPP_
