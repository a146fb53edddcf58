#include "collective/two_level_reduce_scatter.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <utility>

namespace pccl::collective {

TwoLevelReduceScatter::TwoLevelReduceScatter(const RingOpSpec& base, const TwoLevelRing& ring,
                                             const StriperTo& striper_to, BufferPool* buffers, Finished finished)
    : CompositeOp(base, stripersTo(twoLevelPeers(ring, base.rank), striper_to), buffers, std::move(finished)),
      blocks_(twoLevelBlocks(ring.layout, base.count / base.world)),
      elem_(codec::dtypeSize(base.dtype)) {
  const size_t all = std::max<size_t>(blocks_.count(), 1) * elem_;
  if (blocks_.identity) {
    sorted_ = base_.input;
  } else {
    sorted_in_ = buffers_->acquire(all);
    sorted_ = sorted_in_.data.get();
  }
  scratch_ = buffers_->acquire(all);
  const TwoLevelPart plan = twoLevelPart(ring, base_.rank, 0);
  const uint32_t m = plan.region_world, j = plan.region_rank, region = plan.region;
  const size_t pieces = ring.pieces();
  sharing_ = m > 1 ? plan.regions : 0;
  for (size_t k = 0; k < pieces; ++k) sharing_ += ring.owner[k][region] == base_.rank ? 1 : 0;
  RingOpSpec rs = base_;
  rs.kind = wire::Collective::kReduceScatter;
  const uint8_t* reduced = sorted_;  // what the pieces read: the region's partials, or our input alone
  if (m > 1) {
    partials_ = buffers_->acquire(all);
    reduced = partials_.data.get();
    for (uint32_t i = 0; i < plan.regions; ++i) {
      RingOpSpec lan = lanLevel(rs);
      lan.world = m;
      lan.rank = j;
      lan.count = blocks_.data[i].count;
      lan.input = sorted_ + blocks_.data[i].offset * elem_;
      lan.scratch = scratch_.data.get() + blocks_.data[i].offset * elem_;
      lan.blocks.clear();
      for (uint32_t b = 0; b < m; ++b) lan.blocks.push_back(cutOf(lan.count, m, b));
      lan.output = partials_.data.get() + (blocks_.data[i].offset + lan.blocks[j].offset) * elem_;
      addReduceScatter(static_cast<uint32_t>(2 + pieces + i), kRegion, lan, plan.region_pred, plan.region_succ,
                       striper_to);
    }
  }
  const Span mine = blocks_.fraction(region, m, j);  // our block, in the sorted layout
  for (size_t k = 0; k < pieces; ++k) {
    const auto& owners = ring.owner[k];
    if (owners[region] != base_.rank) continue;
    RingOpSpec wan = rs;
    wan.world = plan.regions;
    wan.rank = region;
    wan.count = blocks_.count();
    wan.input = reduced;
    wan.scratch = scratch_.data.get();
    wan.avg_divisor = base_.world;
    wan.blocks = blocks_.pieceBlocks(ring, k);
    if (wan.blocks.empty()) continue;
    wan.output = base_.output + (wan.blocks[region].offset - mine.offset) * elem_;
    addReduceScatter(static_cast<uint32_t>(2 + k), kPiece, wan, owners[(region + plan.regions - 1) % plan.regions],
                     owners[(region + 1) % plan.regions], striper_to);
  }
  for (const Part& p : parts_) helloFrom(p.pred);
}

TwoLevelReduceScatter::~TwoLevelReduceScatter() {
  buffers_->release(std::move(sorted_in_));
  buffers_->release(std::move(partials_));
  buffers_->release(std::move(scratch_));
}

void TwoLevelReduceScatter::addReduceScatter(uint32_t id, Kind kind, RingOpSpec spec, uint32_t pred, uint32_t succ,
                                             const StriperTo& striper_to) {
  spec.segment_elems = segmentElems(spec.count, spec.world, elem_, base_.desc.segment_bytes);
  spec.eager_bytes = wire::kEagerBytes / std::max<size_t>(sharing_, 1);
  ++left_[kind];
  addRing(id, 0, kind, std::move(spec), pred, succ, striper_to(succ));
}

void TwoLevelReduceScatter::start() {
  if (sorted_in_.data) {
    for (size_t r = 0; r < blocks_.sorted_at.size(); ++r) {
      std::memcpy(sorted_in_.data.get() + blocks_.sorted_at[r] * elem_, base_.input + r * blocks_.block * elem_,
                  blocks_.block * elem_);
    }
  }
  startKind(left_[kRegion] > 0 ? kRegion : kPiece);
  maybeFinish();
}

void TwoLevelReduceScatter::startKind(Kind kind) {
  for (Part& p : parts_) {
    if (p.kind == kind && !over()) startPart(p);
  }
}

void TwoLevelReduceScatter::partFinished(Part& p) {
  if (--left_[p.kind] == 0 && p.kind == kRegion) startKind(kPiece);
}

}  // namespace pccl::collective
