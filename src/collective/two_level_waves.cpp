#include "collective/two_level_waves.hpp"

#include <algorithm>
#include <utility>

#include "collective/two_level_rules.hpp"

namespace pccl::collective {

TwoLevelWaves::TwoLevelWaves(const RingOpSpec& base, const TwoLevelRing& ring, TwoLevelCall call,
                             const StriperTo& striper_to, BufferPool* buffers, Finished finished)
    : CompositeOp(base, stripersTo(call.receivers(), striper_to), buffers, std::move(finished)),
      call_(std::move(call)),
      pieces_(ring.pieces()),
      pieces_left_(call_.waves.size(), 0) {}

uint64_t TwoLevelWaves::eagerShare(uint32_t succ, uint32_t lan_parts) const {
  return twoLevelEagerShare(call_, succ, lan_parts, wire::kEagerBytes);
}

void TwoLevelWaves::start() {
  if (Part* first = find(0, kFirstLan)) {
    startPart(*first);  // the waves' pieces follow their first parts
  } else {
    for (uint32_t w = 0; w < call_.waves.size() && !over(); ++w) startPieces(w);
  }
  maybeFinish();
}

void TwoLevelWaves::startPieces(uint32_t wave) {
  for (Part& q : parts_) {
    if (q.group == wave && q.kind == kPiece && !over()) startPart(q);
  }
  // Our block of the wave is final once every piece of it is (at once when the wave leaves it empty).
  if (pieces_left_[wave] == 0 && !over()) {
    if (Part* second = find(wave, kSecondLan)) startPart(*second);
  }
}

void TwoLevelWaves::partFinished(Part& p) {
  const uint32_t wave = p.group;
  switch (p.kind) {
    case kFirstLan:
      // The LAN is free for the next wave's first part; this wave goes on across regions.
      if (Part* next = find(wave + 1, kFirstLan)) startPart(*next);
      startPieces(wave);
      break;
    case kPiece:
      if (--pieces_left_[wave] == 0 && !over()) {
        if (Part* second = find(wave, kSecondLan)) startPart(*second);
      }
      break;
    default:
      break;
  }
}

}  // namespace pccl::collective
