#include "collective/partition.hpp"

namespace pccl::collective {

Span chunkOf(size_t count, uint32_t world, uint32_t index) {
  const size_t base = count / world;
  const size_t extra = count % world;
  Span s;
  s.offset = index * base + (index < extra ? index : extra);
  s.count = base + (index < extra ? 1 : 0);
  return s;
}

size_t cutAt(size_t count, uint64_t num, uint64_t den) {
  // floor(count * num / den) without overflow for den < 2^32: count = q * den + r.
  const uint64_t q = count / den, r = count % den;
  return static_cast<size_t>(q * num + r * num / den);
}

Span cutOf(size_t count, uint32_t parts, uint32_t index) {
  const size_t begin = cutAt(count, index, parts);
  return Span{begin, cutAt(count, index + 1, parts) - begin};
}

size_t segmentCount(size_t chunk_count, size_t segment_elems) {
  return (chunk_count + segment_elems - 1) / segment_elems;
}

Span segmentOf(size_t chunk_count, size_t segment_elems, size_t index) {
  Span s;
  s.offset = index * segment_elems;
  s.count = s.offset >= chunk_count ? 0 : (chunk_count - s.offset < segment_elems ? chunk_count - s.offset : segment_elems);
  return s;
}

size_t segmentElems(size_t count, uint32_t world, size_t elem_size, size_t max_segment_bytes, size_t floor_bytes) {
  constexpr size_t kSegmentsPerChunk = 16;
  const size_t max_elems = max_segment_bytes / elem_size > 0 ? max_segment_bytes / elem_size : 1;
  const size_t min_bytes = max_segment_bytes < floor_bytes ? max_segment_bytes : floor_bytes;
  const size_t min_elems = min_bytes / elem_size > 0 ? min_bytes / elem_size : 1;
  const size_t chunk = world == 0 ? count : (count + world - 1) / world;
  size_t want = (chunk + kSegmentsPerChunk - 1) / kSegmentsPerChunk;
  if (want < min_elems) want = min_elems;
  if (want > max_elems) want = max_elems;
  return want;
}

uint32_t phaseCount(uint32_t world) { return 2 * (world - 1); }

// Reduce-scatter step s: send chunk (r - s), receive (r - s - 1).
// All-gather step t:     send chunk (r + 1 - t), receive (r - t).
uint32_t sendChunk(uint32_t rank, uint32_t world, uint32_t phase) {
  const uint64_t w = world;
  if (phase + 1 < world) return static_cast<uint32_t>((rank + w * 2 - phase) % w);
  const uint64_t t = phase - (world - 1);
  return static_cast<uint32_t>((rank + 1 + w * 2 - t) % w);
}

uint32_t recvChunk(uint32_t rank, uint32_t world, uint32_t phase) {
  const uint64_t w = world;
  if (phase + 1 < world) return static_cast<uint32_t>((rank + w * 2 - phase - 1) % w);
  const uint64_t t = phase - (world - 1);
  return static_cast<uint32_t>((rank + w * 2 - t) % w);
}

bool gathers(uint32_t world, uint64_t input_wire_bytes, uint64_t gather_limit, uint64_t eager_limit) {
  if (world < 2 || input_wire_bytes == 0) return false;
  const uint64_t all = static_cast<uint64_t>(world - 1) * input_wire_bytes;
  return all <= gather_limit && all <= eager_limit;
}

}  // namespace pccl::collective
