// The two-level all-reduce's plan (collective/two_level_plan.hpp): pieces, owners, links, and each
// member's share of a call. Pure.
#include <catch2/catch.hpp>

#include <map>
#include <set>

#include "collective/partition.hpp"
#include "collective/two_level_plan.hpp"

using namespace pccl::collective;

namespace {
// 4 + 3 + 2 members, interleaved in ring order as a join order would leave them.
const std::vector<std::string> kUnequal = {"a", "b", "c", "a", "b", "a", "c", "b", "a"};
}  // namespace

TEST_CASE("two-level plan: cuts at floor(j * count / parts) never cross", "[regions]") {
  for (size_t count : {0, 1, 2, 5, 7, 12, 13, 1000, 1001}) {
    size_t sum = 0;
    for (uint32_t j = 0; j < 7; ++j) {
      const Span s = cutOf(count, 7, j);
      CHECK(s.offset == sum);
      sum += s.count;
      CHECK(s.count <= count / 7 + 1);
    }
    CHECK(sum == count);
    // A cut at 1/2 lies between those at 1/3 and 2/3, whatever the count.
    CHECK(cutAt(count, 1, 3) <= cutAt(count, 1, 2));
    CHECK(cutAt(count, 1, 2) <= cutAt(count, 2, 3));
    CHECK(cutAt(count, 2, 4) == cutAt(count, 1, 2));
  }
  CHECK(cutAt(size_t(1) << 62, 3, 4) == (size_t(3) << 60));  // no overflow
}

TEST_CASE("two-level plan: equal regions give one piece per position, owned by the same index", "[regions]") {
  const TwoLevelRing ring = twoLevelRing(regionLayout({"a", "a", "a", "b", "b", "b"}));
  REQUIRE(ring.pieces() == 3);
  for (uint32_t k = 0; k < 3; ++k) CHECK(ring.owner[k] == std::vector<uint32_t>{k, 3 + k});
  const auto edges = twoLevelEdges(ring);
  const std::set<std::pair<uint32_t, uint32_t>> got(edges.begin(), edges.end());
  for (uint32_t k = 0; k < 3; ++k) {
    CHECK(got.count({k, (k + 1) % 3}) == 1);          // region a's ring
    CHECK(got.count({3 + k, 3 + (k + 1) % 3}) == 1);  // region b's
    CHECK(got.count({k, 3 + k}) == 1);                // position k across the two regions, both ways
    CHECK(got.count({3 + k, k}) == 1);
  }
  CHECK(edges.size() == 12);
  // Rank 0's neighbours (1, 5) are the flat ring's; it links to 2 (a's ring closes) and 3 (across).
  const auto links = twoLevelLinks(ring, 0);
  REQUIRE(links.size() == 2);
  CHECK(links[0].peer == 2);
  CHECK(links[0].dial);
  CHECK(links[1].peer == 3);
  CHECK(links[1].dial);
  const auto back = twoLevelLinks(ring, 3);
  CHECK(std::any_of(back.begin(), back.end(), [](const ExtraLink& l) { return l.peer == 0 && !l.dial; }));
}

TEST_CASE("two-level plan: unequal regions cut every block into pieces owned by one member per region",
          "[regions]") {
  const RegionLayout layout = regionLayout(kUnequal);
  const TwoLevelRing ring = twoLevelRing(layout);
  // Boundaries 0, 1/4, 1/3, 1/2, 2/3, 3/4, 1: six pieces.
  REQUIRE(ring.pieces() == 6);
  for (const auto& owners : ring.owner) {
    REQUIRE(owners.size() == 3);
    for (uint32_t r = 0; r < 3; ++r) CHECK(layout.region_of[owners[r]] == r);
  }
  for (size_t count : {0, 1, 5, 11, 12, 1000, 1001, 65537}) {
    // Every element is in exactly one piece, and every region's members own their own blocks' pieces.
    std::map<uint32_t, size_t> covered;  // per region: elements covered by its members' pieces
    for (uint32_t rank = 0; rank < layout.ranks(); ++rank) {
      const TwoLevelPart part = twoLevelPart(ring, rank, count);
      CHECK(part.region == layout.region_of[rank]);
      CHECK(part.block.offset == part.blocks[part.region_rank].offset);
      size_t at = part.block.offset;
      for (const auto& piece : part.pieces) {
        CHECK(piece.span.offset == at);  // contiguous, inside the block
        at += piece.span.count;
        CHECK(piece.span.count > 0);
        CHECK(ring.owner[piece.id][part.region] == rank);
        CHECK(piece.succ == ring.owner[piece.id][(part.region + 1) % 3]);
        CHECK(piece.pred == ring.owner[piece.id][(part.region + 2) % 3]);
      }
      CHECK(at == part.block.offset + part.block.count);
      covered[part.region] += part.block.count;
    }
    for (const auto& [region, n] : covered) CHECK(n == count);
  }
  // The links a call needs are always among the ring's links (planned once per ring).
  const auto edges = twoLevelEdges(ring);
  const std::set<std::pair<uint32_t, uint32_t>> planned(edges.begin(), edges.end());
  for (size_t count : {1, 2, 3, 7, 100}) {
    for (uint32_t rank = 0; rank < layout.ranks(); ++rank) {
      for (const auto& piece : twoLevelPart(ring, rank, count).pieces) {
        CHECK(planned.count({rank, piece.succ}) == 1);
        CHECK(planned.count({piece.pred, rank}) == 1);
      }
    }
  }
  // The region of 2 carries half the buffer per member across the WAN; the region of 4 a quarter.
  const TwoLevelPart c0 = twoLevelPart(ring, 2, 1200);
  CHECK(c0.block.count == 600);
  const TwoLevelPart a0 = twoLevelPart(ring, 0, 1200);
  CHECK(a0.block.count == 300);
}

