#include "collective/two_level_reduce_scatter.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <utility>

namespace pccl::collective {

TwoLevelReduceScatter::TwoLevelReduceScatter(const RingOpSpec& base, const TwoLevelRing& ring,
                                             const StriperTo& striper_to, BufferPool* buffers, Finished finished)
    : TwoLevelLayoutOp(base, ring, striper_to, buffers, std::move(finished)) {
  if (identity()) {
    sorted_ = base_.input;
  } else {
    sorted_in_ = own(all_.count() * elem_);
    sorted_ = sorted_in_;
  }
  const uint32_t m = plan_.region_world, j = plan_.region_rank, region = plan_.region;
  RingOpSpec rs = base_;
  rs.kind = wire::Collective::kReduceScatter;
  for (uint32_t w = 0; w < waves_; ++w) {
    const TwoLevelBlocks wave = waveBlocks(w);
    for (uint32_t i = 0; m > 1 && i < plan_.regions; ++i) {
      const RingOpSpec lan = regionSpec(lanLevel(rs), wave, i);
      const size_t d = wave.data[i].offset;
      addLevel(w, kFirstLan, regionSlot(i), lan, At{d, d, d + lan.blocks[j].offset}, plan_.region_pred,
              plan_.region_succ, striper_to);
    }
    RingOpSpec wan = rs;
    wan.avg_divisor = base_.world;
    const Span mine = wave.fraction(region, m, j);  // our sub-block, in the wave
    forOwnedPieces(ring, wan, wave, [&](uint32_t k, RingOpSpec spec, uint32_t pred, uint32_t succ) {
      const At at{0, 0, sub(w).offset + spec.blocks[region].offset - mine.offset};
      addLevel(w, kPiece, pieceSlot(k), std::move(spec), at, pred, succ, striper_to);
    });
  }
  for (const Part& p : parts_) helloFrom(p.pred);
}

// One buffer of the layout's size each, taken when a part first needs it; wave w's share from its
// offset.
uint8_t* TwoLevelReduceScatter::partialsOf(uint32_t w) {
  if (partials_ == nullptr) partials_ = own(all_.count() * elem_);
  return partials_ + waveOffset(w) * elem_;
}

uint8_t* TwoLevelReduceScatter::scratchOf(uint32_t w) {
  if (scratch_ == nullptr) scratch_ = own(all_.count() * elem_);
  return scratch_ + waveOffset(w) * elem_;
}

void TwoLevelReduceScatter::addLevel(uint32_t wave, Kind kind, uint32_t slot, RingOpSpec spec, At at, uint32_t pred,
                                    uint32_t succ, const StriperTo& striper_to) {
  spec.phase_base = partId(wave, slot) << kPartShift;
  auto striper = striper_to(succ);
  const size_t wire_at = reserveWire(spec);
  CompositeOp::addPart(partId(wave, slot), wave, kind, pred, succ,
                       [this, spec = std::move(spec), at, striper, wire_at](Part& p) {
    RingOpSpec s = spec;
    const uint32_t w = p.group;
    const bool alone = plan_.region_world == 1;  // the pieces read our input: nothing was reduced before
    s.eager_bytes = std::min(s.eager_bytes, eagerShareTo(p.succ));
    s.scratch = scratchOf(w) + at.scratch * elem_;
    if (p.kind == kFirstLan) {
      s.input = sorted_ + (waveOffset(w) + at.input) * elem_;
      s.output = partialsOf(w) + at.output * elem_;
    } else {
      s.input = alone ? sorted_ + waveOffset(w) * elem_ : partialsOf(w);
      s.output = base_.output + at.output * elem_;
    }
    s.wire = wireAt(wire_at);
    return std::make_shared<RingCollective>(s, striper, partDone(p.id));
  });
}

void TwoLevelReduceScatter::start() {
  if (sorted_in_ != nullptr) {
    for (uint32_t w = 0; w < waves_; ++w) {
      const TwoLevelBlocks wave = waveBlocks(w);
      const Span s = sub(w);
      uint8_t* at = sorted_in_ + waveOffset(w) * elem_;
      for (size_t r = 0; r < wave.sorted_at.size(); ++r) {
        std::memcpy(at + wave.sorted_at[r] * elem_, base_.input + (r * all_.block + s.offset) * elem_,
                    s.count * elem_);
      }
    }
  }
  TwoLevelWaves::start();
}

}  // namespace pccl::collective
