// The pure functions that cut a buffer for the ring: chunks, segments, the phase schedule.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <vector>

#include "collective/gather_allreduce.hpp"
#include "collective/partition.hpp"

using namespace pccl::collective;

TEST_CASE("partition: chunks tile the buffer exactly, balanced to within one element") {
  for (size_t count : {0, 1, 2, 3, 7, 100, 1001, 65537}) {
    for (uint32_t world : {1u, 2u, 3u, 4u, 7u, 16u}) {
      size_t next = 0, lo = count, hi = 0;
      for (uint32_t i = 0; i < world; ++i) {
        Span c = chunkOf(count, world, i);
        CHECK(c.offset == next);
        next += c.count;
        lo = std::min(lo, c.count);
        hi = std::max(hi, c.count);
      }
      CHECK(next == count);
      CHECK(hi - lo <= 1);
    }
  }
}

TEST_CASE("partition: segments tile a chunk and the last may be short") {
  for (size_t chunk : {0, 1, 5, 16, 17, 1000}) {
    for (size_t seg : {1, 4, 16, 1000, 5000}) {
      const size_t n = segmentCount(chunk, seg);
      size_t next = 0;
      for (size_t j = 0; j < n; ++j) {
        Span s = segmentOf(chunk, seg, j);
        CHECK(s.offset == next);
        CHECK(s.count > 0);
        CHECK(s.count <= seg);
        if (j + 1 < n) CHECK(s.count == seg);
        next += s.count;
      }
      CHECK(next == chunk);
      CHECK(segmentOf(chunk, seg, n).count == 0);
    }
  }
}

TEST_CASE("partition: segment size is bounded by the configured maximum and a 64 KiB floor") {
  CHECK(segmentElems(1 << 28, 4, 4, 1 << 20) == (1 << 20) / 4);     // large: capped at the maximum
  CHECK(segmentElems(1 << 20, 4, 4, 1 << 20) == (64 << 10) / 4);     // mid: the 64 KiB floor
  CHECK(segmentElems(1 << 22, 4, 4, 1 << 20) == (1 << 22) / 4 / 16);  // 16 segments per chunk
  CHECK(segmentElems(1000, 4, 4, 256) == 64);                        // a small maximum wins over the floor
  CHECK(segmentElems(10, 4, 8, 4) == 1);                             // never zero
  CHECK(segmentElems(0, 3, 2, 1 << 20) >= 1);
}

TEST_CASE("partition: the WAN level of a two-level call cuts small chunks into 8 KiB segments") {
  // A piece of 87 KiB over 3 regions: chunks of 29 KiB, four segments each (one at the ring's floor).
  const size_t piece = (87 << 10) / 4;
  CHECK(segmentElems(piece, 3, 4, 1 << 20, kWanSegmentFloorBytes) == (8 << 10) / 4);
  CHECK(segmentElems(piece, 3, 4, 1 << 20) == (64 << 10) / 4);
  // 16 segments per chunk where that is above the floor, the maximum still caps them.
  CHECK(segmentElems(1 << 22, 3, 4, 1 << 20, kWanSegmentFloorBytes) == segmentElems(1 << 22, 3, 4, 1 << 20));
  CHECK(segmentElems(1 << 28, 3, 4, 1 << 20, kWanSegmentFloorBytes) == (1 << 20) / 4);
  // A maximum below the floor wins, as on the ring.
  CHECK(segmentElems(1000, 3, 4, 4096, kWanSegmentFloorBytes) == 1024);
  CHECK(kWanSegmentFloorBytes < kSegmentFloorBytes);
}

TEST_CASE("partition: a gather across hosts cuts its input into 8 KiB segments, on one host 64 KiB") {
  RingOpSpec spec;
  spec.dtype = pccl::codec::DType::kFloat32;
  spec.desc.segment_bytes = 1 << 20;
  spec.count = (64 << 10) / 4;  // a 64 KiB input
  CHECK(gatherSegmentFloor(false) == kWanSegmentFloorBytes);
  CHECK(gatherSegmentFloor(true) == kSegmentFloorBytes);
  // Across hosts: 8 frames that each fit a restarted congestion window (10 segments of an MSS).
  CHECK(segmentCount(spec.count, gatherSegmentElems(spec, gatherSegmentFloor(false))) == 8);
  CHECK(segmentCount(spec.count, gatherSegmentElems(spec, gatherSegmentFloor(true))) == 1);
  // 16 segments of an input where that is above the floor; the maximum caps them.
  spec.count = (1 << 20) / 4;
  CHECK(gatherSegmentElems(spec, gatherSegmentFloor(false)) == (64 << 10) / 4);
  spec.count = 100;
  CHECK(gatherSegmentElems(spec, gatherSegmentFloor(false)) == (8 << 10) / 4);  // one segment of 400 bytes
  CHECK(segmentCount(spec.count, gatherSegmentElems(spec, gatherSegmentFloor(false))) == 1);
}

