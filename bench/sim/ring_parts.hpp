// One member's share of one ring of the library, as a pccl-sim component: the flat ring's all-reduce
// and gather are one part per member on the group's ring; the two-level schedules
// (two_level_schedules.hpp) run several parts per member on sub-rings (a region's ring, a piece's ring
// of R owners, the leaders' ring). Each part follows its library class's rules:
//   RingPart    RingCollective (src/collective/ring_collective.cpp): the phases [first, end) of the ring
//               (all-reduce: all of them; reduce-scatter: the first N-1; all-gather and broadcast: the
//               last N-1), our chunk's segments sent at the first phase, a segment of phase p that lands
//               sent on as p+1 while p+1 is in the window; before the successor's hello at most the
//               part's eager bytes go out, the rest wait for it
//   GatherPart  GatherAllReduce (src/collective/gather_allreduce.cpp): every input floor(N/2) hops
//               towards the successor and the rest towards the predecessor, forwarded as it lands
// A part names members by group rank (the frames' ends) and its own position on its ring; its frames'
// phase is `phase_base` plus its own phase (a composite's part << 16, as the library's).
// Thread: the engine's.
#ifndef PCCL_SIM_RING_PARTS_HPP_
#define PCCL_SIM_RING_PARTS_HPP_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "collective/partition.hpp"
#include "operation.hpp"

namespace pccl::sim {

// A ring's cut, the same on every member of it: its chunks in the ring's layout and the phase window.
struct RingCut {
  uint32_t world = 2;
  uint32_t first_phase = 0, end_phase = 0;
  size_t segment_elems = 1;
  size_t elem_bytes = 4;
  std::vector<collective::Span> chunks;
  size_t segmentsOf(uint32_t chunk) const { return collective::segmentCount(chunks[chunk].count, segment_elems); }
};
enum class RingKind { kAllReduce, kReduceScatter, kAllGather, kBroadcast };
// RingCollective's ringChunks and window: the all-reduce's chunk c is chunkOf(count, world, c); the
// others name blocks by owner, block b being chunk b + 1 (`blocks` empty: chunkOf); the broadcast's only
// non-empty chunk is root + 1, the whole buffer.
std::shared_ptr<const RingCut> ringCut(RingKind kind, size_t count, uint32_t world, size_t segment_elems,
                                       size_t elem_bytes, const std::vector<collective::Span>& blocks = {},
                                       uint32_t root = 0);

class RingPart {
 public:
  // `rank`: our position on the ring; `self`, `succ`: group ranks.
  RingPart(std::shared_ptr<const RingCut> cut, uint32_t rank, uint32_t self, uint32_t succ, uint32_t phase_base,
           uint64_t eager_bytes);
  void start(Ports& ports);
  void ready(Ports& ports);  // the successor's hello: held segments go out
  void delivered(Ports& ports, uint32_t phase, uint64_t segment);
  void sent() { ++sends_done_; }
  bool finished() const { return recv_done_ >= recv_expected_ && sends_done_ >= send_expected_; }
  uint32_t succ() const { return succ_; }

 private:
  void sendSegment(Ports& ports, uint32_t phase, uint64_t segment);

  std::shared_ptr<const RingCut> cut_;
  uint32_t rank_, self_, succ_, phase_base_;
  uint64_t eager_bytes_, eager_sent_ = 0;
  uint64_t recv_expected_ = 0, send_expected_ = 0, recv_done_ = 0, sends_done_ = 0;
  bool ready_ = false;
  std::vector<std::pair<uint32_t, uint64_t>> held_;  // (phase, segment) waiting for the hello
};

class GatherPart {
 public:
  // `world` members, we at `rank`; `self`, `succ`, `pred`: group ranks. `count` elements in segments of
  // `segment_elems` (the library's gatherSegmentElems).
  GatherPart(uint32_t world, uint32_t rank, uint32_t self, uint32_t succ, uint32_t pred, size_t count,
             size_t segment_elems, size_t elem_bytes, uint32_t phase_base);
  void start(Ports& ports);
  void delivered(Ports& ports, uint32_t origin, uint64_t segment);
  void sent() { ++sends_done_; }
  bool finished() const { return recv_done_ >= recv_expected_ && sends_done_ >= send_expected_; }

 private:
  void sendSlot(Ports& ports, uint32_t to, uint32_t origin, uint64_t segment);

  uint32_t world_, rank_, self_, succ_, pred_, phase_base_;
  size_t count_, segment_elems_, elem_bytes_;
  uint64_t segments_;
  uint32_t cw_, ccw_;
  uint64_t recv_expected_ = 0, send_expected_ = 0, recv_done_ = 0, sends_done_ = 0;
};

}  // namespace pccl::sim

#endif  // PCCL_SIM_RING_PARTS_HPP_
