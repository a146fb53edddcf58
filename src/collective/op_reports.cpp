// Collectives, the master's side (docs/protocol.md §5.3, docs/algorithms.md §2): what a peer tells the
// master about its calls, through the MasterPort that api/ implements over the control connection, and
// what the master tells it: aborts, queries, the outcome of a call in doubt, its loss and its return.
//
// Nothing here is waited for. A call is announced only once it has run for kAnnounceAfter (one timer
// for all calls, armed by the first call made while it is idle), or earlier when it fails or falls in
// doubt; a call that commits sooner is never seen by the master, which on fast links is almost every
// call: two messages per call and peer less, and the master process stays asleep.
#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "collective/collectives.hpp"
#include "util/log.hpp"

namespace pccl::collective {

namespace {
constexpr const char* kLog = "collective";
}  // namespace

// ---- what the master hears ------------------------------------------------------------------------

void Collectives::queueAnnounce(const OpKey& key) {
  unannounced_.push_back(key);
  if (announce_armed_) return;
  announce_armed_ = true;
  announce_timer_.expires_after(kAnnounceAfter);
  // Cancelled only by destruction: then nothing of `this` is touched.
  announce_timer_.async_wait([this](const asio::error_code& ec) {
    if (ec) return;
    announce_armed_ = false;
    announceWaiting();
  });
}

// Every call made since the timer was armed and still going is announced, in the order made.
void Collectives::announceWaiting() {
  std::vector<OpKey> keys;
  keys.swap(unannounced_);
  for (const OpKey& k : keys) {
    if (Op* op = find(k)) announce(*op);
  }
}

void Collectives::announce(Op& op) {
  if (op.announced || !ready()) return;
  op.announced = true;
  wire::OpAnnounce a;
  a.tag = op.key.tag;
  a.seq = op.key.seq;
  a.count = op.desc.count;
  a.dtype = op.desc.dtype;
  a.op = op.desc.op;
  a.quant = op.desc.quant;
  a.compress = op.desc.compress;
  a.epoch = op.key.epoch;
  a.segment_bytes = op.desc.segment_bytes;
  a.algo = op.desc.algo;
  a.kind = op.desc.kind;
  a.root = op.desc.root;
  master_->announce(a, epoch_);
}

void Collectives::reportDone(const Op& op) {
  if (ready() && op.announced) master_->reportDone(wire::OpDone{op.key.tag, op.key.seq}, epoch_);
}

void Collectives::reportFailed(const OpKey& key, const Status& why, bool ring_closed) {
  if (!ready()) return;
  master_->reportFailed(wire::OpFailed{key.tag, key.seq, static_cast<uint16_t>(why.code()),
                                       static_cast<uint8_t>(ring_closed ? 1 : 0), why.message()},
                        epoch_);
}

// ---- a call in doubt --------------------------------------------------------------------------------

// A failure after this peer was prepared: it holds the result, and some peer may already have
// committed, so it must not fail on its own. The master asks every peer and answers.
void Collectives::inDoubt(Op& op, const std::string& why) {
  if (op.state == State::kInDoubt) return;
  op.state = State::kInDoubt;
  PCCL_LOG_WARN(kLog, "{} epoch={}: {} is in doubt ({}): asking the master how it ended", name_, epoch_,
                describeKey(op.key), why);
  if (master_ == nullptr) {
    return endFailed(op, master_gone_.isOk() ? Status::masterUnreachable("the master is gone") : master_gone_);
  }
  // It waits for the master's answer until its own deadline, or kDoubtGrace when that came first;
  // meanwhile it asks again every kAskAgainEvery (a query or answer may be lost with a connection).
  op.doubt_deadline = std::max(op.req.submitted + op.req.timeout, Clock::now() + kDoubtGrace);
  armDoubtTimer(op);
  if (!ready()) return;  // the master is away: asked when it is back (masterBack), or by the timer
  askOutcome(op);
}

void Collectives::armDoubtTimer(Op& op) {
  op.timer.expires_at(std::min(op.doubt_deadline, Clock::now() + kAskAgainEvery));  // cancels the op's deadline
  const OpKey key = op.key;
  op.timer.async_wait([this, key](const asio::error_code& ec) {
    if (!ec) stillInDoubt(key);
  });
}

void Collectives::stillInDoubt(const OpKey& key) {
  Op* op = find(key);
  if (op == nullptr || op->state != State::kInDoubt) return;
  if (Clock::now() < op->doubt_deadline) {
    if (ready()) askOutcome(*op);
    return armDoubtTimer(*op);
  }
  const auto waited = std::chrono::duration_cast<Millis>(Clock::now() - op->req.submitted).count();
  endFailed(*op, Status::timeout(fmt::format(
                     "{} {} was in doubt (this peer held its result when the commit round was cut short) and the "
                     "master did not say how it ended within {} ms of the call (op_timeout_ms {}): the other peers "
                     "may have committed it; the input is restored",
                     wire::collectiveName(op->req.kind), describeKey(key), waited, op->req.timeout.count())));
}

// The master settles an operation in doubt: it must know the call, then hear that we are prepared.
void Collectives::askOutcome(Op& op) {
  announce(op);
  master_->reportState(
      wire::OpState{op.key.epoch, op.key.tag, op.key.seq, static_cast<uint8_t>(wire::OpPhase::kPrepared)}, epoch_);
}

// ---- what the master says ---------------------------------------------------------------------------

void Collectives::onAbort(const wire::OpAbort& m, uint64_t epoch) {
  if (epoch != epoch_) return;  // an operation of another ring: none of ours is in flight
  const OpKey key{epoch_, m.tag, m.seq};
  const Status why(wire::codeFromWire(m.code, Code::kPeerLost), m.reason);
  Op* op = find(key);
  if (op == nullptr) {
    if (isFuture(key) && !history_.find(key)) {
      history_.failed(key, why);  // we have not made this call yet: it fails when we do
      before_call_.drop(key);
    }
    return;
  }
  // A member that left broke the ring: close it. Other aborts leave the ring to the next operation.
  failOp(*op, why, why.code() == Code::kPeerLost ? FailSpread::kCloseRing : FailSpread::kHere);
}

void Collectives::onQuery(const wire::OpQuery& m) {
  const OpKey key{m.epoch, m.tag, m.seq};
  wire::OpPhase phase = wire::OpPhase::kUnknown;
  Op* op = find(key);
  if (op != nullptr && op->state == State::kRunning) {
    // Another peer is in doubt and we are not prepared: no peer can have committed. Failing here
    // settles it: every peer fails the operation.
    failOp(*op, Status::peerLost(fmt::format("{} failed: another peer lost its ring while this peer still waited "
                                             "for data; call pcclUpdateTopology and retry", describeKey(key))),
           FailSpread::kCloseRing);
    phase = wire::OpPhase::kFailed;
  } else if (op != nullptr && op->state == State::kFailing) {
    phase = wire::OpPhase::kFailed;
  } else if (op != nullptr) {
    phase = wire::OpPhase::kPrepared;
  } else if (auto ended = history_.find(key)) {
    phase = ended->isOk() ? wire::OpPhase::kCommitted : wire::OpPhase::kFailed;
  } else if (isFuture(key)) {
    history_.failed(key, Status::peerLost(fmt::format("{} failed on the other peers before this peer called it; "
                                                      "call pcclUpdateTopology and retry", describeKey(key))));
    before_call_.drop(key);
    phase = wire::OpPhase::kFailed;
  }
  if (ready()) master_->reportState(wire::OpState{m.epoch, m.tag, m.seq, static_cast<uint8_t>(phase)}, epoch_);
}

void Collectives::onOutcome(const wire::OpOutcome& m) {
  Op* op = find(OpKey{m.epoch, m.tag, m.seq});
  if (op == nullptr || (op->state != State::kPrepared && op->state != State::kInDoubt)) return;
  if (m.committed != 0) return commitOp(*op);
  endFailed(*op, Status(wire::codeFromWire(m.code, Code::kPeerLost), m.reason));
}

void Collectives::masterBack() {
  if (!ready()) return;
  std::vector<OpKey> keys;
  for (const auto& kv : ops_) keys.push_back(kv.first);
  for (const OpKey& k : keys) {
    Op* op = find(k);
    if (op == nullptr || op->state == State::kFailing) continue;
    op->announced = false;  // the master that heard of it is gone
    if (op->state == State::kInDoubt) {
      askOutcome(*op);
    } else {
      announce(*op);
    }
  }
}

void Collectives::linkLost(const Status& why) {
  master_gone_ = why.isOk() ? Status::masterUnreachable("the connection to the master is closed") : why;
  failAll(master_gone_);
  master_ = nullptr;
}

}  // namespace pccl::collective
