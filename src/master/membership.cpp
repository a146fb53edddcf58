#include "master/membership.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "util/log.hpp"

namespace pccl::master {

namespace {
constexpr const char* kLog = "master";

const char* reasonName(wire::LeaveReason r) {
  switch (r) {
    case wire::LeaveReason::kGraceful: return "left gracefully";
    case wire::LeaveReason::kTimeout: return "heartbeat timeout";
    case wire::LeaveReason::kConnectionLost: return "connection lost";
    case wire::LeaveReason::kProtocolError: return "protocol error";
  }
  return "left";
}
}  // namespace

using wire::shortId;

bool Membership::isAccepted(const wire::Uuid& id) const {
  auto it = peers_.find(id);
  return it != peers_.end() && it->second.phase == PeerPhase::kAccepted;
}

size_t Membership::acceptedCount() const {
  return static_cast<size_t>(std::count_if(peers_.begin(), peers_.end(),
                                           [](const auto& kv) { return kv.second.phase == PeerPhase::kAccepted; }));
}

size_t Membership::pendingCount() const { return peers_.size() - acceptedCount(); }

wire::MembershipStatus Membership::status() const {
  wire::MembershipStatus s;
  s.accepted = static_cast<uint32_t>(acceptedCount());
  s.pending = static_cast<uint32_t>(pendingCount());
  s.vote_open = std::any_of(peers_.begin(), peers_.end(), [](const auto& kv) { return kv.second.voted; }) ? 1 : 0;
  s.stale = stale_ ? 1 : 0;
  return s;
}

Effects Membership::join(const wire::MemberInfo& info) {
  Effects fx;
  Record rec;
  rec.info = info;
  rec.join_seq = next_seq_++;
  peers_[info.id] = rec;
  PCCL_LOG_INFO(kLog, "peer={} epoch={}: joined from {}:{} (group {}, K={}, same host {}); pending admission",
                shortId(info.id), epoch_, info.host, info.port, info.group, info.connections, info.host_connections);
  maybeStartBuild(fx);
  return fx;
}

Effects Membership::vote(const wire::Uuid& id) {
  Effects fx;
  auto it = peers_.find(id);
  if (it == peers_.end() || it->second.phase != PeerPhase::kAccepted) {
    PCCL_LOG_WARN(kLog, "peer={} epoch={}: ignoring a topology vote from a non-member", shortId(id), epoch_);
    return fx;
  }
  it->second.voted = true;
  PCCL_LOG_DEBUG(kLog, "peer={} epoch={}: votes for a topology update", shortId(id), epoch_);
  maybeStartBuild(fx);
  return fx;
}

Effects Membership::withdrawVote(const wire::Uuid& id) {
  Effects fx;
  auto it = peers_.find(id);
  if (it != peers_.end()) it->second.voted = false;
  return fx;
}

Effects Membership::p2pReady(const wire::Uuid& id, uint64_t epoch) {
  Effects fx;
  auto it = peers_.find(id);
  if (phase_ != RunPhase::kBuilding || epoch != epoch_ || it == peers_.end() ||
      it->second.phase != PeerPhase::kAccepted) {
    PCCL_LOG_DEBUG(kLog, "peer={} epoch={}: ignoring a stale P2PReady for epoch {}", shortId(id), epoch_, epoch);
    return fx;
  }
  it->second.ready = true;
  for (const auto& kv : peers_) {
    if (kv.second.phase == PeerPhase::kAccepted && !kv.second.ready) return fx;
  }
  phase_ = RunPhase::kStable;
  stale_ = false;
  stale_reason_.clear();
  PCCL_LOG_INFO(kLog, "epoch={}: ring of {} peers is up", epoch_, ring_.size());
  wire::TopologyReady ready;
  ready.epoch = epoch_;
  sendToAccepted(fx, wire::encodeFrame(ready, epoch_));
  maybeStartBuild(fx);
  return fx;
}

Effects Membership::p2pFailed(const wire::Uuid& id, uint64_t epoch, Code code, const std::string& reason) {
  Effects fx;
  if (phase_ != RunPhase::kBuilding || epoch != epoch_ || !isAccepted(id)) return fx;
  failBuild(fx, code, fmt::format("peer {} could not build its ring connections: {}", shortId(id), reason));
  return fx;
}

Effects Membership::remove(const wire::Uuid& id, wire::LeaveReason reason, const std::string& detail) {
  Effects fx;
  auto it = peers_.find(id);
  if (it == peers_.end()) return fx;
  bool was_accepted = it->second.phase == PeerPhase::kAccepted;
  peers_.erase(it);
  PCCL_LOG_INFO(kLog, "peer={} epoch={}: removed ({}{}{}); {} accepted, {} pending", shortId(id), epoch_, reasonName(reason),
                detail.empty() ? "" : ": ", detail, acceptedCount(), pendingCount());
  if (was_accepted) {
    stale_ = true;
    stale_reason_ = fmt::format("the ring of epoch {} lost peer {} ({}{}{})", epoch_, shortId(id), reasonName(reason),
                                detail.empty() ? "" : ": ", detail);
    wire::PeerLeft left;
    left.peer_id = id;
    left.reason = static_cast<uint8_t>(reason);
    left.detail = detail;
    sendToAccepted(fx, wire::encodeFrame(left, epoch_));
    if (phase_ == RunPhase::kBuilding) {
      failBuild(fx, Code::kPeerLost, fmt::format("peer {} left while the ring was being built ({})", shortId(id),
                                                 reasonName(reason)));
    }
  }
  maybeStartBuild(fx);
  return fx;
}

void Membership::markStale(const std::string& why) {
  stale_ = true;
  stale_reason_ = fmt::format("the ring of epoch {} lost {}", epoch_, why);
}

void Membership::maybeStartBuild(Effects& fx) {
  if (phase_ != RunPhase::kStable) return;
  size_t accepted = 0;
  size_t voted = 0;
  for (const auto& kv : peers_) {
    if (kv.second.phase != PeerPhase::kAccepted) continue;
    ++accepted;
    if (kv.second.voted) ++voted;
  }
  bool bootstrap = accepted == 0 && !peers_.empty();  // the first peer(s) are admitted at once
  if (bootstrap || (accepted > 0 && voted == accepted)) startBuild(fx);
}

void Membership::startBuild(Effects& fx) {
  std::vector<std::pair<uint64_t, wire::MemberInfo>> order;
  for (auto& kv : peers_) {
    Record& r = kv.second;
    if (r.phase == PeerPhase::kPending) {
      r.phase = PeerPhase::kAccepted;
      PCCL_LOG_INFO(kLog, "peer={} epoch={}: admitted", shortId(kv.first), epoch_);
    }
    r.voted = false;
    r.ready = false;
    order.emplace_back(r.join_seq, r.info);
  }
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  ring_.clear();
  for (auto& p : order) ring_.push_back(p.second);
  ++epoch_;
  phase_ = RunPhase::kBuilding;
  std::string names;
  for (const auto& m : ring_) names += (names.empty() ? "" : " -> ") + shortId(m.id);
  PCCL_LOG_INFO(kLog, "epoch={}: building ring of {} peers: {}", epoch_, ring_.size(), names);
  wire::TopologyUpdate update;
  update.epoch = epoch_;
  update.ring = ring_;
  sendToAccepted(fx, wire::encodeFrame(update, epoch_));
}

void Membership::failBuild(Effects& fx, Code code, const std::string& reason) {
  PCCL_LOG_WARN(kLog, "epoch={}: ring build failed: {}", epoch_, reason);
  phase_ = RunPhase::kStable;
  stale_ = true;
  stale_reason_ = fmt::format("the ring build of epoch {} failed: {}", epoch_, reason);
  for (auto& kv : peers_) {
    kv.second.voted = false;
    kv.second.ready = false;
  }
  wire::TopologyFailed failed;
  failed.epoch = epoch_;
  failed.code = static_cast<uint16_t>(code);
  failed.reason = reason;
  sendToAccepted(fx, wire::encodeFrame(failed, epoch_));
}

void Membership::sendToAccepted(Effects& fx, const std::vector<uint8_t>& frame) const {
  for (const auto& kv : peers_) {
    if (kv.second.phase == PeerPhase::kAccepted) fx.push_back(Outgoing{kv.first, frame});
  }
}

}  // namespace pccl::master
