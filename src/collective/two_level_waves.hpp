// What the two-level collectives in waves share (docs/algorithms.md §12, §12b, §12c): the call cut
// into waves, and in each wave three kinds of parts:
//   first LAN    the region's first level (the all-reduce's reduce-scatter, the broadcast's root-region
//                broadcast, the all-gather's own-region all-gather, the reduce-scatter's region-level
//                reduce-scatters)
//   pieces       one part per piece of our block on the piece's ring across regions (WAN)
//   second LAN   the region's last level (the all-gathers of the all-reduce, broadcast and all-gather)
// A member may lack any kind. Wave w's first LAN parts start when wave w-1's have all ended (wave 0's at
// the call), its pieces when its first LAN parts have all ended (at the call for a member without any),
// its second LAN parts when all its pieces have ended: the slow WAN level of one wave overlaps the LAN
// level of the next one and of the previous one.
// Part ids: wave x slots + a slot: 0 and 1 (the all-reduce's and broadcast's LAN parts), 2 + k (piece
// k), 2 + pieces + i (a LAN part about region i's data: the all-gather's and reduce-scatter's).
// Thread: the communicator's io thread.
#ifndef PCCL_COLLECTIVE_TWO_LEVEL_WAVES_HPP_
#define PCCL_COLLECTIVE_TWO_LEVEL_WAVES_HPP_

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "collective/composite_op.hpp"
#include "collective/two_level_plan.hpp"

namespace pccl::collective {

class TwoLevelWaves : public CompositeOp {
 public:
  void start() override;

 protected:
  enum Kind : int { kFirstLan = 0, kSecondLan = 1, kPiece = 2 };
  // `waves` waves of `slots` part ids each; `pieces`: the ring's.
  TwoLevelWaves(const RingOpSpec& base, std::vector<std::shared_ptr<Striper>> stripers, BufferPool* buffers,
                Finished finished, uint32_t waves, size_t pieces, uint32_t slots);

  uint32_t partId(uint32_t wave, uint32_t slot) const { return wave * slots_ + slot; }
  uint32_t pieceSlot(uint32_t piece) const { return 2 + piece; }
  uint32_t regionSlot(uint32_t region) const { return static_cast<uint32_t>(2 + pieces_ + region); }
  // A part that is one RingCollective of `spec` in `wave` (kind and phase base set here; before its
  // successor's hello it sends at most its share of the eager limit among our parts sending there).
  void addWaveRing(uint32_t wave, Kind kind, uint32_t slot, RingOpSpec spec, uint32_t pred, uint32_t succ,
                   const StriperTo& striper_to);
  // Hooks: every part of the wave's first LAN level has ended; every part of the wave has ended.
  virtual void firstLanDone(uint32_t /*wave*/) {}
  virtual void waveDone(uint32_t /*wave*/) {}

  uint32_t waves_;
  size_t pieces_;  // the ring's

 private:
  void partFinished(Part& p) override;
  void startKind(uint32_t wave, Kind kind);
  void startPieces(uint32_t wave);  // and then the second LAN parts, once they are done
  uint32_t slots_;
  // Per wave and kind: parts not finished (counted at start, from parts_).
  std::vector<std::array<size_t, 3>> left_;
};

}  // namespace pccl::collective

#endif  // PCCL_COLLECTIVE_TWO_LEVEL_WAVES_HPP_
