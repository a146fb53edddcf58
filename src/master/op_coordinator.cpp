#include "master/op_coordinator.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "codec/dtype.hpp"
#include "master/tag_divergence.hpp"
#include "util/log.hpp"

namespace pccl::master {

namespace {
constexpr const char* kLog = "master";
using wire::shortId;

// The call and configuration every member must agree on (the epoch is checked on its own: a
// different epoch is a race with a ring change, not a disagreement).
bool sameOp(const wire::OpAnnounce& a, const wire::OpAnnounce& b) {
  return a.count == b.count && a.dtype == b.dtype && a.op == b.op && a.quant == b.quant && a.compress == b.compress &&
         a.segment_bytes == b.segment_bytes;
}

void sendTo(Effects& fx, const std::vector<wire::Uuid>& to, const std::vector<uint8_t>& frame) {
  for (const auto& id : to) fx.push_back(Outgoing{id, frame});
}
}  // namespace

std::string OpCoordinator::describe(const wire::OpAnnounce& a) {
  return fmt::format("count={} dtype={} op={} quant={} compress={} epoch={} segment_bytes={}", a.count,
                     codec::dtypeName(static_cast<codec::DType>(a.dtype)),
                     codec::redOpName(static_cast<codec::RedOp>(a.op)),
                     codec::quantName(static_cast<codec::Quant>(a.quant)), a.compress, a.epoch, a.segment_bytes);
}

Effects OpCoordinator::announce(const wire::Uuid& peer, uint32_t group, const std::vector<wire::Uuid>& members,
                                uint64_t epoch, const Status& blocked, const wire::OpAnnounce& a) {
  Effects fx;
  const Key key{group, a.tag};
  auto it = pending_.find(key);
  if (it == pending_.end()) {
    if (pending_.size() + running_.size() >= max_ops_) {
      wire::OpAbort abort;
      abort.tag = a.tag;
      abort.code = static_cast<uint16_t>(Code::kInvalidUsage);
      abort.reason = fmt::format("tag {}: {} operations are in flight in this run, the master's limit "
                                 "(max_concurrent_ops)",
                                 a.tag, max_ops_);
      fx.push_back(Outgoing{peer, wire::encodeFrame(abort, epoch)});
      return fx;
    }
    it = pending_.emplace(key, Pending{members, {}, std::nullopt, {}}).first;
  }
  changed_.insert(group);
  Pending& p = it->second;
  if (p.announced.count(peer) != 0) {
    abortPending(fx, key, Code::kInvalidUsage,
                 fmt::format("peer {} announced tag {} twice before it started", shortId(peer), a.tag));
    return fx;
  }
  p.announced[peer] = a;
  // Why no collective can run comes first: after a failed ring build every peer is an epoch behind
  // the master, and the build's failure is what they need to hear.
  if (!blocked.isOk()) {
    abortPending(fx, key, blocked.code(), fmt::format("tag {}: {}", a.tag, blocked.message()));
    return fx;
  }
  if (a.epoch != epoch) {
    abortPending(fx, key, Code::kTopologyChanged,
                 fmt::format("peer {} runs tag {} on the ring of epoch {}, but the ring is at epoch {}: call "
                             "pcclUpdateTopology",
                             shortId(peer), a.tag, a.epoch, epoch));
    return fx;
  }
  if (std::find(p.members.begin(), p.members.end(), peer) == p.members.end()) {
    abortPending(fx, key, Code::kInvalidUsage, fmt::format("peer {} is not in the ring of tag {}", shortId(peer), a.tag));
    return fx;
  }
  if (p.announced.size() < p.members.size()) return fx;

  // Everyone announced: agree, or say exactly who differs.
  const auto& [first_peer, first] = *p.announced.begin();
  for (const auto& [who, desc] : p.announced) {
    if (!sameOp(desc, first)) {
      abortPending(fx, key, Code::kMismatch,
                   fmt::format("peers disagree on tag {}: peer {} has {}, peer {} has {}", a.tag, shortId(first_peer),
                               describe(first), shortId(who), describe(desc)));
      return fx;
    }
  }
  const uint64_t op_id = ++next_op_id_;
  running_[op_id] = Running{a.tag, p.members, {}};
  pending_.erase(it);
  changed_.insert(group);
  PCCL_LOG_DEBUG(kLog, "epoch={} tag={}: op {} ({}) starts on {} peers", epoch, a.tag, op_id, describe(a), running_[op_id].members.size());
  sendTo(fx, running_[op_id].members, wire::encodeFrame(wire::OpStart{a.tag, op_id}, epoch));
  return fx;
}

Effects OpCoordinator::done(const wire::Uuid& peer, uint64_t op_id) {
  Effects fx;
  auto it = running_.find(op_id);
  if (it == running_.end()) return fx;  // already aborted
  Running& r = it->second;
  r.done.insert(peer);
  if (r.done.size() < r.members.size()) return fx;
  sendTo(fx, r.members, wire::encodeFrame(wire::OpComplete{op_id}, 0));
  running_.erase(it);
  return fx;
}

Effects OpCoordinator::failed(const wire::Uuid& peer, uint64_t op_id, Code code, const std::string& reason,
                              bool* aborted) {
  Effects fx;
  *aborted = false;
  auto it = running_.find(op_id);
  if (it == running_.end()) return fx;
  const auto& m = it->second.members;
  if (std::find(m.begin(), m.end(), peer) == m.end()) return fx;  // not its operation
  *aborted = true;
  abortRunning(fx, op_id, code, fmt::format("peer {} failed: {}", shortId(peer), reason));
  return fx;
}

Effects OpCoordinator::withdraw(const wire::Uuid& peer, uint32_t group, uint64_t tag, Code code,
                                const std::string& reason) {
  Effects fx;
  auto it = pending_.find(Key{group, tag});
  if (it == pending_.end() || it->second.announced.count(peer) == 0) return fx;
  abortPending(fx, it->first, code, fmt::format("peer {} gave up on tag {}: {}", shortId(peer), tag, reason));
  return fx;
}

Effects OpCoordinator::peerGone(const wire::Uuid& peer, const std::string& why) {
  Effects fx;
  const std::string reason = fmt::format("peer {} left the run ({})", shortId(peer), why);
  std::vector<uint64_t> ops;
  for (const auto& [id, r] : running_) {
    if (std::find(r.members.begin(), r.members.end(), peer) != r.members.end()) ops.push_back(id);
  }
  for (uint64_t id : ops) abortRunning(fx, id, Code::kPeerLost, reason);
  std::vector<Key> keys;
  for (const auto& [key, p] : pending_) {
    if (std::find(p.members.begin(), p.members.end(), peer) != p.members.end()) keys.push_back(key);
  }
  for (const Key& k : keys) abortPending(fx, k, Code::kPeerLost, reason);
  return fx;
}

Effects OpCoordinator::voteStarted(const wire::Uuid& voter) {
  Effects fx;
  std::vector<Key> keys;
  for (const auto& [key, p] : pending_) keys.push_back(key);
  for (const Key& k : keys) {
    abortPending(fx, k, Code::kTopologyChanged,
                 fmt::format("tag {}: peer {} called pcclUpdateTopology while others started this collective",
                             k.second, shortId(voter)));
  }
  return fx;
}

Effects OpCoordinator::tick(TimePoint now) {
  Effects fx;
  if (window_.count() == 0) {
    changed_.clear();
    return fx;
  }
  const std::set<uint32_t> changed = std::move(changed_);
  changed_.clear();
  for (uint32_t g : changed) checkCrossings(g, now);
  std::vector<Key> expired;
  for (const auto& [key, p] : pending_) {
    if (p.crossed_since && now - *p.crossed_since >= window_) expired.push_back(key);
  }
  for (const Key& k : expired) {
    auto it = pending_.find(k);
    if (it == pending_.end()) continue;
    const auto waited = std::chrono::duration_cast<Millis>(now - *it->second.crossed_since).count();
    abortPending(fx, k, Code::kMismatch,
                 fmt::format("tags diverge: {}, for {} ms (announce_window_ms {}); every peer of the group must "
                             "call the same tags (compute them alike on every peer)",
                             it->second.crossed_why, waited, window_.count()));
  }
  return fx;
}

void OpCoordinator::checkCrossings(uint32_t group, TimePoint now) {
  std::map<uint64_t, std::set<wire::Uuid>> announced;
  const std::vector<wire::Uuid>* members = nullptr;
  for (const auto& [key, p] : pending_) {
    if (key.first != group) continue;
    members = &p.members;  // the same for every pending tag of a group: a ring change clears them all
    for (const auto& kv : p.announced) announced[key.second].insert(kv.first);
  }
  if (members == nullptr) return;
  std::map<uint64_t, CrossedTag> crossed;
  for (CrossedTag& t : findCrossedTags(announced, *members)) crossed.emplace(t.tag, std::move(t));
  for (auto& [key, p] : pending_) {
    if (key.first != group) continue;
    auto c = crossed.find(key.second);
    if (c == crossed.end()) {
      p.crossed_since.reset();
      continue;
    }
    if (!p.crossed_since) p.crossed_since = now;
    p.crossed_why = describeCrossedTag(c->second, announced[key.second], p.members);
  }
}

void OpCoordinator::abortPending(Effects& fx, const Key& key, Code code, const std::string& reason) {
  auto it = pending_.find(key);
  if (it == pending_.end()) return;
  changed_.insert(key.first);
  PCCL_LOG_WARN(kLog, "tag={}: collective aborted before it started: {}", key.second, reason);
  wire::OpAbort ab{key.second, 0, static_cast<uint16_t>(code), reason};
  // Everyone who announced must hear it; members who announce later start a fresh round.
  std::vector<wire::Uuid> to;
  for (const auto& kv : it->second.announced) to.push_back(kv.first);
  pending_.erase(it);
  sendTo(fx, to, wire::encodeFrame(ab, 0));
}

void OpCoordinator::abortRunning(Effects& fx, uint64_t op_id, Code code, const std::string& reason) {
  auto it = running_.find(op_id);
  if (it == running_.end()) return;
  PCCL_LOG_WARN(kLog, "tag={}: collective op {} aborted: {}", it->second.tag, op_id, reason);
  wire::OpAbort ab{it->second.tag, op_id, static_cast<uint16_t>(code), reason};
  std::vector<wire::Uuid> to = it->second.members;
  running_.erase(it);
  sendTo(fx, to, wire::encodeFrame(ab, 0));
}

}  // namespace pccl::master
