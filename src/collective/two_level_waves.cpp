#include "collective/two_level_waves.hpp"

#include <utility>

namespace pccl::collective {

TwoLevelWaves::TwoLevelWaves(const RingOpSpec& base, std::vector<std::shared_ptr<Striper>> stripers,
                             BufferPool* buffers, Finished finished, uint32_t waves, size_t pieces, uint32_t slots)
    : CompositeOp(base, std::move(stripers), buffers, std::move(finished)),
      waves_(waves),
      pieces_(pieces),
      slots_(slots),
      left_(waves, std::array<size_t, 3>{0, 0, 0}) {}

void TwoLevelWaves::addWaveRing(uint32_t wave, Kind kind, uint32_t slot, RingOpSpec spec, uint32_t pred,
                                uint32_t succ, const StriperTo& striper_to) {
  addRing(partId(wave, slot), wave, kind, std::move(spec), pred, succ, striper_to(succ));
}

void TwoLevelWaves::start() {
  for (const Part& p : parts_) ++left_[p.group][p.kind];
  for (uint32_t w = 0; w < waves_; ++w) {
    if (left_[w][kFirstLan] + left_[w][kPiece] + left_[w][kSecondLan] == 0) waveDone(w);  // nothing of ours
  }
  if (waves_ > 0 && left_[0][kFirstLan] > 0) {
    startKind(0, kFirstLan);  // the waves' pieces follow their first parts
  } else {
    for (uint32_t w = 0; w < waves_ && !over(); ++w) startPieces(w);
  }
  maybeFinish();
}

void TwoLevelWaves::startKind(uint32_t wave, Kind kind) {
  for (Part& q : parts_) {
    if (q.group == wave && q.kind == kind && !over()) startPart(q);
  }
}

void TwoLevelWaves::startPieces(uint32_t wave) {
  startKind(wave, kPiece);
  // Our block of the wave is final once every piece of it is (at once when the wave leaves it empty).
  if (left_[wave][kPiece] == 0 && !over()) startKind(wave, kSecondLan);
}

void TwoLevelWaves::partFinished(Part& p) {
  const uint32_t wave = p.group;
  auto& left = left_[wave];
  --left[p.kind];
  switch (p.kind) {
    case kFirstLan:
      if (left[kFirstLan] > 0) break;
      firstLanDone(wave);
      // The LAN is free for the next wave's first parts; this wave goes on across regions.
      if (wave + 1 < waves_) startKind(wave + 1, kFirstLan);
      startPieces(wave);
      break;
    case kPiece:
      if (left[kPiece] == 0 && !over()) startKind(wave, kSecondLan);
      break;
    default:
      break;
  }
  if (left[kFirstLan] + left[kPiece] + left[kSecondLan] == 0 && !over()) waveDone(wave);
}

}  // namespace pccl::collective
