#include "master/sync_coordinator.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "master/sync_election.hpp"

namespace pccl::master {

namespace {
using wire::shortId;

bool contains(const std::vector<wire::Uuid>& v, const wire::Uuid& id) {
  return std::find(v.begin(), v.end(), id) != v.end();
}
}  // namespace

Effects SyncCoordinator::announce(const wire::Uuid& peer, uint32_t group, const std::vector<wire::Uuid>& members,
                                  uint64_t epoch, const Status& blocked, const wire::SyncAnnounce& a) {
  Effects fx;
  for (const auto& [id, r] : running_) {
    // Its sync runs already: a peer back on a new control connection says it again, not knowing that
    // its first announcement arrived; its plan is repeated to it (returned()).
    if (r.plans.count(peer) != 0) return fx;
  }
  auto it = pending_.find(group);
  if (it == pending_.end()) it = pending_.emplace(group, Pending{members, {}}).first;
  Pending& p = it->second;
  // A peer runs one sync at a time: announcing again, it has ended its earlier call (it lost the master
  // meanwhile, and came back on a new connection): this call takes that one's place, and the others'
  // calls go on.
  p.announced[peer] = a;
  if (!blocked.isOk()) {  // first: after a failed ring build every peer is an epoch behind the master
    abortPending(fx, group, blocked.code(), "shared-state sync: " + blocked.message());
    return fx;
  }
  if (a.epoch != epoch) {
    abortPending(fx, group, Code::kTopologyChanged,
                 fmt::format("peer {} syncs on the ring of epoch {}, but the ring is at epoch {}: call "
                             "pcclUpdateTopology",
                             shortId(peer), a.epoch, epoch));
    return fx;
  }
  if (!contains(p.members, peer)) {
    abortPending(fx, group, Code::kInvalidUsage,
                 fmt::format("peer {} is not an accepted member of the ring", shortId(peer)));
    return fx;
  }
  if (p.announced.size() < p.members.size()) return fx;
  return start(group, epoch);
}

Effects SyncCoordinator::start(uint32_t group, uint64_t epoch) {
  Effects fx;
  Pending p = std::move(pending_[group]);
  pending_.erase(group);
  std::vector<SyncParticipant> parts;
  const std::vector<wire::MemberInfo> none;
  const std::vector<wire::MemberInfo>& ring = membership_ != nullptr ? membership_->ring() : none;
  for (const auto& id : p.members) {
    SyncParticipant part;
    part.id = id;
    part.announce = p.announced[id];
    for (const wire::MemberInfo& m : ring) {
      if (m.id != id) continue;
      part.inbound = m.inbound != 0;
      part.host = m.host;
    }
    parts.push_back(std::move(part));
  }
  const SyncElection e = electSharedState(parts);
  const uint64_t sync_id = ++next_sync_id_;
  Running run;
  bool anyone_fetches = false;
  for (size_t i = 0; i < parts.size(); ++i) {
    wire::SyncPlan plan;
    plan.revision = e.revision;
    if (e.plans[i].status.isOk()) {
      plan.sync_id = sync_id;
      plan.fetches = e.plans[i].fetches;
      anyone_fetches = anyone_fetches || !plan.fetches.empty();
      run.members.push_back(parts[i].id);
    } else {
      plan.code = static_cast<uint16_t>(e.plans[i].status.code());
      plan.reason = e.plans[i].status.message();
    }
    fx.push_back(Outgoing{parts[i].id, wire::encodeFrame(plan, epoch)});
    if (plan.sync_id != 0) run.plans[parts[i].id] = fx.back().frame;
    completed_.erase(parts[i].id);
  }
  if (run.members.empty()) return fx;
  if (!anyone_fetches) {
    // Everybody is up to date: done at once, nobody moves a byte.
    wire::SyncComplete c;
    c.sync_id = sync_id;
    for (const auto& id : run.members) {
      fx.push_back(Outgoing{id, wire::encodeFrame(c, epoch)});
      completed_[id] = fx.back().frame;
    }
    return fx;
  }
  running_[sync_id] = std::move(run);
  return fx;
}

Effects SyncCoordinator::done(const wire::Uuid& peer, const wire::SyncDone& d) {
  Effects fx;
  if (d.sync_id == 0) {
    // A withdrawal before any plan (the peer gave up waiting): the group's pending sync is over.
    std::vector<uint32_t> groups;
    for (const auto& [group, p] : pending_) {
      if (p.announced.count(peer) != 0) groups.push_back(group);
    }
    for (uint32_t g : groups) {
      abortPending(fx, g, wire::codeFromWire(d.code, Code::kTimeout),
                   fmt::format("peer {} withdrew from the shared-state sync: {}", shortId(peer), d.reason));
    }
    return fx;
  }
  auto it = running_.find(d.sync_id);
  if (it == running_.end() || !contains(it->second.members, peer)) return fx;  // aborted meanwhile
  if (d.code != 0) {
    abortRunning(fx, d.sync_id, wire::codeFromWire(d.code, Code::kPeerLost),
                 fmt::format("peer {} failed the shared-state sync: {}", shortId(peer), d.reason));
    return fx;
  }
  it->second.done.insert(peer);
  if (it->second.done.size() < it->second.members.size()) return fx;
  wire::SyncComplete c;
  c.sync_id = d.sync_id;
  for (const auto& id : it->second.members) {
    fx.push_back(Outgoing{id, wire::encodeFrame(c, 0)});
    completed_[id] = fx.back().frame;
  }
  running_.erase(it);
  return fx;
}

Effects SyncCoordinator::returned(const wire::Uuid& peer) const {
  Effects fx;
  for (const auto& [id, r] : running_) {
    auto plan = r.plans.find(peer);
    if (plan != r.plans.end()) fx.push_back(Outgoing{peer, plan->second});
  }
  if (fx.empty()) {
    if (auto c = completed_.find(peer); c != completed_.end()) fx.push_back(Outgoing{peer, c->second});
  }
  return fx;
}

Effects SyncCoordinator::peerGone(const wire::Uuid& peer, const std::string& why) {
  Effects fx;
  completed_.erase(peer);
  std::vector<uint32_t> groups;
  for (const auto& [group, p] : pending_) {
    if (contains(p.members, peer)) groups.push_back(group);
  }
  for (uint32_t g : groups) {
    pending_[g].announced.erase(peer);
    abortPending(fx, g, Code::kPeerLost, fmt::format("peer {} left before the shared-state sync: {}", shortId(peer), why));
  }
  std::vector<uint64_t> ids;
  for (const auto& [id, r] : running_) {
    if (contains(r.members, peer)) ids.push_back(id);
  }
  for (uint64_t id : ids) {
    abortRunning(fx, id, Code::kPeerLost, fmt::format("peer {} left during the shared-state sync: {}", shortId(peer), why));
  }
  return fx;
}

Effects SyncCoordinator::voteStarted(const wire::Uuid& voter) {
  Effects fx;
  std::vector<uint32_t> groups;
  for (const auto& kv : pending_) groups.push_back(kv.first);
  for (uint32_t g : groups) {
    abortPending(fx, g, Code::kTopologyChanged,
                 fmt::format("peer {} is in pcclUpdateTopology while others sync shared state", shortId(voter)));
  }
  return fx;
}

void SyncCoordinator::abortPending(Effects& fx, uint32_t group, Code code, const std::string& reason) {
  auto it = pending_.find(group);
  if (it == pending_.end()) return;
  wire::SyncPlan plan;
  plan.code = static_cast<uint16_t>(code);
  plan.reason = reason;
  for (const auto& kv : it->second.announced) fx.push_back(Outgoing{kv.first, wire::encodeFrame(plan, 0)});
  pending_.erase(it);
}

void SyncCoordinator::abortRunning(Effects& fx, uint64_t sync_id, Code code, const std::string& reason) {
  auto it = running_.find(sync_id);
  if (it == running_.end()) return;
  wire::SyncComplete c;
  c.sync_id = sync_id;
  c.code = static_cast<uint16_t>(code);
  c.reason = reason;
  for (const auto& id : it->second.members) {
    fx.push_back(Outgoing{id, wire::encodeFrame(c, 0)});
    completed_[id] = fx.back().frame;
  }
  running_.erase(it);
}

}  // namespace pccl::master
