// The two-level all-reduce's plan (docs/algorithms.md §12): who reduces what with whom, from the
// group ring's regions alone, so every member computes the same plan. Pure.
//
//   level 1, inside each region:  a reduce-scatter on the region's ring; region r cuts the buffer into
//                                 m_r blocks (cutOf), block j ending reduced over the region at its
//                                 j-th member (in ring order);
//   level 2, across regions:      the buffer's *pieces* are the intervals between every region's block
//                                 boundaries (the fractions j / m_r, merged); a piece lies inside one
//                                 block of each region, and its owners (one per region) all-reduce it
//                                 on a ring of R members, in region order: every member's WAN link
//                                 carries its own block, so a region of m members uses m WAN links;
//   level 3, inside each region:  an all-gather of the blocks on the region's ring.
//
// The pieces and the links between members depend only on the regions (boundaries are fractions; a
// call's cut at floor(fraction * count) is monotone, so a call may leave a piece empty but never makes
// a new one): the ring's connections are planned once per ring, a call's spans per call.
#ifndef PCCL_COLLECTIVE_TWO_LEVEL_PLAN_HPP_
#define PCCL_COLLECTIVE_TWO_LEVEL_PLAN_HPP_

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "collective/partition.hpp"
#include "collective/region_layout.hpp"

