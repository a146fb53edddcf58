// The two-level all-reduce (docs/algorithms.md §12): a composite of rings, each a RingCollective.
// The call is cut into waves (two_level_plan.hpp); in each wave:
//
//   reduce-scatter  on our region's ring: the wave's block b reduced over the region at the region's
//                   member b, into `partial` (our block), full precision (sum for avg)
//   pieces          for each piece k inside our block, an all-reduce on the piece's ring of R owners
//                   (one per region, in region order) from `partial` into the output: the WAN level,
//                   quantized and compressed as the call asks, avg divided by the group's size there
//   all-gather      on our region's ring: every member's finished block to every member
//
// A part starts when what it reads is final and the LAN is free for it: wave w's reduce-scatter when
// wave w-1's finished (wave 0's at once), its pieces when its reduce-scatter finished, its all-gather
// when all its pieces finished. So the WAN level of one wave overlaps the LAN level of the next.
// Frames of a part that has not started are placed where they belong and delivered when it starts.
// Frames carry phase = part << 16 | the part's own phase, part = wave x (pieces + 2) + 0 (reduce-
// scatter), 1 (all-gather) or 2 + k (piece k); a frame of a part is accepted only from that part's ring
// predecessor. Each part's sends to one peer before that peer's hello share the eager limit. Every
// element's value is computed once — its region's partial by the block's owner, the sum over regions
// by the piece ring's owner — and then copied: every peer ends with the same bits.
// Thread: the communicator's io thread.
#ifndef PCCL_COLLECTIVE_TWO_LEVEL_ALLREDUCE_HPP_
#define PCCL_COLLECTIVE_TWO_LEVEL_ALLREDUCE_HPP_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "collective/buffer_pool.hpp"
#include "collective/ring_collective.hpp"
#include "collective/two_level_plan.hpp"

namespace pccl::collective {

inline constexpr uint32_t kPartShift = 16;

class TwoLevelAllReduce : public RingOp {
 public:
  using StriperTo = std::function<std::shared_ptr<Striper>(uint32_t group_rank)>;

  // `base`: the call as the flat ring would run it (op id, seq, descriptor, buffers, dtype, op, quant,
  // compress, compressor, rank and world in the group). Host buffers only. Scratch comes from `buffers`.
  TwoLevelAllReduce(const RingOpSpec& base, const TwoLevelRing& ring, const StriperTo& striper_to,
                    BufferPool* buffers, Finished finished);
  ~TwoLevelAllReduce() override;

  void start() override;
  void successorReady() override;  // the flat ring's successor: readyFrom(its rank)
  void readyFrom(uint32_t rank) override;
  Result<uint8_t*> placement(const wire::DataHeader& h, uint32_t bytes) override;
  Result<uint8_t*> placementFrom(uint32_t from, const wire::DataHeader& h, uint32_t bytes) override;
  Status delivered(const wire::DataHeader& h, uint32_t bytes) override;
  void whenQuiet(std::function<void()> quiet) override;
  size_t sendsInFlight() const override;  // every part's
  uint64_t bytesSent() const override;
  uint64_t bytesReceived() const override;

 protected:
  bool complete() const override;
  void stopWork() override;

 private:
  enum class Kind { kReduceScatter, kAllGather, kPiece };
  struct Part {
    uint32_t id = 0;
    uint32_t wave = 0;
    Kind kind = Kind::kPiece;
    uint32_t pred = 0, succ = 0;  // group ranks on its ring
    // Made when first needed (ensure()): its scratch is taken then, so a call does not touch all of it
    // at once on the io thread. A piece reading the wave's partial reads it from partial_offset.
    RingOpSpec spec;
    std::shared_ptr<Striper> striper;
    bool from_partial = false;
    size_t partial_offset = 0;  // elements into the wave's partial
    std::shared_ptr<RingCollective> ring;
    bool started = false, finished = false, ready = false;
    std::vector<std::pair<wire::DataHeader, uint32_t>> deferred;  // delivered before it started
    BufferPool::Buffer wire;
  };
  Part* find(uint32_t id);
  Part* find(uint32_t wave, Kind kind);
  void addWave(uint32_t wave, const StriperTo& striper_to);
  void addPart(uint32_t id, uint32_t wave, Kind kind, RingOpSpec spec, uint32_t pred, uint32_t succ,
               const StriperTo& striper_to);
  void ensure(Part& p);  // its buffers and its ring
  uint8_t* partialOf(uint32_t wave);
  uint8_t* scratchOf(uint32_t wave);
  void startPart(Part& p);
  void startPieces(uint32_t wave);  // and then the all-gather, once they are done
  void partFinished(uint32_t id, const Status& s);
  static wire::DataHeader local(const wire::DataHeader& h);

  RingOpSpec base_;
  TwoLevelCall call_;
  size_t pieces_ = 0;  // the ring's pieces: part ids are wave x (pieces_ + 2) + ...
  BufferPool* buffers_;
  size_t elem_;
  // Per wave, our block reduced over our region (read by the wave's pieces until they end).
  std::vector<BufferPool::Buffer> partials_;
  // The reduce-scatters' blocks passing through, wave w in scratches_[w % 2]: wave w + 2's frames
  // cannot come before wave w's reduce-scatter ended (they need ours of wave w + 1, sent only after it).
  BufferPool::Buffer scratches_[2];
  std::vector<size_t> pieces_left_;  // per wave
  std::vector<Part> parts_;
};

}  // namespace pccl::collective

#endif  // PCCL_COLLECTIVE_TWO_LEVEL_ALLREDUCE_HPP_
