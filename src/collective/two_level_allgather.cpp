#include "collective/two_level_allgather.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <utility>

namespace pccl::collective {

TwoLevelAllGather::TwoLevelAllGather(const RingOpSpec& base, const TwoLevelRing& ring, const StriperTo& striper_to,
                                     BufferPool* buffers, Finished finished)
    : CompositeOp(base, stripersTo(twoLevelPeers(ring, base.rank), striper_to), buffers, std::move(finished)),
      blocks_(twoLevelBlocks(ring.layout, base.count / base.world)),
      elem_(codec::dtypeSize(base.dtype)) {
  if (blocks_.identity) {
    sorted_ = base_.output;
  } else {
    scratch_ = buffers_->acquire(std::max<size_t>(blocks_.count(), 1) * elem_);
    sorted_ = scratch_.data.get();
  }
  const TwoLevelPart plan = twoLevelPart(ring, base_.rank, 0);
  const uint32_t m = plan.region_world, j = plan.region_rank, region = plan.region;
  const size_t pieces = ring.pieces();
  // Parts sending to one peer share the eager limit: at most all of ours do.
  sharing_ = m > 1 ? plan.regions : 0;
  for (size_t k = 0; k < pieces; ++k) sharing_ += ring.owner[k][region] == base_.rank ? 1 : 0;
  RingOpSpec all = base_;
  all.kind = wire::Collective::kAllGather;
  const RingOpSpec lan = lanLevel(all);  // zstd on the WAN level only (never quantized in two levels)
  if (m > 1) {
    RingOpSpec own = lan;
    own.world = m;
    own.rank = j;
    own.count = blocks_.data[region].count;
    own.output = sorted_ + blocks_.data[region].offset * elem_;
    own.blocks.clear();
    for (uint32_t b = 0; b < m; ++b) own.blocks.push_back(Span{b * blocks_.block, blocks_.block});
    addAllGather(0, kOwnRegion, own, plan.region_pred, plan.region_succ, striper_to);
  }
  for (size_t k = 0; k < pieces; ++k) {
    const auto& owners = ring.owner[k];
    if (owners[region] != base_.rank) continue;
    RingOpSpec wan = all;
    wan.world = plan.regions;
    wan.rank = region;
    wan.count = blocks_.count();
    wan.output = sorted_;
    wan.blocks = blocks_.pieceBlocks(ring, k);
    if (wan.blocks.empty()) continue;
    wan.input = sorted_ + wan.blocks[region].offset * elem_;
    addAllGather(static_cast<uint32_t>(2 + k), kPiece, wan, owners[(region + plan.regions - 1) % plan.regions],
                 owners[(region + 1) % plan.regions], striper_to);
  }
  for (uint32_t i = 0; m > 1 && i < plan.regions; ++i) {
    if (i == region) continue;
    RingOpSpec other = lan;
    other.world = m;
    other.rank = j;
    other.count = blocks_.data[i].count;
    other.output = sorted_ + blocks_.data[i].offset * elem_;
    other.blocks.clear();
    for (uint32_t b = 0; b < m; ++b) other.blocks.push_back(cutOf(other.count, m, b));
    other.input = other.output + other.blocks[j].offset * elem_;
    addAllGather(static_cast<uint32_t>(2 + pieces + i), kOtherRegion, other, plan.region_pred, plan.region_succ,
                 striper_to);
  }
  for (const Part& p : parts_) helloFrom(p.pred);
}

TwoLevelAllGather::~TwoLevelAllGather() { buffers_->release(std::move(scratch_)); }

void TwoLevelAllGather::addAllGather(uint32_t id, Kind kind, RingOpSpec spec, uint32_t pred, uint32_t succ,
                                     const StriperTo& striper_to) {
  spec.segment_elems = segmentElems(spec.count, spec.world, elem_, base_.desc.segment_bytes);
  spec.eager_bytes = wire::kEagerBytes / std::max<size_t>(sharing_, 1);
  ++left_[kind];
  addRing(id, 0, kind, std::move(spec), pred, succ, striper_to(succ));
}

void TwoLevelAllGather::start() {
  if (left_[kOwnRegion] > 0) {
    startKind(kOwnRegion);
  } else {
    // Alone in our region: our block goes to its place in the sorted layout, for the pieces to send.
    uint8_t* at = sorted_ + blocks_.sorted_at[base_.rank] * elem_;
    if (at != base_.input) std::memcpy(at, base_.input, blocks_.block * elem_);
    startKind(kPiece);
  }
  maybeFinish();
}

void TwoLevelAllGather::startKind(Kind kind) {
  if (left_[kind] == 0) {
    if (kind == kPiece) return startKind(kOtherRegion);
    if (kind == kOtherRegion) return copyOut();
    return;
  }
  for (Part& p : parts_) {
    if (p.kind == kind && !over()) startPart(p);
  }
}

void TwoLevelAllGather::partFinished(Part& p) {
  const Kind kind = static_cast<Kind>(p.kind);
  if (--left_[kind] > 0) return;
  if (kind == kOwnRegion) startKind(kPiece);
  else if (kind == kPiece) startKind(kOtherRegion);
  else copyOut();
}

void TwoLevelAllGather::copyOut() {
  if (copied_ || over()) return;
  copied_ = true;
  if (blocks_.identity) return;
  for (size_t r = 0; r < blocks_.sorted_at.size(); ++r) {
    std::memcpy(base_.output + r * blocks_.block * elem_, sorted_ + blocks_.sorted_at[r] * elem_,
                blocks_.block * elem_);
  }
}

}  // namespace pccl::collective
