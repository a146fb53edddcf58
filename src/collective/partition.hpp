// Pure functions that cut a buffer for the ring: chunks (one per rank) and segments (the pipelining
// and striping unit), plus the ring schedule. Unit-tested on their own.
#ifndef PCCL_COLLECTIVE_PARTITION_HPP_
#define PCCL_COLLECTIVE_PARTITION_HPP_

#include <cstddef>
#include <cstdint>

namespace pccl::collective {

struct Span {
  size_t offset = 0;  // elements
  size_t count = 0;
};

// Chunk `index` of `world` balanced chunks of `count` elements: the first count % world chunks hold one more.
Span chunkOf(size_t count, uint32_t world, uint32_t index);

// Part `index` of `parts` of `count` elements, cut at floor(j * count / parts): monotone in j / parts,
// so the cuts of different part counts never cross (the two-level all-reduce's blocks and pieces,
// two_level_plan.hpp, rely on it). Part sizes differ by at most one element.
Span cutOf(size_t count, uint32_t parts, uint32_t index);
// floor(count * num / den), exact for any count, num <= den < 2^32.
size_t cutAt(size_t count, uint64_t num, uint64_t den);

// Segments of at most `segment_elems` elements within a chunk of `chunk_count` elements.
size_t segmentCount(size_t chunk_count, size_t segment_elems);
Span segmentOf(size_t chunk_count, size_t segment_elems, size_t index);

// The smallest segment a chunk is cut into: on every ring, and on the WAN level of a two-level call
// (docs/algorithms.md §12), where a hop of a small piece is spread over the connections within the
// initial congestion window each restarts from after an idle period (10 segments of an MSS: a frame of
// 8 KiB crosses in one round trip, one of 64 KiB in three).
inline constexpr size_t kSegmentFloorBytes = 64 << 10;
inline constexpr size_t kWanSegmentFloorBytes = 8 << 10;

// Elements per segment for an operation of `count` elements of `elem_size` bytes over `world` ranks:
// 16 segments per chunk (to stripe over many connections and pipeline hops) where that keeps each at
// least min(floor, max_segment_bytes) and at most max_segment_bytes:
//   min(max(ceil(ceil(count / world) / 16), lo), hi), lo = max(1, min(floor, max) / elem_size),
//   hi = max(1, max / elem_size). The wire spec (docs/protocol.md §5.4) states the same rule; every
// peer computes the same.
size_t segmentElems(size_t count, uint32_t world, size_t elem_size, size_t max_segment_bytes,
                    size_t floor_bytes = kSegmentFloorBytes);

// The ring schedule for `rank` of `world` (world >= 2): 2(world-1) phases. Phases 0..world-2 are the
// reduce-scatter, world-1..2world-3 the all-gather. At each phase a rank sends one chunk to its
// successor and receives one from its predecessor; the chunk received at phase p is the one sent at p+1.
uint32_t phaseCount(uint32_t world);
uint32_t sendChunk(uint32_t rank, uint32_t world, uint32_t phase);
uint32_t recvChunk(uint32_t rank, uint32_t world, uint32_t phase);
inline bool isReducePhase(uint32_t world, uint32_t phase) { return phase + 1 < world; }
inline bool isLastReducePhase(uint32_t world, uint32_t phase) { return phase + 2 == world; }
inline bool isLastPhase(uint32_t world, uint32_t phase) { return phase + 1 == phaseCount(world); }

// Whether an all-reduce gathers instead of running on the ring (docs/algorithms.md §1): when everything a
// peer can receive of it, world - 1 inputs of `input_wire_bytes` each, fits both `gather_limit` and
// `eager_limit` (wire::kEagerBytes: no segment of it waits for a hello). Never below 2 peers or for 0
// bytes. Collectives decides with it; pccl-sim predicts with it.
bool gathers(uint32_t world, uint64_t input_wire_bytes, uint64_t gather_limit, uint64_t eager_limit);

}  // namespace pccl::collective

#endif  // PCCL_COLLECTIVE_PARTITION_HPP_
