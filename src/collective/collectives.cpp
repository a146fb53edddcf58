#include "collective/collectives.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "codec/reduce.hpp"
#include "collective/partition.hpp"
#include "util/log.hpp"

namespace pccl::collective {

namespace {
constexpr const char* kLog = "collective";
}  // namespace

Collectives::Collectives(asio::io_context& io, BufferPool* pool, ResetRing reset_ring)
    : io_(io), pool_(pool), reset_ring_(std::move(reset_ring)) {}

Collectives::~Collectives() { failAll(Status::invalidUsage("the communicator was destroyed")); }

void Collectives::setRing(uint64_t epoch, uint32_t rank, uint32_t world, Channels successor, Channels predecessor) {
  epoch_ = epoch;
  rank_ = rank;
  world_ = world;
  successor_ = std::move(successor);
  predecessor_ = std::move(predecessor);
  ring_broken_ = Status::ok();
  paused_.clear();
  for (auto& ch : successor_) ch->start(this);
  for (auto& ch : predecessor_) ch->start(this);
}

void Collectives::clearRing() {
  successor_.clear();
  predecessor_.clear();
  paused_.clear();
  ring_broken_ = Status::peerLost("the ring is being rebuilt");
}

// ---- the life of one operation ------------------------------------------------------------------

void Collectives::submit(ReduceRequest req, Completion done) {
  auto op = std::make_unique<Op>(io_);
  op->req = std::move(req);
  op->done = std::move(done);
  op->world = world_;
  Op& o = *op;
  if (by_tag_.count(o.req.tag) != 0) {
    return finishOp(o, Status::invalidUsage(fmt::format("tag {} is already in flight", o.req.tag)));
  }
  if (!link_down_.isOk()) return finishOp(o, link_down_);
  if (link_ == nullptr) return finishOp(o, Status::masterUnreachable("not connected to the master"));
  by_tag_[o.req.tag] = std::move(op);
  wire::OpAnnounce a;
  a.tag = o.req.tag;
  a.count = o.req.count;
  a.dtype = static_cast<uint8_t>(o.req.dtype);
  a.op = static_cast<uint8_t>(o.req.op);
  a.quant = static_cast<uint8_t>(o.req.quant);
  a.compress = static_cast<uint8_t>(o.req.compress);
  a.epoch = epoch_;
  a.segment_bytes = o.req.segment_bytes;
  link_->send(a, epoch_);
  const uint64_t tag = o.req.tag;
  o.timer.expires_at(o.req.submitted + o.req.timeout);
  o.timer.async_wait([this, tag](const asio::error_code& ec) {
    if (!ec) timedOut(tag);
  });
}

void Collectives::onStart(const wire::OpStart& m) {
  max_started_ = std::max(max_started_, m.op_id);
  auto it = by_tag_.find(m.tag);
  if (it == by_tag_.end() || it->second->state != State::kAnnounced) {
    // We gave up on it (deadline) before the start reached us: make the others stop too.
    if (link_ != nullptr) {
      link_->send(wire::OpFailed{m.tag, m.op_id, static_cast<uint16_t>(Code::kTimeout),
                                 "this peer no longer waits for the operation"},
                  epoch_);
    }
    return resumePaused();
  }
  Op& op = *it->second;
  op.op_id = m.op_id;
  op.state = State::kRunning;
  by_id_[m.op_id] = &op;
  run(op);
  resumePaused();
}

void Collectives::run(Op& op) {
  const ReduceRequest& r = op.req;
  const size_t bytes = r.count * codec::dtypeSize(r.dtype);
  if (r.count == 0) return localDone(op);
  if (world_ <= 1) {
    if (r.output != r.input) {
      if (r.device != nullptr) {
        Status st = deviceCopy(*r.device, r.output, r.input, bytes);
        if (!st.isOk()) return failOp(op, st, true);
      } else {
        std::memcpy(r.output, r.input, bytes);
      }
    }
    return localDone(op);
  }
  if (!ring_broken_.isOk() || successor_.empty()) {
    return failOp(op, Status::peerLost(fmt::format("the ring's connections are down ({}); call pcclUpdateTopology",
                                                   ring_broken_.isOk() ? "none" : ring_broken_.message())),
                  true);
  }
  RingOpSpec spec;
  spec.op_id = op.op_id;
  spec.input = r.input;
  spec.output = r.output;
  spec.count = r.count;
  spec.dtype = r.dtype;
  spec.op = r.op;
  spec.rank = rank_;
  spec.world = world_;
  spec.segment_elems = segmentElems(r.count, world_, codec::dtypeSize(r.dtype), r.segment_bytes);
  spec.quant = r.quant;
  spec.compress = r.compress;
  spec.compressor = &compressor_;
  spec.device = r.device;
  if (r.device != nullptr) {
    // The wire bytes in pinned memory (DMA to and from the GPU) and their mirror on the GPU.
    const size_t wire_bytes = wireRegionBytes(spec);
    auto pinned = r.device->pinned(wire_bytes);
    auto on_gpu = pinned.isOk() ? r.device->device(wire_bytes) : Result<codec::gpu::Block>(pinned.status());
    if (!on_gpu.isOk()) return failOp(op, on_gpu.status(), true);
    op.wire_pinned = std::move(pinned).value();
    op.wire_device = std::move(on_gpu).value();
    spec.wire = op.wire_pinned.data();
    spec.device_wire = op.wire_device.data();
    spec.post = [this](std::function<void()> fn) { asio::post(io_, std::move(fn)); };
  } else if (spec.coded()) {
    op.wire = pool_->acquire(wireRegionBytes(spec));
    spec.wire = op.wire.data.get();
  }
  const uint64_t op_id = op.op_id;
  op.ring = std::make_shared<RingAllReduce>(spec, successor_,
                                            [this, op_id](const Status& s) { ringFinished(op_id, s); });
  auto ring = op.ring;
  ring->start();
}

void Collectives::ringFinished(uint64_t op_id, const Status& s) {
  Op* op = byId(op_id);
  if (op == nullptr || op->state != State::kRunning) return;
  if (s.isOk()) return localDone(*op);
  failOp(*op, s, true);
}

void Collectives::localDone(Op& op) {
  op.state = State::kLocalDone;
  if (link_ != nullptr) link_->send(wire::OpDone{op.op_id}, epoch_);
}

void Collectives::onComplete(const wire::OpComplete& m) {
  Op* op = byId(m.op_id);
  if (op == nullptr) return;
  if (op->state != State::kLocalDone) {
    PCCL_LOG_ERROR(kLog, "{} epoch={} tag={}: master completed op {} that is still running here", name_, epoch_,
                   op->req.tag, m.op_id);
    return failOp(*op, Status::protocol("the master completed an operation this peer had not finished"), true);
  }
  finishOp(*op, Status::ok());
}

void Collectives::onAbort(const wire::OpAbort& m) {
  max_started_ = std::max(max_started_, m.op_id);
  Op* op = nullptr;
  if (m.op_id != 0) {
    op = byId(m.op_id);
  } else {
    auto it = by_tag_.find(m.tag);
    if (it != by_tag_.end() && it->second->state == State::kAnnounced) op = it->second.get();
  }
  if (op != nullptr) failOp(*op, Status(wire::codeFromWire(m.code, Code::kPeerLost), m.reason), false);
  resumePaused();
}

void Collectives::timedOut(uint64_t tag) {
  auto it = by_tag_.find(tag);
  if (it == by_tag_.end()) return;
  Op& op = *it->second;
  const char* where = op.state == State::kAnnounced ? "waiting for every peer to call it" : "running";
  failOp(op, Status::timeout(fmt::format("all-reduce tag {} not finished within {} ms ({})", tag,
                                         op.req.timeout.count(), where)),
         true);
}

void Collectives::failOp(Op& op, const Status& why, bool tell_master) {
  const State was = op.state;
  if (was == State::kFailing) return;
  op.state = State::kFailing;  // closing the ring below reports back here: do not fail twice
  const bool touched = was != State::kAnnounced;  // output may hold partial data
  if (tell_master && link_ != nullptr) {
    link_->send(wire::OpFailed{op.req.tag, op.op_id, static_cast<uint16_t>(why.code()), why.message()}, epoch_);
  }
  if (op.ring) op.ring->fail(why);
  if (was == State::kRunning) {
    // Segments of this operation may still be on the wire, and frames in flight could land in the
    // user's buffer: close the ring's connections before giving the buffer back.
    PCCL_LOG_WARN(kLog, "{} epoch={} tag={}: all-reduce op {} failed mid-transfer, closing the ring: {}", name_,
                  epoch_, op.req.tag, op.op_id, why.toString());
    ring_broken_ = why;
    reset_ring_(why);
  }
  const size_t bytes = op.req.count * codec::dtypeSize(op.req.dtype);
  if (touched && op.req.saved.data) std::memcpy(op.req.output, op.req.saved.data.get(), bytes);
  if (touched && op.req.saved_device) {
    Status st = deviceCopy(*op.req.device, op.req.output, op.req.saved_device.data(), bytes);
    if (!st.isOk()) PCCL_LOG_ERROR(kLog, "{} epoch={} tag={}: could not restore the device buffer: {}", name_, epoch_, op.req.tag, st.toString());
  }
  finishOp(op, why);
}

void Collectives::finishOp(Op& op, const Status& s) {
  ReduceOutcome out;
  out.status = s;
  out.world_size = op.world;
  if (op.ring) {
    out.tx_bytes = op.ring->bytesSent();
    out.rx_bytes = op.ring->bytesReceived();
  }
  out.seconds = std::chrono::duration<double>(Clock::now() - op.req.submitted).count();
  op.timer.cancel();
  Completion done = std::move(op.done);
  pool_->release(std::move(op.req.saved));
  pool_->release(std::move(op.wire));
  op.req.saved_device.reset();
  op.wire_pinned.reset();
  op.wire_device.reset();
  // Drop the bookkeeping before telling the user: the tag may be reused at once.
  std::unique_ptr<Op> keep;
  if (op.op_id != 0) by_id_.erase(op.op_id);
  auto it = by_tag_.find(op.req.tag);
  if (it != by_tag_.end() && it->second.get() == &op) {
    keep = std::move(it->second);
    by_tag_.erase(it);
  }
  if (done) done(out);
}

Status Collectives::deviceCopy(codec::gpu::Engine& e, void* dst, const void* src, size_t bytes) {
  return e.runNow([&](codec::gpu::JobContext& ctx) {
    return ctx.check(ctx.api.memcpy_async(dst, src, bytes, PCCL_GPU_COPY_D2D, ctx.stream), "device copy");
  });
}

void Collectives::failAll(const Status& why) {
  // Failing the first running operation closes the ring, which reports back through channelClosed:
  // the operations still running then fail with `why` as well, not with the ring's loss.
  failing_all_ = why;
  std::vector<uint64_t> tags;
  for (const auto& kv : by_tag_) tags.push_back(kv.first);
  for (uint64_t tag : tags) {
    auto it = by_tag_.find(tag);
    if (it != by_tag_.end()) failOp(*it->second, why, false);
  }
  failing_all_ = Status::ok();
}

void Collectives::linkLost(const Status& why) {
  link_down_ = why.isOk() ? Status::masterUnreachable("the connection to the master is closed") : why;
  failAll(link_down_);
  link_ = nullptr;
}

Collectives::Op* Collectives::byId(uint64_t op_id) {
  auto it = by_id_.find(op_id);
  return it == by_id_.end() ? nullptr : it->second;
}

// ---- ring connections ---------------------------------------------------------------------------

bool Collectives::ours(const net::DataChannel& ch, const Channels& list) const {
  return std::any_of(list.begin(), list.end(), [&](const auto& c) { return c.get() == &ch; });
}

Result<net::Placement> Collectives::place(net::DataChannel& ch, const wire::DataHeader& h, uint32_t bytes) {
  if (!ours(ch, predecessor_)) {
    return Status::protocol(fmt::format("{}: data frame on a connection that does not carry data to us", ch.name()));
  }
  if ((h.flags & wire::kDataRequest) != 0) {
    return Status::protocol(fmt::format("{}: a shared-state request on a ring connection", ch.name()));
  }
  Op* op = byId(h.op_id);
  if (op != nullptr && op->state == State::kRunning) {
    auto ring = op->ring;
    auto p = ring->placement(h, bytes);
    if (!p.isOk()) return p.status().withContext(ch.name());
    return net::Placement::direct(*p);
  }
  if (op != nullptr) return Status::protocol(fmt::format("{}: data for op {} after it finished", ch.name(), h.op_id));
  if (h.op_id > max_started_) {
    // The predecessor heard OpStart before we did: wait for ours (it is on its way).
    paused_.push_back(ch.weak_from_this());
    return net::Placement::pause();
  }
  return net::Placement::discard();  // an operation that was aborted here
}

Status Collectives::deliver(net::DataChannel& ch, const wire::DataHeader& h, const uint8_t*, uint32_t bytes) {
  Op* op = byId(h.op_id);
  if (op == nullptr || op->state != State::kRunning) return Status::ok();
  auto ring = op->ring;
  Status st = ring->delivered(h, bytes);
  return st.isOk() ? st : st.withContext(ch.name());
}

void Collectives::channelClosed(net::DataChannel& ch, const Status& why) {
  if (!ours(ch, successor_) && !ours(ch, predecessor_)) return;  // an old ring's connection
  if (ring_broken_.isOk()) {
    ring_broken_ = why.isOk() ? Status::peerLost(ch.name() + " closed") : why;
    PCCL_LOG_DEBUG(kLog, "{} epoch={}: ring connection lost: {}", name_, epoch_, ring_broken_.toString());
  }
  std::vector<uint64_t> running;
  for (const auto& kv : by_id_) {
    if (kv.second->state == State::kRunning) running.push_back(kv.first);
  }
  const bool ours_failing = !failing_all_.isOk();  // failAll() closed the ring: its reason, and the master knows
  for (uint64_t id : running) {
    Op* op = byId(id);
    if (op != nullptr && op->state == State::kRunning) {
      failOp(*op,
             ours_failing ? failing_all_
                          : Status::peerLost(fmt::format("ring connection lost: {}", ring_broken_.message())),
             !ours_failing);
    }
  }
}

void Collectives::resumePaused() {
  std::vector<std::weak_ptr<net::DataChannel>> paused = std::move(paused_);
  paused_.clear();
  for (auto& w : paused) {
    if (auto ch = w.lock()) ch->resume();
  }
}

}  // namespace pccl::collective