// The examples docs/protocol.md §5.4 gives for its rule: an implementation written from the spec
// must cut exactly these segments.
TEST_CASE("partition: the segment rule and examples of protocol.md") {
  const size_t s = segmentElems(1000000, 4, 4, 1 << 20);
  CHECK(s == 16384);  // ceil(250000 / 16) = 15625 is below the 64 KiB floor
  const Span chunk = chunkOf(1000000, 4, 0);
  CHECK(chunk.count == 250000);
  CHECK(segmentCount(chunk.count, s) == 16);
  CHECK(segmentOf(chunk.count, s, 15).count == 4240);
  const size_t big = segmentElems(size_t{1} << 26, 4, 4, 1 << 20);
  CHECK(big == 262144);  // ceil(2^24 / 16) = 2^20 is above the 1 MiB cap
  CHECK(segmentCount(chunkOf(size_t{1} << 26, 4, 0).count, big) == 64);
  // The formula itself, over a grid of inputs.
  for (size_t count : {0, 1, 1000, 65537, 1 << 20, 12345678}) {
    for (uint32_t world : {1u, 2u, 3u, 7u}) {
      for (size_t elem : {1, 2, 4, 8}) {
        for (size_t max_bytes : {4, 256, 1000, 65536, 1 << 20}) {
          const size_t chunk_max = (count + world - 1) / world;
          const size_t lo = std::max<size_t>(1, std::min<size_t>(65536, max_bytes) / elem);
          const size_t hi = std::max<size_t>(1, max_bytes / elem);
          const size_t want = std::min(std::max((chunk_max + 15) / 16, lo), hi);
          CHECK(segmentElems(count, world, elem, max_bytes) == want);
        }
      }
    }
  }
}

TEST_CASE("partition: the ring schedule sends what the predecessor receives and forwards what it got") {
  for (uint32_t world : {2u, 3u, 4u, 5u, 7u}) {
    for (uint32_t r = 0; r < world; ++r) {
      const uint32_t pred = (r + world - 1) % world;
      std::set<uint32_t> reduced;
      for (uint32_t p = 0; p < phaseCount(world); ++p) {
        CHECK(recvChunk(r, world, p) == sendChunk(pred, world, p));  // what arrives is what was sent
        if (p + 1 < phaseCount(world)) CHECK(sendChunk(r, world, p + 1) == recvChunk(r, world, p));
        if (isReducePhase(world, p)) reduced.insert(recvChunk(r, world, p));
      }
      CHECK(sendChunk(r, world, 0) == r);                            // phase 0 sends our own chunk
      CHECK(reduced.size() == world - 1);                             // every other chunk once
      CHECK(reduced.count(r) == 0);
      // The chunk finished at the last reduce phase is ours to own: (r + 1) mod world.
      CHECK(recvChunk(r, world, world - 2) == (r + 1) % world);
    }
  }
}

TEST_CASE("partition: an all-reduce gathers when world - 1 inputs fit the gather limit and the eager limit") {
  constexpr uint64_t kEager = 4u << 20;
  CHECK_FALSE(gathers(1, 4, 1 << 20, kEager));  // alone: nothing to gather
  CHECK_FALSE(gathers(4, 0, 1 << 20, kEager));  // an empty call
  CHECK(gathers(2, 4, 1 << 20, kEager));
  // Four peers, 1 MiB limit: inputs up to 349,525 bytes (3 x 349,525 <= 1 MiB).
  CHECK(gathers(4, 349525, 1 << 20, kEager));
  CHECK_FALSE(gathers(4, 349526, 1 << 20, kEager));
  CHECK_FALSE(gathers(4, 4096, 0, kEager));  // a limit of 0: always the ring
  // The eager limit caps whatever the gather limit says.
  CHECK(gathers(9, 512 << 10, 64u << 20, kEager));
  CHECK_FALSE(gathers(9, (512 << 10) + 1, 64u << 20, kEager));
}
