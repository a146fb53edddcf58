#include "master/op_coordinator.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "codec/describe.hpp"
#include "codec/dtype.hpp"
#include "master/tag_divergence.hpp"
#include "util/log.hpp"

namespace pccl::master {

namespace {
constexpr const char* kLog = "master";
using wire::shortId;
}  // namespace

bool OpCoordinator::Entry::isMember(const wire::Uuid& p) const {
  return std::find(members.begin(), members.end(), p) != members.end();
}

std::string OpCoordinator::describe(const wire::OpAnnounce& a) { return codec::describeCall(a.desc(), a.epoch); }

size_t OpCoordinator::pendingCount() const {
  return static_cast<size_t>(
      std::count_if(entries_.begin(), entries_.end(), [](const auto& kv) { return kv.second.pending(); }));
}

Effects OpCoordinator::announce(const wire::Uuid& peer, uint32_t group, const std::vector<wire::Uuid>& members,
                                uint64_t epoch, const Status& blocked, const wire::OpAnnounce& a) {
  Effects fx;
  const Key key{group, a.tag, a.seq};
  if (const wire::OpAbort* ab = abortedBefore(key, a.epoch)) {
    // It was aborted while this peer could not hear it (its old connection, before it came back on a
    // new one): it hears it now, and nobody else again.
    fx.push_back(Outgoing{peer, wire::encodeFrame(*ab, a.epoch)});
    return fx;
  }
  auto it = entries_.find(key);
  if (it != entries_.end() && it->second.epoch < a.epoch && a.epoch == epoch) {
    // The same (tag, call) on an older ring, whose last reports were lost: that ring is gone.
    PCCL_LOG_DEBUG(kLog, "tag={} call={}: dropping the books of its epoch {} call (epoch {} now)", a.tag, a.seq,
                   it->second.epoch, epoch);
    entries_.erase(it);
    it = entries_.end();
  }
  endEarlierCalls(peer, group, a);
  if (it == entries_.end()) {
    if (entries_.size() >= max_ops_) {
      wire::OpAbort abort{a.tag, a.seq, static_cast<uint16_t>(Code::kInvalidUsage),
                          fmt::format("tag {}: {} operations are in flight in this run, the master's limit "
                                      "(max_concurrent_ops)",
                                      a.tag, max_ops_)};
      fx.push_back(Outgoing{peer, wire::encodeFrame(abort, a.epoch)});
      return fx;
    }
    Entry e;
    e.epoch = a.epoch;
    e.members = members;
    it = entries_.emplace(key, std::move(e)).first;
  }
  changed_.insert(group);
  Entry& e = it->second;
  if (auto prev = e.announced.find(peer); prev != e.announced.end()) {
    // A peer announces a call again when it came back to the master on a new connection (the master
    // may still have held its old one): the same call, nothing new.
    if (prev->second.desc() == a.desc() && prev->second.epoch == a.epoch) return fx;
    abort(fx, key, Code::kInvalidUsage,
          fmt::format("peer {} announced tag {} (call {}) twice, differently: {}, then {}", shortId(peer), a.tag, a.seq,
                      describe(prev->second), describe(a)));
    return fx;
  }
  e.announced[peer] = a;
  // Why no collective can run comes first: after a failed ring build every peer is an epoch behind
  // the master, and the build's failure is what they need to hear.
  if (!blocked.isOk()) {
    abort(fx, key, blocked.code(), fmt::format("tag {}: {}", a.tag, blocked.message()));
    return fx;
  }
  if (a.epoch != epoch) {
    abort(fx, key, Code::kTopologyChanged,
          fmt::format("peer {} runs tag {} on the ring of epoch {}, but the ring is at epoch {}: call "
                      "pcclUpdateTopology",
                      shortId(peer), a.tag, a.epoch, epoch));
    return fx;
  }
  if (!e.isMember(peer)) {
    abort(fx, key, Code::kInvalidUsage, fmt::format("peer {} is not in the ring of tag {}", shortId(peer), a.tag));
    return fx;
  }
  const auto& [first_peer, first] = *e.announced.begin();
  // The epoch is checked on its own above: a different epoch is a race with a ring change.
  if (a.desc() != first.desc()) {
    abort(fx, key, Code::kMismatch,
          fmt::format("peers disagree on tag {}: peer {} has {}, peer {} has {}", a.tag, shortId(first_peer),
                      describe(first), shortId(peer), describe(a)));
    return fx;
  }
  if (!e.pending()) {
    PCCL_LOG_DEBUG(kLog, "epoch={} tag={} call={}: every member called it ({}) ({} peers)", epoch, a.tag, a.seq,
                   describe(a), e.members.size());
  }
  return fx;
}

Effects OpCoordinator::done(const wire::Uuid& peer, uint32_t group, const wire::OpDone& m) {
  Effects fx;
  auto it = entries_.find(Key{group, m.tag, m.seq});
  if (it == entries_.end()) return fx;  // aborted meanwhile
  Entry& e = it->second;
  if (!e.isMember(peer)) {
    PCCL_LOG_WARN(kLog, "peer {} reported tag {} (call {}) done, but is not one of its members: ignored",
                  shortId(peer), m.tag, m.seq);
    return fx;
  }
  // Members announce only calls still running a moment after they were made (docs/protocol.md §5.3),
  // and report done only those: the entry goes once every member that announced it is done. Not at
  // the first OpDone: a member still waiting (prepared, its commit stuck behind a frozen neighbour)
  // has announced, and needs the entry for the abort that settles it when that neighbour is removed.
  e.done.insert(peer);
  const bool all_done = std::all_of(e.announced.begin(), e.announced.end(),
                                    [&](const auto& kv) { return e.done.count(kv.first) != 0; });
  if (all_done) entries_.erase(it);
  return fx;
}

Effects OpCoordinator::failed(const wire::Uuid& peer, uint32_t group, const wire::OpFailed& m) {
  Effects fx;
  const Key key{group, m.tag, m.seq};
  auto it = entries_.find(key);
  if (it == entries_.end() || !it->second.isMember(peer)) return fx;
  abort(fx, key, wire::codeFromWire(m.code, Code::kPeerLost), fmt::format("peer {} failed: {}", shortId(peer), m.reason));
  return fx;
}

Effects OpCoordinator::peerGone(const wire::Uuid& peer, const std::string& why) {
  Effects fx;
  const std::string reason = fmt::format("peer {} left the run ({})", shortId(peer), why);
  std::vector<Key> keys;
  for (const auto& [key, e] : entries_) {
    if (e.isMember(peer)) keys.push_back(key);
  }
  for (const Key& k : keys) abort(fx, k, Code::kPeerLost, reason);
  return fx;
}

Effects OpCoordinator::voteStarted(const wire::Uuid& voter) {
  Effects fx;
  std::vector<Key> keys;
  for (const auto& [key, e] : entries_) {
    if (e.pending()) keys.push_back(key);
  }
  for (const Key& k : keys) {
    abort(fx, k, Code::kTopologyChanged,
          fmt::format("tag {}: peer {} called pcclUpdateTopology while others started this collective",
                      std::get<1>(k), shortId(voter)));
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
  for (const auto& [key, e] : entries_) {
    if (e.crossed_since && now - *e.crossed_since >= window_) expired.push_back(key);
  }
  for (const Key& k : expired) {
    auto it = entries_.find(k);
    if (it == entries_.end()) continue;
    const auto waited = std::chrono::duration_cast<Millis>(now - *it->second.crossed_since).count();
    abort(fx, k, Code::kMismatch,
          fmt::format("tags diverge: {}, for {} ms (announce_window_ms {}); every peer of the group must "
                      "call the same tags (compute them alike on every peer)",
                      it->second.crossed_why, waited, window_.count()));
  }
  return fx;
}

void OpCoordinator::checkCrossings(uint32_t group, TimePoint now) {
  // Per tag, its oldest call not yet announced by every member (a later call of the same tag waits behind it).
  std::map<uint64_t, Key> oldest;
  const std::vector<wire::Uuid>* members = nullptr;
  for (const auto& [key, e] : entries_) {
    if (std::get<0>(key) != group || !e.pending()) continue;
    members = &e.members;
    oldest.emplace(std::get<1>(key), key);  // keys are ordered by seq within a tag: the first stays
  }
  std::map<uint64_t, std::set<wire::Uuid>> announced;
  for (const auto& [tag, key] : oldest) {
    for (const auto& kv : entries_.at(key).announced) announced[tag].insert(kv.first);
  }
  std::map<uint64_t, CrossedTag> crossed;
  if (members != nullptr) {
    for (CrossedTag& t : findCrossedTags(announced, *members)) crossed.emplace(t.tag, std::move(t));
  }
  for (auto& [key, e] : entries_) {
    if (std::get<0>(key) != group) continue;
    auto o = oldest.find(std::get<1>(key));
    auto c = crossed.find(std::get<1>(key));
    if (c == crossed.end() || o == oldest.end() || !(o->second == key)) {
      e.crossed_since.reset();
      continue;
    }
    if (!e.crossed_since) e.crossed_since = now;
    e.crossed_why = describeCrossedTag(c->second, announced[std::get<1>(key)], e.members);
  }
}

void OpCoordinator::abort(Effects& fx, const Key& key, Code code, const std::string& reason) {
  auto it = entries_.find(key);
  if (it == entries_.end()) return;
  changed_.insert(std::get<0>(key));
  PCCL_LOG_WARN(kLog, "tag={} call={}: collective aborted: {}", std::get<1>(key), std::get<2>(key), reason);
  const wire::OpAbort ab{std::get<1>(key), std::get<2>(key), static_cast<uint16_t>(code), reason};
  // Every member hears it: one that has not called it yet fails the call when it comes.
  const std::vector<uint8_t> frame = wire::encodeFrame(ab, it->second.epoch);
  for (const auto& id : it->second.members) fx.push_back(Outgoing{id, frame});
  aborted_[key] = Aborted{it->second.epoch, ab};
  aborted_order_.push_back(key);
  while (aborted_order_.size() > kKeepAborted) {
    aborted_.erase(aborted_order_.front());
    aborted_order_.pop_front();
  }
  entries_.erase(it);
}

const wire::OpAbort* OpCoordinator::abortedBefore(const Key& key, uint64_t epoch) const {
  auto it = aborted_.find(key);
  return it != aborted_.end() && it->second.epoch == epoch ? &it->second.abort : nullptr;
}

// Calls of one tag follow each other on a peer: announcing call k, `peer` has ended every earlier call
// of the tag on this ring, whether or not its reports of them reached us (sent on a connection that
// went dark). It counts as having announced them and reported them done.
void OpCoordinator::endEarlierCalls(const wire::Uuid& peer, uint32_t group, const wire::OpAnnounce& a) {
  auto it = entries_.lower_bound(Key{group, a.tag, 0});
  while (it != entries_.end() && std::get<0>(it->first) == group && std::get<1>(it->first) == a.tag &&
         std::get<2>(it->first) < a.seq) {
    Entry& e = it->second;
    if (e.epoch != a.epoch || !e.isMember(peer) || e.announced.empty()) {
      ++it;
      continue;
    }
    e.announced.emplace(peer, e.announced.begin()->second);
    e.done.insert(peer);
    const bool all_done = std::all_of(e.announced.begin(), e.announced.end(),
                                      [&](const auto& kv) { return e.done.count(kv.first) != 0; });
    changed_.insert(group);
    it = all_done ? entries_.erase(it) : std::next(it);
  }
}

}  // namespace pccl::master
