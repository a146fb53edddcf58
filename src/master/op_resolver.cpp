#include "master/op_resolver.hpp"

#include <fmt/format.h>

#include "util/log.hpp"

namespace pccl::master {

namespace {
constexpr const char* kLog = "master";
constexpr size_t kKeepDecided = 1024;
using wire::OpPhase;
using wire::shortId;
}  // namespace

Effects OpResolver::state(const wire::Uuid& peer, uint32_t group, const wire::OpState& m,
                          const std::vector<wire::Uuid>& group_peers, bool* failed_outcome) {
  Effects fx;
  *failed_outcome = false;
  const Key key{group, m.epoch, m.tag, m.seq};
  const auto phase = static_cast<OpPhase>(m.state);
  if (auto d = decided_.find(key); d != decided_.end()) {
    if (phase == OpPhase::kPrepared) fx.push_back(Outgoing{peer, wire::encodeFrame(d->second, m.epoch)});
    return fx;
  }
  auto it = open_.find(key);
  if (it == open_.end()) {
    if (phase != OpPhase::kPrepared) return fx;  // an answer about something already settled
    Open o;
    o.asked.insert(peer);
    for (const auto& p : group_peers) {
      if (p == peer) continue;
      o.asked.insert(p);
      o.waiting.insert(p);
      fx.push_back(Outgoing{p, wire::encodeFrame(wire::OpQuery{m.epoch, m.tag, m.seq}, m.epoch)});
    }
    PCCL_LOG_WARN(kLog, "tag={} call={} epoch={}: peer {} is in doubt; asking {} peers", m.tag, m.seq, m.epoch,
                  shortId(peer), o.waiting.size());
    it = open_.emplace(key, std::move(o)).first;
  } else if (phase == OpPhase::kPrepared && it->second.waiting.count(peer) == 0) {
    // The peer in doubt asks again (it came back on a new connection, or waited long): an answer may
    // have been lost on the way, a query on a connection its peer has since replaced. Everyone not yet
    // heard from is asked again, on the connection it has now.
    Open& o = it->second;
    o.asked.insert(peer);
    for (const auto& p : o.waiting) {
      fx.push_back(Outgoing{p, wire::encodeFrame(wire::OpQuery{m.epoch, m.tag, m.seq}, m.epoch)});
    }
    if (!o.waiting.empty()) {
      PCCL_LOG_INFO(kLog, "tag={} call={} epoch={}: peer {} asks again; asking the {} peers not yet heard from again",
                    m.tag, m.seq, m.epoch, shortId(peer), o.waiting.size());
    }
  } else {
    Open& o = it->second;
    o.waiting.erase(peer);
    o.asked.insert(peer);
    if (phase == OpPhase::kFailed && !o.failed) {
      o.failed = true;
      o.failed_by = peer;
    }
    if (phase == OpPhase::kCommitted) o.committed = true;
  }
  decideIfReady(fx, key, failed_outcome);
  return fx;
}

Effects OpResolver::peerGone(const wire::Uuid& peer, bool* failed_outcome) {
  Effects fx;
  *failed_outcome = false;
  std::vector<Key> keys;
  for (auto& [key, o] : open_) {
    o.asked.erase(peer);
    if (o.waiting.erase(peer) != 0) keys.push_back(key);
  }
  for (const Key& k : keys) {
    bool failed = false;
    decideIfReady(fx, k, &failed);
    *failed_outcome = *failed_outcome || failed;
  }
  return fx;
}

void OpResolver::decideIfReady(Effects& fx, const Key& key, bool* failed_outcome) {
  auto it = open_.find(key);
  if (it == open_.end() || !it->second.waiting.empty()) return;
  const Open& o = it->second;
  const auto [group, epoch, tag, seq] = key;
  wire::OpOutcome out;
  out.epoch = epoch;
  out.tag = tag;
  out.seq = seq;
  if (o.failed && o.committed) {
    // Cannot happen (a commit needs every peer prepared): the peers that committed keep their result.
    PCCL_LOG_ERROR(kLog, "tag={} call={}: one peer committed and another failed it; keeping the commit", tag, seq);
  }
  out.committed = (!o.failed || o.committed) ? 1 : 0;
  if (out.committed == 0) {
    out.code = static_cast<uint16_t>(Code::kPeerLost);
    out.reason = fmt::format("tag {} (call {}) failed on peer {} before every peer held its result: it fails on "
                             "every peer; call pcclUpdateTopology and retry",
                             tag, seq, shortId(o.failed_by));
    *failed_outcome = true;
  }
  PCCL_LOG_WARN(kLog, "tag={} call={} epoch={} group={}: settled as {}", tag, seq, epoch, group,
                out.committed != 0 ? "committed" : "failed");
  const std::vector<uint8_t> frame = wire::encodeFrame(out, epoch);
  for (const auto& p : o.asked) fx.push_back(Outgoing{p, frame});
  decided_[key] = out;
  decided_order_.push_back(key);
  while (decided_order_.size() > kKeepDecided) {
    decided_.erase(decided_order_.front());
    decided_order_.pop_front();
  }
  open_.erase(it);
}

}  // namespace pccl::master