TEST_CASE("two-level plan: a one-member region owns every piece", "[regions]") {
  const TwoLevelRing ring = twoLevelRing(regionLayout({"a", "a", "solo", "a"}));
  const TwoLevelPart solo = twoLevelPart(ring, 2, 90);
  CHECK(solo.region_world == 1);
  CHECK(solo.block.count == 90);
  size_t n = 0;
  for (const auto& p : solo.pieces) n += p.span.count;
  CHECK(n == 90);
  CHECK(solo.pieces.size() == 3);
  // Links: the solo member reaches rank 0 through the flat ring (0 is its successor) and dials nobody
  // else it is not next to; rank 0 needs a link to 3 only if the region's ring does not close on it.
  for (uint32_t rank = 0; rank < 4; ++rank) {
    for (const auto& l : twoLevelLinks(ring, rank)) {
      CHECK(l.peer != rank);
      CHECK(l.dial == (rank < l.peer));
    }
  }
}

TEST_CASE("two-level plan: small calls gather between the first members of the regions, over links the ring has",
          "[regions]") {
  for (const auto& names : std::vector<std::vector<std::string>>{kUnequal, {"a", "a", "solo", "a"}, {"x", "y"}}) {
    const RegionLayout layout = regionLayout(names);
    const TwoLevelRing ring = twoLevelRing(layout);
    const auto edges = twoLevelEdges(ring);
    const std::set<std::pair<uint32_t, uint32_t>> planned(edges.begin(), edges.end());
    std::set<uint32_t> leaders;
    for (uint32_t rank = 0; rank < layout.ranks(); ++rank) {
      const TwoLevelGatherPlan plan = twoLevelGatherPlan(ring, rank);
      const TwoLevelPart part = twoLevelPart(ring, rank, 100);
      CHECK(plan.region == part.region);
      CHECK(plan.region_rank == part.region_rank);
      CHECK(plan.region_pred == part.region_pred);
      CHECK(plan.region_succ == part.region_succ);
      CHECK(plan.leader == (part.region_rank == 0));
      if (plan.leader) {
        leaders.insert(rank);
        CHECK(layout.members[plan.region][0] == rank);
        CHECK(plan.leader_succ == layout.members[(plan.region + 1) % plan.regions][0]);
        CHECK(plan.leader_pred == layout.members[(plan.region + plan.regions - 1) % plan.regions][0]);
      }
      for (uint32_t to : plan.receivers()) {
        INFO("rank " << rank << " -> " << to);
        CHECK(to != rank);
        CHECK((planned.count({rank, to}) + planned.count({to, rank})) > 0);  // a link, used either way
      }
    }
    CHECK(leaders.size() == layout.regions());
  }
}