namespace pccl::collective {

// A call's waves: the buffer cut into W consecutive ranges (cutOf), each run as its own two levels,
// one after the other on the LAN, so that one wave's WAN level overlaps the next one's reduce-scatter
// and the previous one's all-gather. W = clamp(ceil(bytes / 8 MiB), 1, 8): every peer computes the same
// (the all-gather's and reduce-scatter's waves; the all-reduce's and broadcast's: twoLevelCallWaves).
inline constexpr uint32_t kMaxTwoLevelWaves = 8;
inline constexpr size_t kTwoLevelWaveBytes = 8u << 20;
uint32_t twoLevelWaves(size_t bytes);
// An all-reduce's and a broadcast's waves (twoLevelCall): one up to 8 MiB; above, one more than
// ceil(bytes / 8 MiB), at most 8, the first and the last half as large as the others (from three
// waves on), so that the first WAN level starts and the last all-gather ends sooner.
uint32_t twoLevelCallWaves(size_t bytes);
// Wave w of `waves` of `count` elements: cutOf with weights 1, 2, ..., 2, 1 (from three waves on).
Span twoLevelWaveOf(size_t count, uint32_t waves, uint32_t w);

// The most pieces a two-level ring may have: a frame's phase carries its part (wave x (pieces + 2) +
// 0, 1 or 2 + the piece's index, two_level_allreduce.hpp) in its upper 16 bits. More: flat.
inline constexpr size_t kTwoLevelPartIds = size_t{1} << 16;  // a phase's upper 16 bits
inline constexpr size_t kMaxTwoLevelPieces = kTwoLevelPartIds / kMaxTwoLevelWaves - 2;

struct Fraction {
  uint64_t num = 0;
  uint64_t den = 1;
};

// The plan of one ring (count-independent).
struct TwoLevelRing {
  RegionLayout layout;
  // Calls of fewer bytes (the caller's buffer) run on the flat ring, unless they gather in two levels:
  // the master's choice for the group (wire::MemberInfo::two_level_bytes). 0: every size.
  uint64_t min_bytes = 0;
  std::vector<Fraction> bounds;              // 0 = bounds[0] < ... < bounds[P] = 1: piece k is [k, k+1)
  std::vector<std::vector<uint32_t>> owner;  // per piece: per region, the group rank holding it
  size_t pieces() const { return owner.size(); }
};
TwoLevelRing twoLevelRing(const RegionLayout& layout);

// Every ordered pair (sender, receiver) of group ranks that the two-level all-reduce sends data
// between: the region rings and every piece's ring, without duplicates, sorted.
std::vector<std::pair<uint32_t, uint32_t>> twoLevelEdges(const TwoLevelRing& ring);

// The links a member needs besides its ring neighbours' (which the flat ring already connects):
// every other member it exchanges two-level data with, over one set of connections per pair, dialled
// by the pair's lower group rank. `world`: the group's size (rank r's ring neighbours are r +- 1).
struct ExtraLink {
  uint32_t peer = 0;  // group rank
  bool dial = false;  // we open the connections (we are the lower rank)
};
std::vector<ExtraLink> twoLevelLinks(const TwoLevelRing& ring, uint32_t rank);

// One member's part in a call of `count` elements.
struct TwoLevelPart {
  struct Piece {
    uint32_t id = 0;           // index into TwoLevelRing::owner (and the part of its frames)
    Span span;                 // elements of the call
    uint32_t pred = 0, succ = 0;  // group ranks on the piece's ring (our region's neighbours)
  };
  uint32_t region = 0, regions = 1;        // our region's index, and how many regions
  uint32_t region_rank = 0, region_world = 1;
  uint32_t region_pred = 0, region_succ = 0;  // group ranks on our region's ring
  std::vector<Span> blocks;                // our region's blocks, by region rank
  Span block;                              // ours: blocks[region_rank]
  std::vector<Piece> pieces;               // the non-empty pieces inside our block, in order
};
TwoLevelPart twoLevelPart(const TwoLevelRing& ring, uint32_t rank, size_t count);

// One member's part in a whole call: its waves and its share of each (spans relative to the wave).
struct TwoLevelCall {
  std::vector<Span> waves;          // elements of the call
  std::vector<TwoLevelPart> parts;  // per wave
  // The group ranks that send us data, and that we send data to, in any wave (sorted, no duplicates).
  std::vector<uint32_t> senders() const;
  std::vector<uint32_t> receivers() const;
};
TwoLevelCall twoLevelCall(const TwoLevelRing& ring, uint32_t rank, size_t count, size_t elem_size);

// One member's part in a small two-level all-reduce (two_level_gather.hpp): a gather on its region's
// ring, then one gather between the regions' *leaders* (each region's first member, who owns piece 0:
// the leaders' ring is piece 0's ring, whose links the ring has), then a broadcast on the region's ring
// from the leader.
struct TwoLevelGatherPlan {
  uint32_t region = 0, regions = 1;
  uint32_t region_rank = 0, region_world = 1;
  uint32_t region_pred = 0, region_succ = 0;  // group ranks on our region's ring
  bool leader = false;                        // region_rank == 0
  uint32_t leader_pred = 0, leader_succ = 0;  // leader: group ranks on the leaders' ring (region order)
  // The group ranks we send data to (sorted, no duplicates).
  std::vector<uint32_t> receivers() const;
};
TwoLevelGatherPlan twoLevelGatherPlan(const TwoLevelRing& ring, uint32_t rank);

// Every group rank a member exchanges two-level data with, either way (its region's ring and its
// pieces' rings; sorted, no duplicates).
std::vector<uint32_t> twoLevelPeers(const TwoLevelRing& ring, uint32_t rank);

// The two-level all-gather's and reduce-scatter's layout (docs/algorithms.md §12c): the group's blocks
// of `block` elements sorted region by region (each region's members in region order), so that region
// r's data D_r is one span of the sorted buffer and fraction j / m_r of it is its member j's block.
struct TwoLevelBlocks {
  size_t block = 0;               // elements per member
  std::vector<Span> data;         // per region: D_r, in the sorted buffer
  std::vector<size_t> sorted_at;  // per group rank: where its block lies in the sorted buffer
  bool identity = true;           // the sorted buffer is the group's layout (the ring is sorted by region)
  size_t count() const { return block * sorted_at.size(); }
  // Piece k of D_r, and fraction j of D_r for a region of `members` (elements of the sorted buffer).
  Span piece(const TwoLevelRing& ring, size_t k, uint32_t r) const;
  // Piece k of every region's data, by region: the blocks of the piece's ring (empty when all are).
  std::vector<Span> pieceBlocks(const TwoLevelRing& ring, size_t k) const;
  Span fraction(uint32_t r, uint32_t members, uint32_t j) const;
  // The all-gather's and reduce-scatter's waves (docs/algorithms.md §12c): every member's block cut into
  // `waves` sub-blocks (cutOf); wave w is the layout of the w-th sub-blocks, sorted region by region like
  // the whole, and the waves lie one after the other in a wave-major buffer, wave w from waveOffset(w).
  // wave(w, waves): that layout, its offsets relative to the wave's start (identity only with one wave).
  TwoLevelBlocks wave(uint32_t w, uint32_t waves) const;
  size_t waveOffset(uint32_t w, uint32_t waves) const { return sorted_at.size() * cutOf(block, waves, w).offset; }
};
TwoLevelBlocks twoLevelBlocks(const RegionLayout& layout, size_t block);
// The all-gather's and reduce-scatter's wave count for a layout of `bytes`: twoLevelWaves(bytes), fewer
// when the parts of that many waves (pieces + 2 + regions ids each) would not fit a frame's part field.
uint32_t twoLevelLayoutWaves(const TwoLevelRing& ring, size_t bytes);

}  // namespace pccl::collective

#endif  // PCCL_COLLECTIVE_TWO_LEVEL_PLAN_HPP_
