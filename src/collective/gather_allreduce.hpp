// One small all-reduce on the ring by gathering: every peer's input travels half the ring one way and
// half the other, so after ceil((N-1)/2) hops every peer holds all N inputs, and each peer reduces
// them itself in rank order (x0 op x1 op ... op x(N-1), avg dividing on the last). Every peer runs the
// same code on the same bytes in the same order: identical bits everywhere, as on the ring.
//
//   input of rank o     sent in segments to the successor (and to the predecessor when N > 2)
//   frame of rank o     arrives from the predecessor (o at distance d <= cw = floor(N/2) behind us)
//                       or the successor (o at distance e <= ccw = N-1-cw ahead); forwarded on,
//                       as it came, while d < cw (resp. e < ccw)
//   segment s           reduced once all N-1 others' segment s are in
//
// A peer sends (N-1) times its input instead of the ring's 2(N-1)/N, but the last byte arrives after
// ceil((N-1)/2) one-way delays instead of 2(N-1): Collectives chooses it for small operations only
// (docs/algorithms.md §1), and only when everything a peer can receive before it makes the call fits
// the eager limit (wire::kEagerBytes), so no segment waits for a hello.
//
// Coded operations: a peer encodes its input once (quantization, then zstd when smaller), the bytes go
// round unchanged, and every peer decodes all N, its own included. Integer avg is reduced in exact
// partial sums (codec/partial_sum.hpp) and divided once. Device buffers are staged through host memory
// by Collectives (this class sees host memory only).
// Frame header: phase = the input's rank (plus spec.phase_base), offset = the segment's first element
// within the input. In a two-level call (two_level_gather.hpp) it runs on a region's ring or on the
// regions' leaders' ring, avg dividing by spec.divisor().
// Thread: the communicator's io thread.
#ifndef PCCL_COLLECTIVE_GATHER_ALLREDUCE_HPP_
#define PCCL_COLLECTIVE_GATHER_ALLREDUCE_HPP_

#include <cstdint>
#include <memory>
#include <vector>

#include "collective/ring_collective.hpp"
#include "collective/ring_op.hpp"

namespace pccl::collective {

// Elements per segment of a gathered input (the same rule as one ring chunk: segmentElems over 1 rank),
// at least `floor_bytes` (partition.hpp): kWanSegmentFloorBytes where the gather's ring spans hosts, so
// that an input goes out as several frames that each fit a connection's restarted congestion window.
size_t gatherSegmentElems(const RingOpSpec& spec, size_t floor_bytes);
// The floor of a gather's segments on a ring whose members are all on one host (`one_host`) or not.
size_t gatherSegmentFloor(bool one_host);
// Bytes of the region `spec.wire` must point to: every rank's segments as they travel.
size_t gatherRegionBytes(const RingOpSpec& spec);

class GatherAllReduce : public RingOp {
 public:
  // `spec.segment_elems` must be gatherSegmentElems(spec, floor); `spec.wire` gatherRegionBytes(spec) bytes;
  // `spec.device` must be null. `predecessor` stripes our frames to the predecessor. A null
  // `spec.output` only gathers and forwards: nothing is reduced (a two-level gather's region members
  // other than the leader, who alone uses the region's sum).
  GatherAllReduce(const RingOpSpec& spec, std::shared_ptr<Striper> successor, std::shared_ptr<Striper> predecessor,
                  Finished finished);

  void start() override;
  Result<uint8_t*> placement(const wire::DataHeader& h, uint32_t bytes) override;
  void withdraw(uint32_t from, const wire::DataHeader& h) override;
  Status delivered(const wire::DataHeader& h, uint32_t bytes) override;

 protected:
  bool complete() const override { return recv_done_ >= recv_expected_ && sendsDone() >= send_expected_; }

 private:
  bool coded() const { return spec_.quant != codec::Quant::kNone || spec_.compress > 0; }
  Span segment(size_t s) const { return segmentOf(spec_.count, spec_.segment_elems, s); }
  size_t index(uint32_t origin, size_t s) const { return origin * segments_ + s; }
  uint8_t* slot(uint32_t origin, size_t s) const;            // where rank origin's segment s is kept
  const uint8_t* bytesOf(uint32_t origin, size_t s) const;   // what is sent of it (our own: the input)
  size_t rawBytes(size_t s) const;  // wire bytes of segment s before zstd
  void sendSlot(Striper& to, uint32_t origin, size_t s);
  void forward(uint32_t origin, size_t s);
  Result<const uint8_t*> elements(uint32_t origin, size_t s);  // decompressed and validated
  Status reduceSegment(size_t s);

  RingOpSpec spec_;
  std::shared_ptr<Striper> successor_, predecessor_;
  size_t elem_ = 1;
  size_t segments_ = 0;  // per input
  uint32_t cw_ = 0, ccw_ = 0;  // hops an input travels to the successor's side and to the predecessor's
  size_t slot_cap_ = 0;        // coded: bytes per slot
  std::vector<uint32_t> slot_len_, slot_flags_;  // coded: what each slot holds
  std::vector<uint8_t> received_;  // per (origin, segment)
  std::vector<uint32_t> arrived_;  // per segment: inputs in
  size_t recv_expected_ = 0, recv_done_ = 0, send_expected_ = 0;
  std::vector<uint8_t> raw_, decoded_, partials_;  // scratch of one segment
};

}  // namespace pccl::collective

#endif  // PCCL_COLLECTIVE_GATHER_ALLREDUCE_HPP_
