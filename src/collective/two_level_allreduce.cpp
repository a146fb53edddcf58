#include "collective/two_level_allreduce.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

namespace pccl::collective {

namespace {
std::vector<std::shared_ptr<Striper>> stripersOf(const TwoLevelPart& part, const TwoLevelAllReduce::StriperTo& to) {
  std::vector<uint32_t> ranks;
  if (part.region_world > 1) ranks.push_back(part.region_succ);
  for (const auto& p : part.pieces) ranks.push_back(p.succ);
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::vector<std::shared_ptr<Striper>> out;
  for (uint32_t r : ranks) out.push_back(to(r));
  return out;
}
}  // namespace

TwoLevelAllReduce::TwoLevelAllReduce(const RingOpSpec& base, TwoLevelPart part, const StriperTo& striper_to,
                                     BufferPool* buffers, Finished finished)
    : RingOp(base.op_id, base.seq, stripersOf(part, striper_to), std::move(finished)),
      base_(base),
      plan_(std::move(part)),
      buffers_(buffers),
      elem_(codec::dtypeSize(base.dtype)) {
  const size_t segment_bytes = base_.desc.segment_bytes;
  // The LAN level: full precision, and avg sums (the WAN level divides by the group's size).
  RingOpSpec lan = base_;
  lan.quant = codec::Quant::kNone;
  lan.compress = 0;
  lan.compressor = nullptr;
  lan.op = base_.op == codec::RedOp::kAvg ? codec::RedOp::kSum : base_.op;
  lan.world = plan_.region_world;
  lan.rank = plan_.region_rank;
  lan.blocks = plan_.blocks;
  lan.segment_elems = segmentElems(base_.count, plan_.region_world, elem_, segment_bytes);
  if (plan_.region_world > 1) {
    partial_ = buffers_->acquire(std::max<size_t>(plan_.block.count, 1) * elem_);
    scratch_ = buffers_->acquire(std::max<size_t>(base_.count, 1) * elem_);
    RingOpSpec rs = lan;
    rs.kind = wire::Collective::kReduceScatter;
    rs.output = partial_.data.get();
    rs.scratch = scratch_.data.get();
    addPart(kPartReduceScatter, rs, plan_.region_pred, plan_.region_succ, striper_to);
    RingOpSpec ag = lan;
    ag.kind = wire::Collective::kAllGather;
    ag.input = base_.output + plan_.block.offset * elem_;
    ag.output = base_.output;
    addPart(kPartAllGather, ag, plan_.region_pred, plan_.region_succ, striper_to);
  }
  // The WAN level: one all-reduce per piece of our block, over the R owners of the piece.
  const uint8_t* reduced = plan_.region_world > 1 ? partial_.data.get() : base_.input + plan_.block.offset * elem_;
  for (const auto& piece : plan_.pieces) {
    RingOpSpec wan = base_;
    wan.kind = wire::Collective::kAllReduce;
    wan.world = plan_.regions;
    wan.rank = plan_.region;
    wan.input = reduced + (piece.span.offset - plan_.block.offset) * elem_;
    wan.output = base_.output + piece.span.offset * elem_;
    wan.count = piece.span.count;
    wan.avg_divisor = base_.world;
    wan.segment_elems = segmentElems(piece.span.count, plan_.regions, elem_, segment_bytes);
    addPart(kPartFirstPiece + piece.id, wan, piece.pred, piece.succ, striper_to);
    ++pieces_left_;
  }
}

void TwoLevelAllReduce::addPart(uint32_t id, RingOpSpec spec, uint32_t pred, uint32_t succ,
                                const StriperTo& striper_to) {
  spec.phase_base = id << kPartShift;
  uint32_t sharing = 0;  // the parts of this call that send to `succ` (this one among them)
  if (plan_.region_world > 1 && succ == plan_.region_succ) sharing += 2;
  for (const auto& p : plan_.pieces) sharing += p.succ == succ ? 1 : 0;
  spec.eager_bytes = wire::kEagerBytes / std::max<uint32_t>(sharing, 1);
  if (spec.coded()) {
    Part tmp;
    tmp.wire = buffers_->acquire(wireRegionBytes(spec));
    spec.wire = tmp.wire.data.get();
    parts_.push_back(std::move(tmp));
  } else {
    parts_.emplace_back();
  }
  Part& p = parts_.back();
  p.id = id;
  p.pred = pred;
  p.succ = succ;
  p.ring = std::make_shared<RingCollective>(spec, striper_to(succ), [this, id](const Status& s) {
    partFinished(id, s);
  });
}

TwoLevelAllReduce::Part* TwoLevelAllReduce::find(uint32_t id) {
  for (Part& p : parts_) {
    if (p.id == id) return &p;
  }
  return nullptr;
}

void TwoLevelAllReduce::start() {
  if (plan_.region_world > 1) {
    startPart(*find(kPartReduceScatter));
  } else {
    for (Part& p : parts_) {
      if (!over()) startPart(p);
    }
  }
  maybeFinish();
}

void TwoLevelAllReduce::startPart(Part& p) {
  if (p.started || over()) return;
  p.started = true;
  auto self = shared_from_this();  // a part may finish (and fail us) inside its start
  auto ring = p.ring;
  ring->start();
  if (p.ready && !over()) ring->successorReady();
  auto deferred = std::move(p.deferred);
  p.deferred.clear();
  for (const auto& [h, bytes] : deferred) {
    if (over()) return;
    Status st = ring->delivered(h, bytes);
    if (!st.isOk()) return fail(st);
  }
}

void TwoLevelAllReduce::partFinished(uint32_t id, const Status& s) {
  if (over()) return;
  if (!s.isOk()) return fail(s);
  Part* p = find(id);
  if (p == nullptr || p->finished) return;
  p->finished = true;
  if (id == kPartReduceScatter) {
    for (Part& q : parts_) {
      if (q.id >= kPartFirstPiece && !over()) startPart(q);
    }
  } else if (id >= kPartFirstPiece) {
    --pieces_left_;
  }
  // Our block is final once every piece of it is (at once when the call leaves our block empty).
  if (id != kPartAllGather && pieces_left_ == 0 && plan_.region_world > 1 && !over()) {
    startPart(*find(kPartAllGather));
  }
  maybeFinish();
}

void TwoLevelAllReduce::successorReady() {
  readyFrom((base_.rank + 1) % base_.world);
}

void TwoLevelAllReduce::readyFrom(uint32_t rank) {
  for (Part& p : parts_) {
    if (p.succ != rank || p.ready) continue;
    p.ready = true;
    if (p.started && !over()) {
      auto ring = p.ring;
      ring->successorReady();
    }
  }
}

wire::DataHeader TwoLevelAllReduce::local(const wire::DataHeader& h) {
  wire::DataHeader l = h;
  l.phase = h.phase & ((1u << kPartShift) - 1);
  return l;
}

Result<uint8_t*> TwoLevelAllReduce::placement(const wire::DataHeader& h, uint32_t bytes) {
  (void)h;
  (void)bytes;
  return Status::internal("a two-level frame without its sender");
}

Result<uint8_t*> TwoLevelAllReduce::placementFrom(uint32_t from, const wire::DataHeader& h, uint32_t bytes) {
  if (over()) return Status::internal("frame for a finished operation");
  const uint32_t id = h.phase >> kPartShift;
  Part* p = find(id);
  if (p == nullptr) {
    return Status::protocol(fmt::format("op {}: two-level part {} is not ours (phase {})", base_.op_id, id, h.phase));
  }
  if (from != p->pred) {
    return Status::protocol(fmt::format("op {}: a frame of two-level part {} from group rank {}; it comes from {}",
                                        base_.op_id, id, from, p->pred));
  }
  auto ring = p->ring;
  return ring->placement(local(h), bytes);
}

Status TwoLevelAllReduce::delivered(const wire::DataHeader& h, uint32_t bytes) {
  if (over()) return Status::ok();
  Part* p = find(h.phase >> kPartShift);
  if (p == nullptr) return Status::internal("a two-level frame of no part was delivered");
  if (!p->started) {
    p->deferred.emplace_back(local(h), bytes);
    return Status::ok();
  }
  auto ring = p->ring;
  Status st = ring->delivered(local(h), bytes);
  if (!st.isOk()) fail(st);
  return st;
}

bool TwoLevelAllReduce::complete() const {
  return std::all_of(parts_.begin(), parts_.end(), [](const Part& p) { return p.finished; });
}

void TwoLevelAllReduce::stopWork() {
  const Status why = Status::internal("the two-level operation ended");
  for (Part& p : parts_) {
    auto ring = p.ring;
    ring->fail(why);
  }
}

void TwoLevelAllReduce::whenQuiet(std::function<void()> quiet) {
  auto self = shared_from_this();
  auto left = std::make_shared<size_t>(parts_.size() + 1);
  auto one = [left, quiet = std::move(quiet)]() {
    if (--*left == 0) quiet();
  };
  for (Part& p : parts_) {
    auto ring = p.ring;
    ring->whenQuiet(one);
  }
  RingOp::whenQuiet(one);
}

size_t TwoLevelAllReduce::sendsInFlight() const {
  size_t n = RingOp::sendsInFlight();
  for (const Part& p : parts_) n += p.ring->sendsInFlight();
  return n;
}

uint64_t TwoLevelAllReduce::bytesSent() const {
  uint64_t n = 0;
  for (const Part& p : parts_) n += p.ring->bytesSent();
  return n;
}

uint64_t TwoLevelAllReduce::bytesReceived() const {
  uint64_t n = 0;
  for (const Part& p : parts_) n += p.ring->bytesReceived();
  return n;
}

}  // namespace pccl::collective
