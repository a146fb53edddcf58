// What the two-level all-reduce and broadcast share (docs/algorithms.md §12, §12b): the call cut into
// waves (two_level_plan.hpp), and in each wave a first LAN part (the region's reduce-scatter, or the
// root region's broadcast), one part per piece of our block on the piece's ring across regions, and a
// second LAN part (the region's all-gather). A member may lack either LAN part. Wave w's first part
// starts when wave w-1's has ended (wave 0's at the call), its pieces when its first part has ended (at
// the call for a member without one), its second part when all its pieces have ended: so the slow WAN
// level of one wave overlaps the LAN level of the next one and of the previous one.
// Part ids: wave x (pieces + 2) + 0 (first), 1 (second) or 2 + k (piece k).
// Thread: the communicator's io thread.
#ifndef PCCL_COLLECTIVE_TWO_LEVEL_WAVES_HPP_
#define PCCL_COLLECTIVE_TWO_LEVEL_WAVES_HPP_

#include <cstdint>
#include <vector>

#include "collective/composite_op.hpp"
#include "collective/two_level_plan.hpp"

namespace pccl::collective {

class TwoLevelWaves : public CompositeOp {
 public:
  void start() override;

 protected:
  enum Kind : int { kFirstLan = 0, kSecondLan = 1, kPiece = 2 };
  // `call`: our part (twoLevelCall of `ring`); `striper_to` has a striper to each of call.receivers().
  TwoLevelWaves(const RingOpSpec& base, const TwoLevelRing& ring, TwoLevelCall call, const StriperTo& striper_to,
                BufferPool* buffers, Finished finished);

  uint32_t partId(uint32_t wave, Kind kind, uint32_t piece = 0) const {
    return wave * static_cast<uint32_t>(pieces_ + 2) + static_cast<uint32_t>(kind) + piece;
  }
  // A part sending to `succ` before its hello gets the eager limit shared by all our parts sending
  // there: `lan_parts` per wave to our region successor, and the pieces.
  uint64_t eagerShare(uint32_t succ, uint32_t lan_parts) const;
  void countPiece(uint32_t wave) { ++pieces_left_[wave]; }  // a piece part of the wave was added
  void partFinished(Part& p) override;

  TwoLevelCall call_;
  size_t pieces_ = 0;  // the ring's pieces

 private:
  void startPieces(uint32_t wave);  // and then the second LAN part, once they are done
  std::vector<size_t> pieces_left_;  // per wave
};

}  // namespace pccl::collective

#endif  // PCCL_COLLECTIVE_TWO_LEVEL_WAVES_HPP_
