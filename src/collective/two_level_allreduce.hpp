// The two-level all-reduce (docs/algorithms.md §12): a composite of rings, each a RingCollective.
//
//   part 0   reduce-scatter on our region's ring: the input's block b reduced over the region at the
//            region's member b, into `partial` (our block), full precision (sum for avg)
//   part 2+k for each piece k inside our block, an all-reduce on the piece's ring of R owners (one per
//            region, in region order) from `partial` into the output: the WAN level, quantized and
//            compressed as the call asks, avg divided by the group's size there
//   part 1   all-gather on our region's ring: every member's finished block to every member
//
// A part starts when what it reads is final (part 0 at once, the pieces when part 0 finished, part 1
// when every piece finished); frames of a part that has not started are placed where they belong and
// delivered when it starts. Frames carry phase = part << 16 | the part's own phase; a frame of a part
// is accepted only from that part's ring predecessor. Each part's sends to one peer before that peer's
// hello share the eager limit. Every element's value is computed once — its region's partial by the
// block's owner, the sum over regions by the piece ring's owner — and then copied: every peer ends
// with the same bits.
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
inline constexpr uint32_t kPartReduceScatter = 0;
inline constexpr uint32_t kPartAllGather = 1;
inline constexpr uint32_t kPartFirstPiece = 2;

class TwoLevelAllReduce : public RingOp {
 public:
  using StriperTo = std::function<std::shared_ptr<Striper>(uint32_t group_rank)>;

  // `base`: the call as the flat ring would run it (op id, seq, descriptor, buffers, dtype, op, quant,
  // compress, compressor, rank and world in the group); `part`: our share (two_level_plan.hpp).
  // Host buffers only. Scratch comes from `buffers`.
  TwoLevelAllReduce(const RingOpSpec& base, TwoLevelPart part, const StriperTo& striper_to, BufferPool* buffers,
                    Finished finished);

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
  struct Part {
    uint32_t id = 0;
    uint32_t pred = 0, succ = 0;  // group ranks on its ring
    std::shared_ptr<RingCollective> ring;
    bool started = false, finished = false, ready = false;
    std::vector<std::pair<wire::DataHeader, uint32_t>> deferred;  // delivered before it started
    BufferPool::Buffer wire;
  };
  Part* find(uint32_t id);
  void addPart(uint32_t id, RingOpSpec spec, uint32_t pred, uint32_t succ, const StriperTo& striper_to);
  void startPart(Part& p);
  void partFinished(uint32_t id, const Status& s);
  static wire::DataHeader local(const wire::DataHeader& h);

  RingOpSpec base_;
  TwoLevelPart plan_;
  BufferPool* buffers_;
  size_t elem_;
  BufferPool::Buffer partial_;  // our block, reduced over our region
  BufferPool::Buffer scratch_;  // the reduce-scatter's blocks passing through
  std::vector<Part> parts_;
  size_t pieces_left_ = 0;
};

}  // namespace pccl::collective

#endif  // PCCL_COLLECTIVE_TWO_LEVEL_ALLREDUCE_HPP_
