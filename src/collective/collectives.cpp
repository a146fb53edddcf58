#include "collective/collectives.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "codec/describe.hpp"
#include "codec/quant.hpp"
#include "codec/reduce.hpp"
#include "collective/partition.hpp"
#include "util/log.hpp"

namespace pccl::collective {

namespace {
constexpr const char* kLog = "collective";

// TCP_NOTSENT_LOWAT of striped ring connections: PCCL_NOTSENT_LOWAT bytes (0 = off), else 128 KiB
// (docs/environment.md). Measured on the emulated transatlantic link: docs/benchmarks.md.
uint32_t notSentLowat() {
  static const uint32_t value = [] {
    const char* env = std::getenv("PCCL_NOTSENT_LOWAT");
    if (env == nullptr || *env == '\0') return 128u << 10;
    char* end = nullptr;
    const unsigned long long v = std::strtoull(env, &end, 10);
    if (*end != '\0' || v > (1ull << 30)) {
      PCCL_LOG_WARN(kLog, "ignoring PCCL_NOTSENT_LOWAT '{}': bytes 0..1073741824 expected", env);
      return 128u << 10;
    }
    return static_cast<uint32_t>(v);
  }();
  return value;
}

// SO_MAX_PACING_RATE of striped ring connections: PCCL_MAX_PACING_RATE bytes/s (0 = no pacing), else
// 2^40 (no cap that matters, but the kernel paces: K flows' bursts no longer overflow a bottleneck
// queue together; docs/algorithms.md §1, measured in docs/benchmarks.md).
uint64_t maxPacingRate() {
  static const uint64_t value = [] {
    constexpr uint64_t kDefault = 1ull << 40;
    const char* env = std::getenv("PCCL_MAX_PACING_RATE");
    if (env == nullptr || *env == '\0') return kDefault;
    char* end = nullptr;
    const unsigned long long v = std::strtoull(env, &end, 10);
    if (*env == '-' || *end != '\0' || v >= (1ull << 48)) {
      PCCL_LOG_WARN(kLog, "ignoring PCCL_MAX_PACING_RATE '{}': bytes per second 0..2^48 expected", env);
      return kDefault;
    }
    return static_cast<uint64_t>(v);
  }();
  return value;
}

}  // namespace

Collectives::Collectives(asio::io_context& io, BufferPool* buffers, ResetRing reset_ring)
    : io_(io), buffers_(buffers), reset_ring_(std::move(reset_ring)), announce_timer_(io) {}

Collectives::~Collectives() { failAll(Status::invalidUsage("the communicator was destroyed")); }

void Collectives::setRing(uint64_t epoch, uint32_t rank, uint32_t world, Channels successor, Channels predecessor,
                          std::string predecessor_id, std::string successor_id, uint64_t gather_bytes) {
  epoch_ = epoch;
  gather_bytes_ = gather_bytes;
  rank_ = rank;
  world_ = world;
  successor_ = std::move(successor);
  predecessor_ = std::move(predecessor);
  predecessor_id_ = std::move(predecessor_id);
  successor_id_ = std::move(successor_id);
  ring_broken_ = Status::ok();
  two_level_.reset();
  links_.clear();
  next_seq_.clear();
  before_call_.clear();
  striper_ = std::make_shared<Striper>(successor_);
  tune(*striper_, successor_id_, true);
  striper_->attach();
  back_striper_ = std::make_shared<Striper>(predecessor_);
  back_striper_->attach();
  tuneForStriping(successor_);
  for (auto& ch : successor_) ch->start(this);
  for (auto& ch : predecessor_) ch->start(this);
}

void Collectives::tune(Striper& striper, const std::string& peer_id, bool successor) {
  const auto pool = static_cast<uint32_t>(striper.channels().size());
  if (tuning_ && pool > 1) {
    auto& tuner = tuners_[peer_id];
    if (tuner == nullptr) {
      // The link's least round trip so far (its connections' handshakes) sets where it starts.
      uint64_t rtt = 0;
      for (const auto& ch : striper.channels()) {
        const uint64_t r = ch->minRttUs();
        if (r > 0 && (rtt == 0 || r < rtt)) rtt = r;
      }
      tuner = std::make_shared<ConnectionTuner>(pool, ConnectionTuner::startFor(static_cast<uint32_t>(rtt)), rtt > 0);
      PCCL_LOG_DEBUG(kLog, "{} epoch={}: to {}: least round trip {} us, {} of {} connections carry data first",
                     name_, epoch_, peer_id, rtt, tuner->active(), pool);
    }
    striper.setTuner(tuner, [this, peer_id, successor, pool](uint32_t active) {
      PCCL_LOG_DEBUG(kLog, "{} epoch={}: to {}: {} of {} connections carry data now", name_, epoch_, peer_id, active,
                     pool);
      if (successor && tune_hook_) tune_hook_(active, true);
    });
  }
  if (successor && tune_hook_) tune_hook_(striper.active(), false);
}

void Collectives::restartTuningForTest(uint32_t start) {
  if (!tuning_ || striper_ == nullptr || successor_.size() <= 1) return;
  tuners_[successor_id_] = std::make_shared<ConnectionTuner>(static_cast<uint32_t>(successor_.size()), start);
  tune(*striper_, successor_id_, true);
}

void Collectives::tuneForStriping(const Channels& channels) {
  if (channels.size() <= 1) return;
  // Striped over several connections: the kernel keeps little unsent per connection, so segments
  // wait in the striper for whichever connection drains first (docs/algorithms.md §1).
  const uint32_t lowat = notSentLowat();
  const uint64_t pacing = maxPacingRate();
  for (const auto& ch : channels) {
    ch->setNotSentLowat(lowat);
    ch->setMaxPacingRate(pacing);
  }
}

void Collectives::clearRing(const Status& why) {
  two_level_.reset();
  links_.clear();
  striper_.reset();
  back_striper_.reset();
  successor_.clear();
  predecessor_.clear();
  before_call_.clear();
  ring_broken_ = why.isOk() ? Status::peerLost("the ring is being rebuilt") : why;
}

Collectives::Op* Collectives::find(const OpKey& key) {
  auto it = ops_.find(key);
  return it == ops_.end() ? nullptr : it->second.get();
}

bool Collectives::isFuture(const OpKey& k) const {
  if (k.epoch != epoch_) return false;
  auto it = next_seq_.find(k.tag);
  return k.seq >= (it == next_seq_.end() ? 0 : it->second);
}

std::string Collectives::mismatch(const wire::OpDesc& theirs, const std::string& who, const wire::OpDesc& ours,
                                  const OpKey& k) const {
  return fmt::format("peers disagree on tag {}: peer {} has {}, peer {} has {}", k.tag, self_,
                     codec::describeCall(ours, k.epoch), who, codec::describeCall(theirs, k.epoch));
}

// ---- the life of one operation ------------------------------------------------------------------

void Collectives::submit(ReduceRequest req, Completion done) {
  auto holder = std::make_unique<Op>(io_, std::max<uint32_t>(world_, 1));
  Op& o = *holder;
  o.req = std::move(req);
  o.done = std::move(done);
  o.world = world_;
  const uint64_t tag = o.req.tag;
  if (by_tag_.count(tag) != 0) return finishOp(o, Status::invalidUsage(fmt::format("tag {} is already in flight", tag)));
  if (!master_gone_.isOk()) return finishOp(o, master_gone_);
  if (master_ == nullptr) return finishOp(o, Status::masterUnreachable("not connected to the master"));
  if (!ring_broken_.isOk() && successor_.empty() && world_ <= 1) {  // no ring installed: a build failed
    return finishOp(o, Status(ring_broken_.code(), ring_broken_.message() + "; call pcclUpdateTopology"));
  }
  const size_t bytes = o.req.count * codec::dtypeSize(o.req.dtype);
  if (o.req.kind == wire::Collective::kBroadcast && o.req.root >= std::max<uint32_t>(world_, 1)) {
    return finishOp(o, Status::invalidUsage(fmt::format("broadcast root {} is not a rank of this group's ring of {}",
                                                        o.req.root, std::max<uint32_t>(world_, 1))));
  }
  if ((o.req.kind == wire::Collective::kAllGather || o.req.kind == wire::Collective::kReduceScatter) &&
      o.req.count % std::max<uint32_t>(world_, 1) != 0) {
    return finishOp(o, Status::topologyChanged(fmt::format(
        "the ring changed while the {} was being called (its layout of {} elements does not split into {} blocks)",
        wire::collectiveName(o.req.kind), o.req.count, world_)));
  }
  if (world_ <= 1) {  // alone in the group: the result is the input
    if (o.req.output != o.req.input && bytes > 0) {
      if (o.req.device != nullptr) {
        Status st = deviceCopy(*o.req.device, o.req.output, o.req.input, bytes);
        if (!st.isOk()) return finishOp(o, st);
      } else {
        std::memcpy(o.req.output, o.req.input, bytes);
      }
    }
    return finishOp(o, Status::ok());
  }
  o.key = OpKey{epoch_, tag, next_seq_[tag]++};
  o.desc = wire::OpDesc{o.req.count,
                        o.req.segment_bytes,
                        static_cast<uint8_t>(o.req.dtype),
                        static_cast<uint8_t>(o.req.op),
                        static_cast<uint8_t>(o.req.quant),
                        static_cast<uint8_t>(o.req.compress),
                        static_cast<uint8_t>(chooseAlgo(o.req)),
                        static_cast<uint8_t>(o.req.kind),
                        o.req.root};
  const OpKey key = o.key;
  if (auto ended = history_.find(key)) {  // the others failed this call before we made it: so do we
    before_call_.drop(key);
    return finishOp(o, ended->isOk() ? Status::internal("a call ended twice") : *ended);
  }
  if (!ring_broken_.isOk() || successor_.empty()) {
    Status why = Status::peerLost(fmt::format("the ring's connections are down ({}); call pcclUpdateTopology",
                                              ring_broken_.isOk() ? "none" : ring_broken_.message()));
    reportFailed(key, why, true);
    history_.failed(key, why);
    return finishOp(o, why);
  }
  ops_[key] = std::move(holder);
  by_tag_[tag] = &o;
  PCCL_LOG_TRACE(kLog, "rank={} epoch={} tag={} call={}: called ({} bytes, algorithm {})", rank_, key.epoch, key.tag,
                 key.seq, o.req.count * codec::dtypeSize(o.req.dtype), o.desc.algo);
  queueAnnounce(key);
  wire::RingCtl hello;
  hello.kind = wire::RingCtl::kHello;
  hello.desc = o.desc;
  sendCtl(key, false, hello);
  o.timer.expires_at(o.req.submitted + o.req.timeout);
  o.timer.async_wait([this, key](const asio::error_code& ec) {
    if (!ec) timedOut(key);
  });
  if (o.req.count == 0) {
    o.data_in = true;
  } else if (Status st = startRing(o); !st.isOk()) {
    if (Op* p = find(key)) failOp(*p, st, FailSpread::kRingAbort | FailSpread::kTellMaster);
    return;
  }
  if (find(key) == nullptr) return;
  if (wire::isTwoLevel(o.desc.algo)) helloOthers(o, hello);
  for (const auto& [from, theirs] : before_call_.takeHellos(key)) {
    if (find(key) == nullptr) return;
    if (from == (rank_ + 1) % world_) {
      if (!onHello(o, theirs)) return;
    } else if (Status st = onOtherHello(key, from, theirs); !st.isOk()) {
      if (Op* p = find(key)) failOp(*p, st, FailSpread::kCloseRing | FailSpread::kTellMaster);
      return;
    }
  }
  if (Status st = replayBeforeCall(o); !st.isOk()) {
    if (Op* p = find(key)) failOp(*p, st, FailSpread::kCloseRing | FailSpread::kTellMaster);
    return;
  }
  if (Op* p = find(key)) maybePrepared(*p);
}

// Gather when everything a peer can receive of the call fits both the limit and the eager bytes (in a
// two-level group: twoLevelGathers); in a two-level group, two levels from the master's size on
// (TwoLevelRing::min_bytes). The choice depends on the descriptor and what the TopologyUpdate sent
// alone, so every peer makes the same one.
wire::Algo Collectives::chooseAlgo(const ReduceRequest& r) const {
  if (world_ < 2 || r.count == 0) return wire::Algo::kRing;
  const bool large = twoLevel(r) && static_cast<uint64_t>(r.count) * codec::dtypeSize(r.dtype) >= two_level_->min_bytes;
  if (r.kind != wire::Collective::kAllReduce) return large ? wire::Algo::kTwoLevel : wire::Algo::kRing;
  if (twoLevel(r) && twoLevelGathers(r)) return wire::Algo::kTwoLevelGather;
  if (gathers(world_, codec::wireBytes(r.quant, r.dtype, r.count), gather_bytes_, wire::kEagerBytes))
    return wire::Algo::kGather;
  return large ? wire::Algo::kTwoLevel : wire::Algo::kRing;
}

Status Collectives::startRing(Op& op) {
  const ReduceRequest& r = op.req;
  RingOpSpec spec;
  spec.kind = r.kind;
  spec.root = r.root;
  spec.op_id = op.key.tag;
  spec.seq = op.key.seq;
  spec.desc = op.desc;
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
  if (op.desc.algo == static_cast<uint8_t>(wire::Algo::kGather)) return startGather(op, spec);
  if (op.desc.algo == static_cast<uint8_t>(wire::Algo::kTwoLevel)) return startTwoLevel(op, spec);
  if (op.desc.algo == static_cast<uint8_t>(wire::Algo::kTwoLevelGather)) return startTwoLevelGather(op, spec);
  if (r.device != nullptr) {
    // The wire bytes in pinned memory (DMA to and from the GPU) and their mirror on the GPU.
    const size_t wire_bytes = wireRegionBytes(spec);
    auto pinned = r.device->pinned(wire_bytes);
    auto on_gpu = pinned.isOk() ? r.device->device(wire_bytes) : Result<codec::gpu::Block>(pinned.status());
    if (!on_gpu.isOk()) return on_gpu.status();
    op.wire_pinned = std::move(pinned).value();
    op.wire_device = std::move(on_gpu).value();
    spec.wire = op.wire_pinned.data();
    spec.device_wire = op.wire_device.data();
    spec.post = [this](std::function<void()> fn) { asio::post(io_, std::move(fn)); };
  } else if (spec.coded()) {
    op.wire = buffers_->acquire(wireRegionBytes(spec));
    spec.wire = op.wire.data.get();
  }
  if (r.kind == wire::Collective::kReduceScatter && r.device != nullptr) {
    auto scratch = r.device->device(r.count * codec::dtypeSize(r.dtype));
    if (!scratch.isOk()) return scratch.status();
    op.scratch_device = std::move(scratch).value();
    spec.scratch = op.scratch_device.data();
  } else if (r.kind == wire::Collective::kReduceScatter) {
    op.scratch = buffers_->acquire(r.count * codec::dtypeSize(r.dtype));
    spec.scratch = op.scratch.data.get();
  }
  const OpKey key = op.key;
  op.ring = std::make_shared<RingCollective>(spec, striper_, [this, key](const Status& s) { ringFinished(key, s); });
  auto ring = op.ring;
  ring->start();
  return Status::ok();
}

Status Collectives::startGather(Op& op, RingOpSpec spec) {
  const ReduceRequest& r = op.req;
  spec.segment_elems = gatherSegmentElems(spec, gatherSegmentFloor(one_host_));
  if (r.device != nullptr) {
    // Small by construction: the input comes to host memory, the result goes back in ringFinished.
    const size_t bytes = r.count * codec::dtypeSize(r.dtype);
    op.staged_in = buffers_->acquire(bytes);
    op.staged_out = buffers_->acquire(bytes);
    PCCL_RETURN_IF_ERROR(deviceCopy(*r.device, op.staged_in.data.get(), r.input, bytes, PCCL_GPU_COPY_D2H));
    spec.input = op.staged_in.data.get();
    spec.output = op.staged_out.data.get();
    spec.device = nullptr;
  }
  op.wire = buffers_->acquire(gatherRegionBytes(spec));
  spec.wire = op.wire.data.get();
  const OpKey key = op.key;
  op.ring = std::make_shared<GatherAllReduce>(spec, striper_, back_striper_,
                                              [this, key](const Status& s) { ringFinished(key, s); });
  auto ring = op.ring;
  ring->start();
  return Status::ok();
}

void Collectives::ringFinished(const OpKey& key, const Status& s) {
  Op* op = find(key);
  if (op == nullptr || op->state != State::kRunning) return;
  if (!s.isOk()) return failOp(*op, s, FailSpread::kCloseRing | FailSpread::kTellMaster);
  if (op->staged_out.data) {  // a gathered device operation: the result to the GPU
    const size_t bytes = op->req.count * codec::dtypeSize(op->req.dtype);
    Status st = deviceCopy(*op->req.device, op->req.output, op->staged_out.data.get(), bytes, PCCL_GPU_COPY_H2D);
    if (!st.isOk()) return failOp(*op, st, FailSpread::kRingAbort | FailSpread::kTellMaster);
  }
  op->data_in = true;
  PCCL_LOG_TRACE(kLog, "rank={} epoch={} tag={} call={}: data in", rank_, key.epoch, key.tag, key.seq);
  maybePrepared(*op);
}

void Collectives::maybePrepared(Op& op) {
  if (op.state != State::kRunning || !op.data_in || !op.successor_ok) return;
  op.state = State::kPrepared;
  PCCL_LOG_TRACE(kLog, "rank={} epoch={} tag={} call={}: prepared", rank_, op.key.epoch, op.key.tag, op.key.seq);
  applyCommit(op, op.commit.prepared());
}

void Collectives::applyCommit(Op& op, const CommitRound::Sends& s) {
  wire::RingCtl c;
  if (s.commit) {
    c.kind = wire::RingCtl::kCommit;
    sendCtl(op.key, true, c);
    sendCtl(op.key, false, c);
    return commitOp(op);
  }
  c.kind = wire::RingCtl::kPrepared;
  if (s.to_successor != 0) {
    c.value = s.to_successor;
    sendCtl(op.key, true, c);
  }
  if (s.to_predecessor != 0) {
    c.value = s.to_predecessor;
    sendCtl(op.key, false, c);
  }
}

void Collectives::commitOp(Op& op) {
  PCCL_LOG_TRACE(kLog, "rank={} epoch={} tag={} call={}: committed", rank_, op.key.epoch, op.key.tag, op.key.seq);
  history_.committed(op.key);
  reportDone(op);
  finishOp(op, Status::ok());
}

void Collectives::failOp(Op& op, const Status& why_seen, FailSpread spread) {
  if (op.state == State::kFailing) return;
  // A dead master takes the whole run down, and a neighbour that noticed first closes the ring: when our
  // own master connection is already closed too (its EOF waiting, unread), that is the cause to report.
  const Status why = why_seen.code() == Code::kPeerLost && !reconnects_ && master_ != nullptr && master_->remoteClosed()
                         ? Status::masterUnreachable(fmt::format("the connection to the master is closed (and the "
                                                                 "ring with it: {})", why_seen.message()))
                         : why_seen;
  if (op.state == State::kPrepared || op.state == State::kInDoubt) return inDoubt(op, why.message());
  op.state = State::kFailing;  // closing the ring below reports back here: do not fail twice
  history_.failed(op.key, why);
  const bool close_ring = has(spread, FailSpread::kCloseRing);
  if (has(spread, FailSpread::kTellMaster) && ready()) {
    announce(op);  // the master aborts it on every member: it must know the call
    reportFailed(op.key, why, close_ring);
  }
  if (has(spread, FailSpread::kRingAbort)) {
    wire::RingCtl c;
    c.kind = wire::RingCtl::kAbort;
    c.code = static_cast<uint16_t>(why.code());
    c.reason = why.message();
    sendCtl(op.key, true, c);
    sendCtl(op.key, false, c);
  }
  auto ring = op.ring;
  if (ring) ring->fail(why);
  if (close_ring && ring) {
    // Frames of ours may be on their way: closing the connections ends them before the buffer goes back.
    PCCL_LOG_WARN(kLog, "{} epoch={}: {} {} failed, closing the ring: {}", name_, epoch_,
                  wire::collectiveName(op.req.kind), describeKey(op.key), why.toString());
    if (ring_broken_.isOk()) ring_broken_ = why;
    reset_ring_(why);
  }
  if (!ring) return endFailed(op, why);
  const OpKey key = op.key;
  // Our frames still queued are taken back; one being written finishes first (then nothing reads the buffer).
  ring->whenQuiet([this, key, why] {
    if (Op* p = find(key)) endFailed(*p, why);
  });
}

void Collectives::endFailed(Op& op, const Status& why) {
  op.state = State::kFailing;
  history_.failed(op.key, why);
  if (op.req.saved.data) {
    std::memcpy(op.req.restore_to, op.req.saved.data.get() + op.req.restore_from, op.req.restore_bytes);
  }
  if (op.req.saved_device) {
    Status st = deviceCopy(*op.req.device, op.req.restore_to, op.req.saved_device.data() + op.req.restore_from,
                           op.req.restore_bytes);
    if (!st.isOk()) {
      PCCL_LOG_ERROR(kLog, "{} epoch={}: could not restore the device buffer of {}: {}", name_, epoch_,
                     describeKey(op.key), st.toString());
    }
  }
  finishOp(op, why);
}

void Collectives::finishOp(Op& op, const Status& s) {
  ReduceOutcome out;
  out.status = s;
  out.world_size = op.world;
  out.gathered = op.desc.algo == static_cast<uint8_t>(wire::Algo::kGather) ||
                 op.desc.algo == static_cast<uint8_t>(wire::Algo::kTwoLevelGather);
  out.hierarchical = wire::isTwoLevel(op.desc.algo);
  if (op.ring) {
    out.tx_bytes = op.ring->bytesSent();
    out.rx_bytes = op.ring->bytesReceived();
  }
  operationEnded(op.key);
  out.seconds = std::chrono::duration<double>(Clock::now() - op.req.submitted).count();
  op.timer.cancel();
  Completion done = std::move(op.done);
  buffers_->release(std::move(op.req.saved));
  buffers_->release(std::move(op.wire));
  buffers_->release(std::move(op.scratch));
  buffers_->release(std::move(op.staged_in));
  buffers_->release(std::move(op.staged_out));
  op.req.saved_device.reset();
  op.wire_pinned.reset();
  op.wire_device.reset();
  op.scratch_device.reset();
  before_call_.drop(op.key);  // frames of this call still being read are freed once read
  // Drop the bookkeeping before telling the user: the tag may be reused at once.
  std::unique_ptr<Op> keep;
  auto t = by_tag_.find(op.req.tag);
  if (t != by_tag_.end() && t->second == &op) by_tag_.erase(t);
  auto it = ops_.find(op.key);
  if (it != ops_.end() && it->second.get() == &op) {
    keep = std::move(it->second);
    ops_.erase(it);
  }
  if (done) done(out);
}

Status Collectives::deviceCopy(codec::gpu::Engine& e, void* dst, const void* src, size_t bytes, int kind) {
  return e.runNow([&](codec::gpu::JobContext& ctx) {
    return ctx.check(ctx.api.memcpy_async(dst, src, bytes, kind, ctx.stream), "device copy");
  });
}

void Collectives::timedOut(const OpKey& key) {
  Op* op = find(key);
  if (op == nullptr) return;
  Status why = Status::timeout(fmt::format("{} tag {} not finished within {} ms ({})",
                                           wire::collectiveName(op->req.kind), key.tag,
                                           op->req.timeout.count(),
                                           op->data_in ? "waiting for the other peers to finish" : "running"));
  if (op->state == State::kFailing) return;  // ends when its frames are quiet
  if (op->state != State::kRunning) return inDoubt(*op, why.message());
  // The others hear it (ring abort and master); a frame still being written (a successor that does
  // not read) closes the ring, so the call returns on time.
  failOp(*op, why, FailSpread::kRingAbort | FailSpread::kTellMaster);
  if (Op* p = find(key); p != nullptr && p->ring && p->ring->sendsInFlight() > 0) {
    if (ring_broken_.isOk()) ring_broken_ = why;
    reset_ring_(why);
  }
}

void Collectives::failAll(const Status& why) {
  // Failing the first running operation closes the ring, which reports back through channelClosed:
  // the operations still running then fail with `why` as well, not with the ring's loss.
  failing_all_ = why;
  std::vector<OpKey> keys;
  for (const auto& kv : ops_) keys.push_back(kv.first);
  for (const OpKey& k : keys) {
    Op* op = find(k);
    if (op == nullptr || op->state == State::kFailing) continue;
    if (op->state == State::kRunning) {
      failOp(*op, why, FailSpread::kCloseRing);
    } else {
      endFailed(*op, why);  // prepared or in doubt: we are leaving, nobody can settle it for us
    }
  }
  failing_all_ = Status::ok();
}

}  // namespace pccl::collective
