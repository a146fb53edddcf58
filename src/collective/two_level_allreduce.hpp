// The two-level all-reduce (docs/algorithms.md §12): a composite of rings (composite_op.hpp), each a
// RingCollective, in waves (two_level_waves.hpp); in each wave:
//
//   reduce-scatter  on our region's ring: the wave's block b reduced over the region at the region's
//                   member b, into `partial` (our block), full precision (sum for avg)
//   pieces          for each piece k inside our block, an all-reduce on the piece's ring of R owners
//                   (one per region, in region order) from `partial` into the output: the WAN level,
//                   quantized and compressed as the call asks, avg divided by the group's size there
//   all-gather      on our region's ring: every member's finished block to every member
//
// The reduce-scatter is the waves' first LAN part, the all-gather the second. A frame of a part is
// accepted only from that part's ring predecessor. Each part's sends to one peer before that peer's
// hello share the eager limit. Every element's value is computed once — its region's partial by
// the block's owner, the sum over regions by the piece ring's owner — and then copied: every peer ends
// with the same bits.
// Thread: the communicator's io thread.
#ifndef PCCL_COLLECTIVE_TWO_LEVEL_ALLREDUCE_HPP_
#define PCCL_COLLECTIVE_TWO_LEVEL_ALLREDUCE_HPP_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "collective/two_level_waves.hpp"

namespace pccl::collective {

class TwoLevelAllReduce : public TwoLevelWaves {
 public:
  // `base`: the call as the flat ring would run it (op id, seq, descriptor, buffers, dtype, op, quant,
  // compress, compressor, rank and world in the group). Host buffers only. `call`: our part of it
  // (twoLevelCall of `ring`); `striper_to` has a striper to each of call.receivers(). Scratch comes from
  // `buffers`.
  TwoLevelAllReduce(const RingOpSpec& base, const TwoLevelRing& ring, TwoLevelCall call, const StriperTo& striper_to,
                    BufferPool* buffers, Finished finished);

 private:
  void addWave(uint32_t wave, const StriperTo& striper_to);
  // `partial`: a piece of a region of several reads the wave's partial, this many elements in.
  void addWavePart(uint32_t id, uint32_t wave, Kind kind, RingOpSpec spec, uint32_t pred, uint32_t succ,
                   const StriperTo& striper_to, std::optional<size_t> partial = std::nullopt);
  uint8_t* partialOf(uint32_t wave);
  uint8_t* scratchOf(uint32_t wave);

  TwoLevelCall call_;
  size_t elem_;
  // Per wave, our block reduced over our region (read by the wave's pieces until they end): one
  // buffer (own()), wave w's from partial_at_[w], taken when a part first needs it.
  uint8_t* partials_ = nullptr;
  std::vector<size_t> partial_at_;
  // The reduce-scatters' blocks passing through, wave w in the half w % 2 of one buffer: wave w + 2's
  // frames cannot come before wave w's reduce-scatter ended (they need ours of wave w + 1, sent only
  // after it).
  uint8_t* scratches_ = nullptr;
};

}  // namespace pccl::collective

#endif  // PCCL_COLLECTIVE_TWO_LEVEL_ALLREDUCE_HPP_
