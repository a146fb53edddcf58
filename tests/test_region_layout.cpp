// The regions of a group's ring as the collectives see them (collective/region_layout.hpp). Pure.
#include <catch2/catch.hpp>

#include "collective/region_layout.hpp"

using pccl::collective::RegionLayout;
using pccl::collective::regionLayout;

TEST_CASE("region layout: regions by first member, members in ring order, positions within a region",
          "[regions]") {
  const RegionLayout l = regionLayout({"us", "eu", "us", "", "eu", "us"});
  CHECK(l.names == std::vector<std::string>{"us", "eu", ""});
  CHECK(l.region_of == std::vector<uint32_t>{0, 1, 0, 2, 1, 0});
  CHECK(l.members == std::vector<std::vector<uint32_t>>{{0, 2, 5}, {1, 4}, {3}});
  CHECK(l.index_in_region == std::vector<uint32_t>{0, 0, 1, 0, 1, 2});
  CHECK(l.regions() == 3);
  CHECK(l.ranks() == 6);
  CHECK(l.largest() == 3);
  CHECK_FALSE(l.flat());
}

TEST_CASE("region layout: flat when there is nothing to do on two levels", "[regions]") {
  const RegionLayout empty = regionLayout({});
  CHECK(empty.regions() == 0);
  CHECK(empty.largest() == 0);
  CHECK(empty.flat());
  CHECK(regionLayout({"", "", ""}).flat());            // one region (unnamed: nothing declared or detected)
  CHECK(regionLayout({"a", "b", "c"}).flat());         // one peer per region
  CHECK_FALSE(regionLayout({"a", "b", "a"}).flat());   // a region of two
  const RegionLayout one = regionLayout({"solo"});
  CHECK(one.members == std::vector<std::vector<uint32_t>>{{0}});
  CHECK(one.flat());
}
