#include "collective/two_level_allgather.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

namespace pccl::collective {

TwoLevelAllGather::TwoLevelAllGather(const RingOpSpec& base, const TwoLevelRing& ring, const StriperTo& striper_to,
                                     BufferPool* buffers, Finished finished)
    : TwoLevelLayoutOp(base, ring, striper_to, buffers, std::move(finished)) {
  if (identity()) {
    sorted_ = base_.output;
  } else {
    sorted_ = own(all_.count() * elem_);
  }
  const uint32_t m = plan_.region_world, j = plan_.region_rank, region = plan_.region;
  RingOpSpec all = base_;
  all.kind = wire::Collective::kAllGather;
  const RingOpSpec lan = lanLevel(all);  // zstd on the WAN level only (never quantized in two levels)
  for (uint32_t w = 0; w < waves_; ++w) {
    const TwoLevelBlocks wave = waveBlocks(w);
    uint8_t* at = sorted_ + waveOffset(w) * elem_;
    if (m > 1) {
      RingOpSpec own = regionSpec(lan, wave, region);  // its fractions are the members' sub-blocks
      own.input = base_.input + sub(w).offset * elem_;
      own.output = at + wave.data[region].offset * elem_;
      addWaveRing(w, kFirstLan, regionSlot(region), own, plan_.region_pred, plan_.region_succ, striper_to);
    }
    forOwnedPieces(ring, all, wave, [&](uint32_t k, RingOpSpec wan, uint32_t pred, uint32_t succ) {
      wan.output = at;
      wan.input = at + wan.blocks[region].offset * elem_;
      addWaveRing(w, kPiece, pieceSlot(k), std::move(wan), pred, succ, striper_to);
    });
    for (uint32_t i = 0; m > 1 && i < plan_.regions; ++i) {
      if (i == region) continue;
      RingOpSpec other = regionSpec(lan, wave, i);
      other.output = at + wave.data[i].offset * elem_;
      other.input = other.output + other.blocks[j].offset * elem_;
      addWaveRing(w, kSecondLan, regionSlot(i), other, plan_.region_pred, plan_.region_succ, striper_to);
    }
  }
  for (const Part& p : parts_) helloFrom(p.pred);
}

void TwoLevelAllGather::start() {
  if (plan_.region_world == 1) {
    // Alone in our region: our sub-blocks go to their places in the layout, for the pieces to send.
    for (uint32_t w = 0; w < waves_; ++w) {
      uint8_t* at = sorted_ + (waveOffset(w) + waveBlocks(w).sorted_at[base_.rank]) * elem_;
      const uint8_t* from = base_.input + sub(w).offset * elem_;
      if (at != from) std::memcpy(at, from, sub(w).count * elem_);
    }
  }
  TwoLevelWaves::start();
}

void TwoLevelAllGather::waveDone(uint32_t w) {
  if (identity() || over()) return;
  const TwoLevelBlocks wave = waveBlocks(w);
  const Span s = sub(w);
  const uint8_t* at = sorted_ + waveOffset(w) * elem_;
  for (size_t r = 0; r < wave.sorted_at.size(); ++r) {
    std::memcpy(base_.output + (r * all_.block + s.offset) * elem_, at + wave.sorted_at[r] * elem_, s.count * elem_);
  }
}

}  // namespace pccl::collective
