#include "collective/two_level_allreduce.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

namespace pccl::collective {

namespace {
std::vector<std::shared_ptr<Striper>> stripersOf(const TwoLevelCall& call, const TwoLevelAllReduce::StriperTo& to) {
  std::vector<std::shared_ptr<Striper>> out;
  for (uint32_t r : call.receivers()) out.push_back(to(r));
  return out;
}
}  // namespace

TwoLevelAllReduce::TwoLevelAllReduce(const RingOpSpec& base, const TwoLevelRing& ring, const StriperTo& striper_to,
                                     BufferPool* buffers, Finished finished)
    : RingOp(base.op_id, base.seq,
             stripersOf(twoLevelCall(ring, base.rank, base.count, codec::dtypeSize(base.dtype)), striper_to),
             std::move(finished)),
      base_(base),
      call_(twoLevelCall(ring, base.rank, base.count, codec::dtypeSize(base.dtype))),
      pieces_(ring.pieces()),
      buffers_(buffers),
      elem_(codec::dtypeSize(base.dtype)) {
  const uint32_t waves = static_cast<uint32_t>(call_.waves.size());
  partials_.resize(waves);
  pieces_left_.assign(waves, 0);
  for (uint32_t w = 0; w < waves; ++w) addWave(w, striper_to);
}

TwoLevelAllReduce::~TwoLevelAllReduce() {
  for (auto& b : partials_) buffers_->release(std::move(b));
  for (auto& b : scratches_) buffers_->release(std::move(b));
  for (Part& p : parts_) buffers_->release(std::move(p.wire));
}

uint8_t* TwoLevelAllReduce::partialOf(uint32_t wave) {
  BufferPool::Buffer& b = partials_[wave];
  if (!b.data) b = buffers_->acquire(std::max<size_t>(call_.parts[wave].block.count, 1) * elem_);
  return b.data.get();
}

uint8_t* TwoLevelAllReduce::scratchOf(uint32_t wave) {
  BufferPool::Buffer& b = scratches_[wave % 2];
  if (!b.data) {
    size_t largest = 1;
    for (const Span& w : call_.waves) largest = std::max(largest, w.count);
    b = buffers_->acquire(largest * elem_);
  }
  return b.data.get();
}

void TwoLevelAllReduce::addWave(uint32_t w, const StriperTo& striper_to) {
  const TwoLevelPart& plan = call_.parts[w];
  const Span wave = call_.waves[w];
  const uint32_t base_id = w * static_cast<uint32_t>(pieces_ + 2);
  const size_t segment_bytes = base_.desc.segment_bytes;
  const uint8_t* input = base_.input + wave.offset * elem_;
  uint8_t* output = base_.output + wave.offset * elem_;
  if (plan.region_world > 1) {
    // The LAN level: full precision, and avg sums (the WAN level divides by the group's size).
    RingOpSpec lan = base_;
    lan.quant = codec::Quant::kNone;
    lan.compress = 0;
    lan.compressor = nullptr;
    lan.op = base_.op == codec::RedOp::kAvg ? codec::RedOp::kSum : base_.op;
    lan.world = plan.region_world;
    lan.rank = plan.region_rank;
    lan.count = wave.count;
    lan.blocks = plan.blocks;
    lan.segment_elems = segmentElems(wave.count, plan.region_world, elem_, segment_bytes);
    RingOpSpec rs = lan;
    rs.kind = wire::Collective::kReduceScatter;
    rs.input = input;
    addPart(base_id, w, Kind::kReduceScatter, rs, plan.region_pred, plan.region_succ, striper_to);
    RingOpSpec ag = lan;
    ag.kind = wire::Collective::kAllGather;
    ag.input = output + plan.block.offset * elem_;
    ag.output = output;
    addPart(base_id + 1, w, Kind::kAllGather, ag, plan.region_pred, plan.region_succ, striper_to);
  }
  // The WAN level: one all-reduce per piece of our block, over the R owners of the piece, reading the
  // wave's partial (ensure() points it there), or our input when we are our region's only member.
  for (const auto& piece : plan.pieces) {
    RingOpSpec wan = base_;
    wan.kind = wire::Collective::kAllReduce;
    wan.world = plan.regions;
    wan.rank = plan.region;
    wan.input = plan.region_world > 1 ? nullptr : input + piece.span.offset * elem_;
    wan.output = output + piece.span.offset * elem_;
    wan.count = piece.span.count;
    wan.avg_divisor = base_.world;
    wan.segment_elems = segmentElems(piece.span.count, plan.regions, elem_, segment_bytes);
    addPart(base_id + 2 + piece.id, w, Kind::kPiece, wan, piece.pred, piece.succ, striper_to);
    parts_.back().from_partial = plan.region_world > 1;
    parts_.back().partial_offset = piece.span.offset - plan.block.offset;
    ++pieces_left_[w];
  }
}

void TwoLevelAllReduce::addPart(uint32_t id, uint32_t wave, Kind kind, RingOpSpec spec, uint32_t pred, uint32_t succ,
                                const StriperTo& striper_to) {
  spec.phase_base = id << kPartShift;
  uint32_t sharing = 0;  // the parts of this call that send to `succ` (this one among them)
  for (const auto& plan : call_.parts) {
    if (plan.region_world > 1 && succ == plan.region_succ) sharing += 2;
    for (const auto& p : plan.pieces) sharing += p.succ == succ ? 1 : 0;
  }
  spec.eager_bytes = wire::kEagerBytes / std::max<uint32_t>(sharing, 1);
  parts_.emplace_back();
  Part& p = parts_.back();
  p.id = id;
  p.wave = wave;
  p.kind = kind;
  p.pred = pred;
  p.succ = succ;
  p.spec = std::move(spec);
  p.striper = striper_to(succ);
}

void TwoLevelAllReduce::ensure(Part& p) {
  if (p.ring) return;
  RingOpSpec spec = p.spec;
  if (p.kind == Kind::kReduceScatter) {
    spec.output = partialOf(p.wave);
    spec.scratch = scratchOf(p.wave);
  }
  if (p.from_partial) spec.input = partialOf(p.wave) + p.partial_offset * elem_;
  if (spec.coded()) {
    p.wire = buffers_->acquire(wireRegionBytes(spec));
    spec.wire = p.wire.data.get();
  }
  const uint32_t id = p.id;
  p.ring = std::make_shared<RingCollective>(spec, p.striper, [this, id](const Status& s) { partFinished(id, s); });
}

TwoLevelAllReduce::Part* TwoLevelAllReduce::find(uint32_t id) {
  for (Part& p : parts_) {
    if (p.id == id) return &p;
  }
  return nullptr;
}

TwoLevelAllReduce::Part* TwoLevelAllReduce::find(uint32_t wave, Kind kind) {
  for (Part& p : parts_) {
    if (p.wave == wave && p.kind == kind) return &p;
  }
  return nullptr;
}

void TwoLevelAllReduce::start() {
  if (Part* rs = find(0, Kind::kReduceScatter)) {
    startPart(*rs);  // the waves' pieces follow their reduce-scatters
  } else {
    for (uint32_t w = 0; w < call_.waves.size() && !over(); ++w) startPieces(w);  // a region of one
  }
  maybeFinish();
}

void TwoLevelAllReduce::startPart(Part& p) {
  if (p.started || over()) return;
  p.started = true;
  ensure(p);
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

void TwoLevelAllReduce::startPieces(uint32_t wave) {
  for (Part& q : parts_) {
    if (q.wave == wave && q.kind == Kind::kPiece && !over()) startPart(q);
  }
  // Our block of the wave is final once every piece of it is (at once when the wave leaves it empty).
  if (pieces_left_[wave] == 0 && !over()) {
    if (Part* ag = find(wave, Kind::kAllGather)) startPart(*ag);
  }
}

void TwoLevelAllReduce::partFinished(uint32_t id, const Status& s) {
  if (over()) return;
  if (!s.isOk()) return fail(s);
  Part* p = find(id);
  if (p == nullptr || p->finished) return;
  p->finished = true;
  const uint32_t wave = p->wave;
  switch (p->kind) {
    case Kind::kReduceScatter:
      // The LAN is free for the next wave's reduce-scatter; this wave goes on across regions.
      if (Part* next = find(wave + 1, Kind::kReduceScatter)) startPart(*next);
      startPieces(wave);
      break;
    case Kind::kPiece:
      if (--pieces_left_[wave] == 0 && !over()) {
        if (Part* ag = find(wave, Kind::kAllGather)) startPart(*ag);
      }
      break;
    case Kind::kAllGather:
      break;
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
  ensure(*p);  // a frame of a part that has not started: placed now, delivered when it starts
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
    if (auto ring = p.ring) ring->fail(why);
  }
}

void TwoLevelAllReduce::whenQuiet(std::function<void()> quiet) {
  auto self = shared_from_this();
  size_t made = 0;
  for (const Part& p : parts_) made += p.ring ? 1 : 0;
  auto left = std::make_shared<size_t>(made + 1);
  auto one = [left, quiet = std::move(quiet)]() {
    if (--*left == 0) quiet();
  };
  for (Part& p : parts_) {
    if (auto ring = p.ring) ring->whenQuiet(one);
  }
  RingOp::whenQuiet(one);
}

size_t TwoLevelAllReduce::sendsInFlight() const {
  size_t n = RingOp::sendsInFlight();
  for (const Part& p : parts_) n += p.ring ? p.ring->sendsInFlight() : 0;
  return n;
}

uint64_t TwoLevelAllReduce::bytesSent() const {
  uint64_t n = 0;
  for (const Part& p : parts_) n += p.ring ? p.ring->bytesSent() : 0;
  return n;
}

uint64_t TwoLevelAllReduce::bytesReceived() const {
  uint64_t n = 0;
  for (const Part& p : parts_) n += p.ring ? p.ring->bytesReceived() : 0;
  return n;
}

}  // namespace pccl::collective
