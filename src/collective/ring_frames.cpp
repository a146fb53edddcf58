// Collectives, the ring's side: where each incoming frame goes (the running operation, the frames kept
// for a call not made yet, or nowhere), the control frames of the commit round, and ring aborts.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "collective/collectives.hpp"
#include "util/log.hpp"

namespace pccl::collective {

namespace {
constexpr const char* kLog = "collective";
constexpr uint32_t kMaxCtlBytes = 4096;
}  // namespace

bool Collectives::ours(const net::DataChannel& ch, const Channels& list) const {
  return std::any_of(list.begin(), list.end(), [&](const auto& c) { return c.get() == &ch; });
}

void Collectives::sendCtl(const OpKey& k, bool to_successor, const wire::RingCtl& c) {
  if (ctl_hook_ && !ctl_hook_(k.tag, c.kind)) return;
  sendCtlOn(to_successor ? successor_ : predecessor_, k, c);
}

void Collectives::sendCtlOn(const Channels& list, const OpKey& k, const wire::RingCtl& c) {
  if (list.empty() || k.epoch != epoch_) return;
  // The least loaded connection: a control frame must not wait behind megabytes of data.
  net::DataChannel* best = nullptr;
  uint64_t best_load = 0;
  for (const auto& ch : list) {
    if (!ch->isOpen()) continue;
    const uint64_t load = ch->backlog();
    if (best == nullptr || load < best_load) {
      best = ch.get();
      best_load = load;
    }
  }
  if (best == nullptr) return;
  wire::DataHeader h = wire::dataHeader(k.tag, 0, wire::kDataControl, 0);
  h.seq = k.seq;
  best->sendOwned(h, wire::encodeRingCtl(c));
}

Result<net::Placement> Collectives::place(net::DataChannel& ch, const wire::DataHeader& h, uint32_t bytes) {
  const bool from_pred = ours(ch, predecessor_);
  const int64_t from = rankOf(ch);
  if (from < 0) {
    return Status::protocol(fmt::format("{}: frame on a connection that is not part of the ring", ch.name()));
  }
  if ((h.flags & wire::kDataRequest) != 0) {
    return Status::protocol(fmt::format("{}: a shared-state request on a ring connection", ch.name()));
  }
  if ((h.flags & wire::kDataControl) != 0) {
    if (bytes > kMaxCtlBytes) return Status::protocol(fmt::format("{}: control frame of {} bytes", ch.name(), bytes));
    return net::Placement::stage();
  }
  const bool two_level = wire::isTwoLevel(h.desc.algo);
  if (two_level && !two_level_) {
    return Status::protocol(fmt::format("{}: a two-level data frame on a flat ring", ch.name()));
  }
  if (!from_pred && !two_level && !(h.desc.algo == static_cast<uint8_t>(wire::Algo::kGather) && ours(ch, successor_))) {
    return Status::protocol(fmt::format("{}: data frame from the successor", ch.name()));
  }
  const OpKey key = keyOf(h);
  if (Op* op = find(key)) {
    if (op->state == State::kFailing) return net::Placement::discard();
    if (op->state != State::kRunning || !op->ring) {
      return Status::protocol(fmt::format("{}: data for {} after all of it arrived", ch.name(), describeKey(key)));
    }
    auto p = placeData(*op, ch.name(), static_cast<uint32_t>(from), h, bytes);
    if (!p.isOk()) return p.status();
    return *p == nullptr ? net::Placement::discard() : net::Placement::direct(*p);
  }
  if (history_.find(key) || !isFuture(key)) return net::Placement::discard();  // a call that ended here
  auto p = before_call_.add(key, h, bytes, &ch, static_cast<uint32_t>(from));
  if (!p.isOk()) return p.status().withContext(ch.name());
  return net::Placement::direct(*p);
}

// nullptr: the frame is discarded (the operation just failed on a mismatch).
Result<uint8_t*> Collectives::placeData(Op& op, const std::string& from, uint32_t from_rank, const wire::DataHeader& h,
                                        uint32_t bytes) {
  if (h.desc != op.desc) {
    // The sender made another call under this tag: nothing of it is combined with ours.
    failOp(op, Status::mismatch(mismatch(h.desc, rankName(from_rank), op.desc, op.key)),
           FailSpread::kRingAbort | FailSpread::kTellMaster);
    return static_cast<uint8_t*>(nullptr);
  }
  auto ring = op.ring;
  auto p = ring->placementFrom(from_rank, h, bytes);
  if (!p.isOk()) return p.status().withContext(from);
  return *p;
}

Status Collectives::deliver(net::DataChannel& ch, const wire::DataHeader& h, const uint8_t* data, uint32_t bytes) {
  if (ch.lentFrame() && read_hook_) read_hook_(bytes);
  if ((h.flags & wire::kDataControl) != 0) {
    auto c = wire::decodeRingCtl(data, bytes);
    if (!c.isOk()) return c.status().withContext(ch.name());
    Status st = onCtl(ch, h, *c);
    return st.isOk() ? st : st.withContext(ch.name());
  }
  if (auto early = before_call_.delivered(&ch)) {  // kept for a call not made yet; it may have been made meanwhile
    Op* op = find(*early);
    if (op == nullptr || op->state != State::kRunning) return Status::ok();
    Status st = replayBeforeCall(*op);
    return st.isOk() ? st : st.withContext(ch.name());
  }
  Op* op = find(keyOf(h));
  if (op == nullptr || op->state != State::kRunning || !op->ring) return Status::ok();
  auto ring = op->ring;
  Status st = ring->delivered(h, bytes);
  return st.isOk() ? st : st.withContext(ch.name());
}

// Frames kept before the call, now that it is made: placed, copied and delivered as if just arrived.
Status Collectives::replayBeforeCall(Op& op) {
  const OpKey key = op.key;
  for (auto& f : before_call_.takeComplete(key)) {
    Op* p = find(key);
    if (p == nullptr || p->state != State::kRunning || !p->ring) return Status::ok();
    const int64_t from = rankOfChannel(f.channel);
    if (from < 0) continue;  // its connection belongs to no ring of ours any more
    auto dst = placeData(*p, "an early frame", static_cast<uint32_t>(from), f.header,
                         static_cast<uint32_t>(f.payload.size()));
    if (!dst.isOk()) return dst.status();
    if (*dst == nullptr) return Status::ok();
    std::memcpy(*dst, f.payload.data(), f.payload.size());
    auto ring = p->ring;
    PCCL_RETURN_IF_ERROR(ring->delivered(f.header, static_cast<uint32_t>(f.payload.size())));
  }
  return Status::ok();
}

Status Collectives::onCtl(const net::DataChannel& ch, const wire::DataHeader& h, const wire::RingCtl& c) {
  const OpKey key = keyOf(h);
  Op* op = find(key);
  const bool from_successor = ours(ch, successor_);
  const bool from_predecessor = ours(ch, predecessor_);
  if (c.kind != wire::RingCtl::kHello && !from_successor && !from_predecessor) {
    return Status::protocol("a commit-round frame from a peer that is not a ring neighbour");
  }
  switch (c.kind) {
    case wire::RingCtl::kHello:
      if (!from_successor) {  // a two-level call's hello from a peer that sends us its data
        if (!two_level_ || !wire::isTwoLevel(c.desc.algo)) {
          return Status::protocol("a hello from a peer that is not our successor");
        }
        const uint32_t from = static_cast<uint32_t>(rankOf(ch));
        if (op != nullptr) return onOtherHello(key, from, c.desc);
        if (isFuture(key) && !history_.find(key)) before_call_.hello(key, c.desc, from);
        return Status::ok();
      }
      if (op != nullptr) onHello(*op, c.desc);
      if (isFuture(key) && !history_.find(key)) before_call_.hello(key, c.desc, (rank_ + 1) % world_);
      return Status::ok();
    case wire::RingCtl::kPrepared:
      if (op == nullptr || op->state == State::kFailing) return Status::ok();
      if (c.value == 0) return Status::protocol("a prepared streak of 0");
      applyCommit(*op, from_predecessor ? op->commit.fromPredecessor(c.value) : op->commit.fromSuccessor(c.value));
      return Status::ok();
    case wire::RingCtl::kCommit:
      if (op == nullptr || op->state == State::kFailing) return Status::ok();
      if (op->state == State::kRunning) {
        return Status::protocol(fmt::format("a commit of {} before this peer held all its data", describeKey(key)));
      }
      applyCommit(*op, op->commit.commitReceived());
      return Status::ok();
    case wire::RingCtl::kAbort:
      onRingAbort(key, c, from_predecessor);
      return Status::ok();
  }
  return Status::protocol("unknown ring control frame");
}

bool Collectives::onHello(Op& op, const wire::OpDesc& theirs) {
  if (op.state != State::kRunning) return true;
  if (theirs != op.desc) {
    failOp(op, Status::mismatch(mismatch(theirs, successor_id_, op.desc, op.key)),
           FailSpread::kRingAbort | FailSpread::kTellMaster);
    return false;
  }
  op.successor_ok = true;
  PCCL_LOG_TRACE(kLog, "rank={} epoch={} tag={} call={}: the successor's hello", rank_, op.key.epoch, op.key.tag,
                 op.key.seq);
  if (op.ring) {
    auto ring = op.ring;
    ring->successorReady();
  }
  if (Op* p = find(op.key)) maybePrepared(*p);
  return true;
}

// A peer that was not prepared failed the operation and told its neighbours: nobody can have
// committed, so it fails here too, whatever our state, and the news goes on around the ring.
void Collectives::onRingAbort(const OpKey& key, const wire::RingCtl& c, bool from_predecessor) {
  if (history_.find(key)) return;  // ended here already: we passed it on then, or the ring is closed
  const Status why(wire::codeFromWire(c.code, Code::kPeerLost), c.reason);
  Op* op = find(key);
  if (op == nullptr && !isFuture(key)) return;
  sendCtl(key, from_predecessor, c);
  if (op == nullptr) {
    history_.failed(key, why);  // we have not made this call yet: it fails when we do
    before_call_.drop(key);
    return;
  }
  if (op->state == State::kFailing) return;
  if (op->state == State::kRunning) return failOp(*op, why, FailSpread::kHere);
  op->state = State::kFailing;
  endFailed(*op, why);
}

void Collectives::operationEnded(const OpKey& key) {
  if (key.epoch != epoch_) return;  // an old ring's: its connections are closed
  auto end = [&](const Channels& list) {
    for (const auto& ch : list) ch->operationEnded(key.tag, key.seq);
  };
  end(successor_);
  end(predecessor_);
  for (const Link& l : links_) end(l.peer.channels);
}

// A resumable connection broke while a frame's payload was being read into the place we gave it: the
// frame comes again after the resume, and is placed again then.
void Collectives::abandoned(net::DataChannel& ch, const wire::DataHeader& h) {
  before_call_.abandoned(&ch);
  const int64_t from = rankOf(ch);
  Op* op = find(keyOf(h));
  if (from < 0 || op == nullptr || op->state != State::kRunning || !op->ring || (h.flags & wire::kDataControl) != 0) {
    return;
  }
  auto ring = op->ring;
  ring->withdraw(static_cast<uint32_t>(from), h);
}

void Collectives::channelClosed(net::DataChannel& ch, const Status& why) {
  before_call_.channelClosed(&ch);
  if (rankOf(ch) < 0) return;  // an old ring's connection
  if (ring_broken_.isOk()) {
    ring_broken_ = why.isOk() ? Status::peerLost(ch.name() + " closed") : why;
    PCCL_LOG_DEBUG(kLog, "{} epoch={}: ring connection lost: {}", name_, epoch_, ring_broken_.toString());
  }
  std::vector<OpKey> keys;
  for (const auto& kv : ops_) keys.push_back(kv.first);
  const bool ours_failing = !failing_all_.isOk();  // failAll() closed the ring: its reason, and the master knows
  for (const OpKey& k : keys) {
    Op* op = find(k);
    if (op == nullptr || op->state == State::kFailing) continue;
    failOp(*op,
           ours_failing ? failing_all_
                        : Status::peerLost(fmt::format("ring connection lost: {}", ring_broken_.message())),
           FailSpread::kCloseRing | (ours_failing ? FailSpread::kHere : FailSpread::kTellMaster));
  }
}

}  // namespace pccl::collective
