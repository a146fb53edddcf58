#include "collective/composite_op.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "util/log.hpp"

namespace pccl::collective {
namespace {
constexpr const char* kLog = "collective";
}  // namespace

CompositeOp::CompositeOp(const RingOpSpec& base, std::vector<std::shared_ptr<Striper>> stripers,
                         BufferPool* buffers, Finished finished)
    : RingOp(base.op_id, base.seq, std::move(stripers), std::move(finished)), base_(base), buffers_(buffers) {
  // The caller's buffers, by their sizes in the call (two-level calls never take device buffers).
  if (base_.device == nullptr) {
    const size_t elem = codec::dtypeSize(base_.dtype), all = base_.count * elem;
    const size_t block = base_.world > 0 ? base_.count / base_.world * elem : all;
    ownRegion(base_.input, base_.kind == wire::Collective::kAllGather ? block : all);
    ownRegion(base_.output, base_.kind == wire::Collective::kReduceScatter ? block : all);
  }
}

std::vector<std::shared_ptr<Striper>> CompositeOp::stripersTo(const std::vector<uint32_t>& ranks,
                                                               const StriperTo& to) {
  std::vector<std::shared_ptr<Striper>> out;
  for (uint32_t r : ranks) out.push_back(to(r));
  return out;
}

RingOpSpec CompositeOp::lanLevel(RingOpSpec spec) {
  spec.quant = codec::Quant::kNone;
  spec.compress = 0;
  spec.compressor = nullptr;
  if (spec.op == codec::RedOp::kAvg) spec.op = codec::RedOp::kSum;
  return spec;
}

CompositeOp::~CompositeOp() {
  for (auto& b : own_) buffers_->release(std::move(b));
  if (wire_.data) buffers_->release(std::move(wire_));
}

void CompositeOp::ownRegion(const uint8_t* base, size_t bytes) {
  if (base != nullptr && bytes > 0) regions_.push_back({reinterpret_cast<uintptr_t>(base), bytes});
}

CompositeOp::Part& CompositeOp::addPart(uint32_t id, uint32_t group, int kind, uint32_t pred, uint32_t succ,
                                        Make make) {
  parts_.emplace_back();
  Part& p = parts_.back();
  p.id = id;
  p.group = group;
  p.kind = kind;
  p.pred = pred;
  p.succ = succ;
  p.make = std::move(make);
  return p;
}

CompositeOp::Part& CompositeOp::addRing(uint32_t id, uint32_t group, int kind, RingOpSpec spec, uint32_t pred,
                                        uint32_t succ, std::shared_ptr<Striper> striper) {
  spec.phase_base = id << kPartShift;
  const size_t wire_at = reserveWire(spec);
  return addPart(id, group, kind, pred, succ,
                 [this, spec = std::move(spec), striper = std::move(striper), wire_at](Part& p) {
                   RingOpSpec s = spec;
                   s.eager_bytes = std::min(s.eager_bytes, eagerShareTo(p.succ));
                   s.wire = wireAt(wire_at);
                   return std::make_shared<RingCollective>(s, striper, partDone(p.id));
                 });
}

uint64_t CompositeOp::eagerShareTo(uint32_t succ) const {
  uint64_t sharing = 0;
  for (const Part& p : parts_) sharing += p.succ == succ ? 1 : 0;
  return wire::kEagerBytes / std::max<uint64_t>(sharing, 1);
}

void CompositeOp::helloFrom(uint32_t rank) {
  auto at = std::lower_bound(hello_to_.begin(), hello_to_.end(), rank);
  if (at == hello_to_.end() || *at != rank) hello_to_.insert(at, rank);
}

CompositeOp::Part* CompositeOp::find(uint32_t id) {
  for (Part& p : parts_) {
    if (p.id == id) return &p;
  }
  return nullptr;
}

CompositeOp::Part* CompositeOp::find(uint32_t group, int kind) {
  for (Part& p : parts_) {
    if (p.group == group && p.kind == kind) return &p;
  }
  return nullptr;
}

uint8_t* CompositeOp::own(size_t bytes) {
  bytes = std::max<size_t>(bytes, 1);
  own_.push_back(buffers_->acquire(bytes));
  ownRegion(own_.back().data.get(), bytes);
  return own_.back().data.get();
}

size_t CompositeOp::reserveWire(size_t bytes) {
  const size_t at = wire_bytes_;
  wire_bytes_ += (std::max<size_t>(bytes, 1) + 63) / 64 * 64;  // each part's slots 64-byte aligned
  return at;
}

uint8_t* CompositeOp::wireAt(size_t at) {
  if (at == kNoWire) return nullptr;
  if (!wire_.data) {
    wire_ = buffers_->acquire(wire_bytes_);
    ownRegion(wire_.data.get(), wire_bytes_);
  }
  return wire_.data.get() + at;
}

RingOp::Finished CompositeOp::partDone(uint32_t id) {
  return [this, id](const Status& s) {
    if (over()) return;
    if (!s.isOk()) return fail(s);
    Part* p = find(id);
    if (p == nullptr || p->finished) return;
    p->finished = true;
    PCCL_LOG_TRACE(kLog, "rank={}: part {} (group {}, kind {}) finished", base_.rank, p->id, p->group, p->kind);
    partFinished(*p);
    maybeFinish();
  };
}

void CompositeOp::ensure(Part& p) {
  if (p.op) return;
  p.op = p.make(p);
  // Its payloads are lent from the call's buffers, not from its own spans of them.
  p.op->lendFrom(regions_);
}

void CompositeOp::startPart(Part& p) {
  if (p.started || over()) return;
  p.started = true;
  PCCL_LOG_TRACE(kLog, "rank={}: part {} (group {}, kind {}) started", base_.rank, p.id, p.group, p.kind);
  ensure(p);
  auto self = shared_from_this();  // a part may finish (and fail us) inside its start
  auto op = p.op;
  op->start();
  if (p.ready && !over()) op->successorReady();
  auto deferred = std::move(p.deferred);
  p.deferred.clear();
  for (const auto& [h, bytes] : deferred) {
    if (over()) return;
    Status st = op->delivered(h, bytes);
    if (!st.isOk()) return fail(st);
  }
}

void CompositeOp::successorReady() {
  readyFrom((base_.rank + 1) % base_.world);
}

void CompositeOp::readyFrom(uint32_t rank) {
  for (Part& p : parts_) {
    if (p.succ != rank || p.ready) continue;
    p.ready = true;
    if (p.started && !over()) {
      auto op = p.op;
      op->successorReady();
    }
  }
}

wire::DataHeader CompositeOp::local(const wire::DataHeader& h) {
  wire::DataHeader l = h;
  l.phase = h.phase & ((1u << kPartShift) - 1);
  return l;
}

Result<uint8_t*> CompositeOp::placement(const wire::DataHeader& h, uint32_t bytes) {
  (void)h;
  (void)bytes;
  return Status::internal("a two-level frame without its sender");
}

Result<uint8_t*> CompositeOp::placementFrom(uint32_t from, const wire::DataHeader& h, uint32_t bytes) {
  if (over()) return Status::internal("frame for a finished operation");
  const uint32_t id = h.phase >> kPartShift;
  Part* p = find(id);
  if (p == nullptr) {
    return Status::protocol(fmt::format("op {}: two-level part {} is not ours (phase {})", base_.op_id, id, h.phase));
  }
  if (from != p->pred && !(p->both_ways && from == p->succ)) {
    return Status::protocol(fmt::format("op {}: a frame of two-level part {} from group rank {}; it comes from {}{}",
                                        base_.op_id, id, from, p->pred,
                                        p->both_ways ? fmt::format(" or {}", p->succ) : std::string()));
  }
  ensure(*p);  // a frame of a part that has not started: placed now, delivered when it starts
  auto op = p->op;
  return op->placement(local(h), bytes);
}

void CompositeOp::withdraw(uint32_t from, const wire::DataHeader& h) {
  if (over()) return;
  Part* p = find(h.phase >> kPartShift);
  if (p == nullptr || !p->op) return;
  auto op = p->op;
  op->withdraw(from, local(h));
}

Status CompositeOp::delivered(const wire::DataHeader& h, uint32_t bytes) {
  if (over()) return Status::ok();
  Part* p = find(h.phase >> kPartShift);
  if (p == nullptr) return Status::internal("a two-level frame of no part was delivered");
  if (!p->started) {
    p->deferred.emplace_back(local(h), bytes);
    return Status::ok();
  }
  auto op = p->op;
  Status st = op->delivered(local(h), bytes);
  if (!st.isOk()) fail(st);
  return st;
}

bool CompositeOp::complete() const {
  return std::all_of(parts_.begin(), parts_.end(), [](const Part& p) { return p.finished; });
}

void CompositeOp::stopWork() {
  const Status why = Status::internal("the two-level operation ended");
  for (Part& p : parts_) {
    if (auto op = p.op) op->fail(why);
  }
}

void CompositeOp::whenQuiet(std::function<void()> quiet) {
  auto self = shared_from_this();
  size_t made = 0;
  for (const Part& p : parts_) made += p.op ? 1 : 0;
  auto left = std::make_shared<size_t>(made + 1);
  auto one = [left, quiet = std::move(quiet)]() {
    if (--*left == 0) quiet();
  };
  for (Part& p : parts_) {
    if (auto op = p.op) op->whenQuiet(one);
  }
  RingOp::whenQuiet(one);
}

size_t CompositeOp::sendsInFlight() const {
  size_t n = RingOp::sendsInFlight();
  for (const Part& p : parts_) n += p.op ? p.op->sendsInFlight() : 0;
  return n;
}

uint64_t CompositeOp::bytesSent() const {
  uint64_t n = 0;
  for (const Part& p : parts_) n += p.op ? p.op->bytesSent() : 0;
  return n;
}

uint64_t CompositeOp::bytesReceived() const {
  uint64_t n = 0;
  for (const Part& p : parts_) n += p.op ? p.op->bytesReceived() : 0;
  return n;
}

}  // namespace pccl::collective