TEST_CASE("two-level plan: calls above 8 MiB run in up to 8 waves, cut where every member cuts", "[regions]") {
  CHECK(twoLevelWaves(0) == 1);
  CHECK(twoLevelWaves(8u << 20) == 1);
  CHECK(twoLevelWaves((8u << 20) + 1) == 2);
  CHECK(twoLevelWaves(64u << 20) == 8);
  CHECK(twoLevelWaves(size_t{1} << 34) == kMaxTwoLevelWaves);
  // An all-reduce's waves: one more, the first and the last half as large (protocol 16).
  CHECK(twoLevelCallWaves(8u << 20) == 1);
  CHECK(twoLevelCallWaves((8u << 20) + 1) == 3);
  CHECK(twoLevelCallWaves(16u << 20) == 3);
  CHECK(twoLevelCallWaves(64u << 20) == kMaxTwoLevelWaves);
  CHECK(twoLevelCallWaves(size_t{1} << 34) == kMaxTwoLevelWaves);
  const TwoLevelRing ring = twoLevelRing(regionLayout(kUnequal));
  const size_t count = (20u << 20) / 4 + 3;
  const TwoLevelCall a = twoLevelCall(ring, 0, count, 4), b = twoLevelCall(ring, 5, count, 4);
  REQUIRE(a.waves.size() == 4);  // weights 1, 2, 2, 1
  size_t next = 0;
  for (size_t w = 0; w < a.waves.size(); ++w) {
    CHECK((a.waves[w].offset == b.waves[w].offset && a.waves[w].count == b.waves[w].count));
    CHECK(a.waves[w].offset == next);  // consecutive, covering the call
    next += a.waves[w].count;
  }
  CHECK(next == count);
  CHECK(a.waves[0].count == cutAt(count, 1, 6));
  CHECK(a.waves[1].count == cutAt(count, 3, 6) - cutAt(count, 1, 6));
  CHECK(a.waves[3].count == count - cutAt(count, 5, 6));
  // 64 MiB: 8 waves, the ends 1/14 of it, the others 1/7.
  const size_t big = (64u << 20) / 4;
  CHECK(twoLevelWaveOf(big, 8, 0).count == big / 14);
  CHECK(twoLevelWaveOf(big, 8, 3).count == cutAt(big, 7, 14) - cutAt(big, 5, 14));
  CHECK(twoLevelWaveOf(big, 8, 7).offset + twoLevelWaveOf(big, 8, 7).count == big);
  // Two waves are equal halves; tiny calls leave no wave negative.
  CHECK(twoLevelWaveOf(10, 2, 1).count == 5);
  size_t tiny = 0;
  for (uint32_t w = 0; w < 8; ++w) tiny += twoLevelWaveOf(3, 8, w).count;
  CHECK(tiny == 3);
}

TEST_CASE("two-level plan: an all-gather's waves are layouts of every member's sub-blocks, one after the other",
          "[regions]") {
  const TwoLevelRing ring = twoLevelRing(regionLayout(kUnequal));
  const TwoLevelBlocks all = twoLevelBlocks(ring.layout, 10);  // 9 members of 10 elements
  CHECK(!all.identity);
  const uint32_t waves = 3;  // sub-blocks of 3, 3 and 4 elements
  size_t next = 0;
  for (uint32_t w = 0; w < waves; ++w) {
    const TwoLevelBlocks v = all.wave(w, waves);
    const Span sub = cutOf(10, waves, w);
    CHECK(v.block == sub.count);
    CHECK(!v.identity);
    CHECK(all.waveOffset(w, waves) == next);  // the waves lie one after the other
    CHECK(v.count() == 9 * sub.count);
    next += v.count();
    // The same order as the whole layout: each region's data one span, its members in region order.
    size_t at = 0;
    for (size_t r = 0; r < ring.layout.regions(); ++r) {
      CHECK(v.data[r].offset == at);
      CHECK(v.data[r].count == ring.layout.members[r].size() * sub.count);
      for (uint32_t rank : ring.layout.members[r]) {
        CHECK(v.sorted_at[rank] == at);
        at += sub.count;
      }
    }
  }
  CHECK(next == all.count());
  // One wave of a sorted ring is the layout itself.
  const TwoLevelBlocks sorted = twoLevelBlocks(regionLayout({"a", "a", "b"}), 4);
  CHECK(sorted.identity);
  CHECK(sorted.wave(0, 1).identity);
  CHECK(!sorted.wave(0, 2).identity);
  // The wave count: the all-reduce's, unless the part ids of that many waves would not fit.
  CHECK(twoLevelLayoutWaves(ring, 64u << 20) == 8);
  CHECK(twoLevelLayoutWaves(ring, 1u << 20) == 1);
  std::vector<std::string> many;
  for (size_t i = 0; i < 2 * 6000; ++i) many.push_back(i % 2 ? "x" : "y" + std::to_string(i));
  const TwoLevelRing wide = twoLevelRing(regionLayout(many));  // 6001 regions, 6000 pieces
  const size_t slots = wide.pieces() + 2 + wide.layout.regions();
  CHECK(twoLevelLayoutWaves(wide, 64u << 20) == kTwoLevelPartIds / slots);
  CHECK(twoLevelLayoutWaves(wide, 64u << 20) * slots <= kTwoLevelPartIds);
}
