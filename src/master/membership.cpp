#include "master/membership.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "master/levels.hpp"
#include "master/regions.hpp"
#include "master/relays.hpp"
#include "master/ring_order.hpp"
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
  // Peers that a build would keep waiting do not make arePeersPending() true (no rebuild would take them).
  s.pending = static_cast<uint32_t>(pendingCount() - withheldNow(joinOrder()).size());
  s.vote_open =
      std::any_of(peers_.begin(), peers_.end(), [](const auto& kv) { return kv.second.vote != Vote::kNone; }) ? 1 : 0;
  s.stale = stale_ ? 1 : 0;
  return s;
}

Effects Membership::join(const wire::MemberInfo& info) {
  Effects fx;
  Record rec;
  rec.info = info;
  rec.join_seq = next_seq_++;
  peers_[info.id] = rec;
  PCCL_LOG_INFO(kLog, "peer={} epoch={}: joined from {}:{} (group {}, K={}, same host {}{}{}); pending admission",
                shortId(info.id), epoch_, info.host, info.port, info.group, info.connections, info.host_connections,
                info.region.empty() ? "" : ", region ", info.region);
  maybeStartBuild(fx);
  return fx;
}

void Membership::configureSurveys(const SurveyConfig& config, bool auto_optimize) {
  survey_config_ = config;
  auto_optimize_ = auto_optimize;
}

Effects Membership::vote(const wire::Uuid& id, bool optimize) {
  Effects fx;
  auto it = peers_.find(id);
  if (it == peers_.end() || it->second.phase != PeerPhase::kAccepted) {
    PCCL_LOG_WARN(kLog, "peer={} epoch={}: ignoring a topology vote from a non-member", shortId(id), epoch_);
    return fx;
  }
  it->second.vote = optimize ? Vote::kOptimize : Vote::kUpdate;
  PCCL_LOG_DEBUG(kLog, "peer={} epoch={}: votes for a topology {}", shortId(id), epoch_,
                 optimize ? "optimisation" : "update");
  maybeStartBuild(fx);
  return fx;
}

Effects Membership::withdrawVote(const wire::Uuid& id) {
  Effects fx;
  auto it = peers_.find(id);
  if (it != peers_.end()) it->second.vote = Vote::kNone;
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
  last_outcome_ = Outcome{epoch_, wire::encodeFrame(ready, epoch_)};
  sendToAccepted(fx, last_outcome_.frame);
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
  book_.forget(id);
  const bool surveyed = survey_.involves(id);
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
  if (surveyed && phase_ == RunPhase::kMeasuring) {
    failBuild(fx, Code::kPeerLost, fmt::format("peer {} left while the links were being measured ({})", shortId(id),
                                               reasonName(reason)));
  }
  maybeStartBuild(fx);
  return fx;
}

Effects Membership::rejoin(const wire::MemberInfo& info, uint64_t position) {
  Record rec;
  rec.info = info;
  rec.phase = PeerPhase::kAccepted;
  rec.join_seq = position;
  peers_[info.id] = rec;
  next_seq_ = std::max(next_seq_, position + 1);
  PCCL_LOG_INFO(kLog, "peer={} epoch={}: came back from {}:{} (group {})", shortId(info.id), epoch_, info.host,
                info.port, info.group);
  return {};
}

Effects Membership::resume(uint64_t epoch, std::vector<wire::MemberInfo> ring, const std::string& stale_why) {
  Effects fx;
  held_ = false;
  epoch_ = std::max(epoch_, epoch);
  ring_ = std::move(ring);
  // The ring's members first, in its order (the next ring keeps it), then the newcomers as they came.
  std::vector<wire::MemberInfo> later = joinOrder();
  uint64_t seq = 0;
  for (const auto& m : ring_) {
    if (auto it = peers_.find(m.id); it != peers_.end()) it->second.join_seq = seq++;
  }
  for (const auto& m : later) {
    if (std::none_of(ring_.begin(), ring_.end(), [&](const wire::MemberInfo& r) { return r.id == m.id; })) {
      peers_.at(m.id).join_seq = seq++;
    }
  }
  next_seq_ = seq;
  phase_ = RunPhase::kStable;
  stale_ = !stale_why.empty();
  stale_reason_ = stale_ ? fmt::format("the run was taken back by a new master: {}", stale_why) : std::string();
  clearVotes();
  noteRegions("taken back");
  maybeStartBuild(fx);
  return fx;
}

void Membership::markStale(const std::string& why) {
  stale_ = true;
  stale_reason_ = fmt::format("the ring of epoch {} lost {}", epoch_, why);
}

std::vector<wire::MemberInfo> Membership::joinOrder() const {
  std::vector<std::pair<uint64_t, const wire::MemberInfo*>> order;
  for (const auto& kv : peers_) order.emplace_back(kv.second.join_seq, &kv.second.info);
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<wire::MemberInfo> out;
  for (const auto& p : order) out.push_back(*p.second);
  return out;
}

std::vector<size_t> Membership::withheldNow(const std::vector<wire::MemberInfo>& all) const {
  std::vector<bool> pending;
  for (const auto& m : all) pending.push_back(peers_.at(m.id).phase == PeerPhase::kPending);
  return withheld(all, pending);
}

std::vector<wire::MemberInfo> Membership::admissible() {
  std::vector<wire::MemberInfo> all = joinOrder();
  const std::vector<size_t> out = withheldNow(all);
  std::set<wire::Uuid> now;
  for (size_t i : out) {
    now.insert(all[i].id);
    if (withheld_.count(all[i].id) != 0) continue;
    std::string others;
    for (const auto& m : all) {
      if (m.group == all[i].group && m.inbound == 0 && m.id != all[i].id) others += (others.empty() ? "" : ", ") + shortId(m.id);
    }
    PCCL_LOG_WARN(kLog, "peer={} epoch={}: cannot be dialled, and neither can {} of group {}, nor any member of the "
                  "run: it waits pending until a member that can be dialled joined (to relay the links between "
                  "them, docs/concepts.md \"Reachability\")",
                  shortId(all[i].id), epoch_, others, all[i].group);
  }
  withheld_ = std::move(now);
  std::vector<wire::MemberInfo> in;
  for (size_t i = 0, w = 0; i < all.size(); ++i) {
    if (w < out.size() && out[w] == i) {
      ++w;
      continue;
    }
    in.push_back(std::move(all[i]));
  }
  return in;
}

void Membership::clearVotes() {
  for (auto& kv : peers_) {
    kv.second.vote = Vote::kNone;
    kv.second.ready = false;
  }
}

void Membership::maybeStartBuild(Effects& fx) {
  if (phase_ != RunPhase::kStable || held_) return;
  size_t accepted = 0;
  size_t updates = 0;
  size_t optimizes = 0;
  for (const auto& kv : peers_) {
    if (kv.second.phase != PeerPhase::kAccepted) continue;
    ++accepted;
    if (kv.second.vote == Vote::kUpdate) ++updates;
    if (kv.second.vote == Vote::kOptimize) ++optimizes;
  }
  const bool bootstrap = accepted == 0 && !peers_.empty();  // the first peer(s) are admitted at once
  if (bootstrap) return startBuild(fx, admissible());
  if (accepted == 0 || updates + optimizes != accepted) return;
  if (updates != 0 && optimizes != 0) {
    std::string opt, upd;
    for (const auto& kv : peers_) {
      if (kv.second.vote == Vote::kOptimize) opt += (opt.empty() ? "" : ", ") + shortId(kv.first);
      if (kv.second.vote == Vote::kUpdate) upd += (upd.empty() ? "" : ", ") + shortId(kv.first);
    }
    clearVotes();
    return failBuild(fx, Code::kMismatch,
                     fmt::format("peers disagree on the topology call: {} called pcclOptimizeTopology, {} called "
                                 "pcclUpdateTopology; every peer must make the same call",
                                 opt, upd));
  }
  std::vector<wire::MemberInfo> members = admissible();
  if (optimizes != 0) return startSurvey(fx, members, linksToMeasure(members, book_, true));
  if (auto_optimize_) return startSurvey(fx, members, linksToMeasure(members, book_, false));
  startBuild(fx, members);
}

void Membership::startSurvey(Effects& fx, const std::vector<wire::MemberInfo>& members, std::vector<ProbePair> pairs) {
  clearVotes();
  if (pairs.empty()) return startBuild(fx, members);
  phase_ = RunPhase::kMeasuring;
  const size_t count = pairs.size();
  Effects plans = survey_.begin(members, std::move(pairs), survey_config_, now_());
  PCCL_LOG_INFO(kLog, "epoch={}: measuring {} links among {} peers in {} rounds (budget {} ms per round)", epoch_, count,
                members.size(), survey_.rounds(), survey_config_.budget_ms);
  fx.insert(fx.end(), std::make_move_iterator(plans.begin()), std::make_move_iterator(plans.end()));
}

Effects Membership::probeReport(const wire::Uuid& id, const wire::ProbeReport& r) {
  Effects fx;
  if (phase_ != RunPhase::kMeasuring) return fx;
  bool finished = false;
  fx = survey_.report(id, r, &book_, now_(), &finished);
  if (!finished) return fx;
  ++surveys_;
  links_measured_ += survey_.pairs();
  PCCL_LOG_INFO(kLog, "epoch={}: measured {} links in {} rounds, {} ms", epoch_, survey_.pairs(), survey_.rounds(),
                std::chrono::duration_cast<Millis>(now_() - survey_.startedAt()).count());
  // The members measured, as they are now (every one of them is still here: a departure failed the survey).
  std::vector<wire::MemberInfo> members;
  for (const auto& m : survey_.members()) {
    if (contains(m.id)) members.push_back(peers_.at(m.id).info);
  }
  phase_ = RunPhase::kStable;
  startBuild(fx, members);
  return fx;
}

Effects Membership::returned(const wire::Uuid& id) {
  Effects fx;
  if (phase_ == RunPhase::kMeasuring && survey_.awaits(id)) {
    PCCL_LOG_INFO(kLog, "peer={} epoch={}: back during link survey round {}: its links in that round are measured again",
                  shortId(id), epoch_, survey_.round() + 1);
    wire::ProbeReport nothing;
    nothing.probe_id = survey_.probeId();
    return probeReport(id, nothing);
  }
  auto it = peers_.find(id);
  if (it == peers_.end() || it->second.phase != PeerPhase::kAccepted) return fx;
  if (phase_ == RunPhase::kBuilding && !it->second.ready) {
    // It may have missed the ring, or we its P2PReady: the ring again (it sends its outcome again).
    PCCL_LOG_INFO(kLog, "peer={} epoch={}: back during the ring build: sending it the ring again", shortId(id), epoch_);
    wire::TopologyUpdate update;
    update.epoch = epoch_;
    update.ring = ring_;
    fx.push_back(Outgoing{id, wire::encodeFrame(update, epoch_)});
  } else if (phase_ == RunPhase::kStable && last_outcome_.epoch == epoch_ && !last_outcome_.frame.empty()) {
    fx.push_back(Outgoing{id, last_outcome_.frame});  // how the last build ended, which it may have missed
  }
  return fx;
}

Effects Membership::tick() {
  Effects fx;
  if (phase_ != RunPhase::kMeasuring) return fx;
  Status late = survey_.check(now_());
  if (!late.isOk()) failBuild(fx, Code::kTimeout, late.message());
  return fx;
}

void Membership::startBuild(Effects& fx, const std::vector<wire::MemberInfo>& members) {
  RingOrder order = orderRing(members, ring_, book_);
  for (const auto& m : members) {
    Record& r = peers_.at(m.id);
    if (r.phase == PeerPhase::kPending) {
      r.phase = PeerPhase::kAccepted;
      PCCL_LOG_INFO(kLog, "peer={} epoch={}: admitted", shortId(m.id), epoch_);
    }
  }
  clearVotes();
  ring_ = std::move(order.ring);
  if (const size_t unrelayed = assignRelays(ring_); unrelayed != 0) {
    PCCL_LOG_WARN(kLog, "epoch={}: {} ring link(s) between members that cannot be dialled have no relay (no member "
                  "can be dialled): they cannot connect", epoch_ + 1, unrelayed);
  }
  predicted_ = order.bottleneck;
  join_predicted_ = order.join_bottleneck;
  ++epoch_;
  phase_ = RunPhase::kBuilding;
  placeRegions(members);
  placeLevels(members);
  std::string names;
  for (const auto& m : ring_) names += (names.empty() ? "" : " -> ") + shortId(m.id);
  PCCL_LOG_INFO(kLog, "epoch={}: building ring of {} peers: {}", epoch_, ring_.size(), names);
  if (order.measured) {
    PCCL_LOG_INFO(kLog, "epoch={}: ring ordered by measured links: {}; predicted bottleneck {:.1f} MB/s (join "
                  "order: {:.1f} MB/s)",
                  epoch_, order.summary, predicted_ / 1e6, join_predicted_ / 1e6);
  }
  wire::TopologyUpdate update;
  update.epoch = epoch_;
  update.ring = ring_;
  sendToAccepted(fx, wire::encodeFrame(update, epoch_));
}

void Membership::placeRegions(const std::vector<wire::MemberInfo>& members) {
  std::vector<RegionMember> declared;
  for (const auto& m : members) declared.push_back(RegionMember{m.id, m.region});
  const RegionChoice choice = master::decideRegions(declared, book_);
  std::map<wire::Uuid, std::string> effective;
  for (size_t i = 0; i < members.size(); ++i) effective[members[i].id] = choice.regions[i];
  for (auto& m : ring_) m.region = effective[m.id];
  if (choice.detected == 0) return noteRegions("as declared");
  noteRegions(fmt::format("{} member(s) placed by {} measured pair(s), near when the round trip is at most {}",
                          choice.detected, choice.pairs,
                          choice.threshold_s == std::numeric_limits<double>::infinity()
                              ? std::string("anything (one LAN)")
                              : fmt::format("{:.2f} ms", choice.threshold_s * 1e3)));
}

void Membership::placeLevels(const std::vector<wire::MemberInfo>& members) {
  std::map<wire::Uuid, uint8_t> asked;
  for (const auto& m : members) asked[m.id] = m.levels;
  const auto choice = master::decideLevels(ring_, asked, book_);
  for (auto& m : ring_) {
    m.levels = static_cast<uint8_t>(choice.at(m.group).levels);
    m.two_level_bytes = choice.at(m.group).two_level_bytes;
  }
  std::map<uint32_t, std::string> now;
  for (const auto& [group, c] : choice) now[group] = c.why;
  if (now == levels_) return;
  levels_ = now;
  const bool quiet = std::all_of(choice.begin(), choice.end(),  // a run without regions says nothing of them
                                 [](const auto& kv) { return kv.second.why == "flat (one region)"; });
  for (const auto& [group, c] : choice) {
    if (!quiet) PCCL_LOG_INFO(kLog, "epoch={}: group {}: all-reduces {}", epoch_, group, c.why);
  }
}

void Membership::noteRegions(const std::string& how) {
  std::map<wire::Uuid, std::string> now;
  std::vector<std::string> names;
  for (const auto& m : ring_) {
    now[m.id] = m.region;
    names.push_back(m.region);
  }
  if (now == regions_) return;
  const auto unnamed = [](const std::map<wire::Uuid, std::string>& r) {
    return std::all_of(r.begin(), r.end(), [](const auto& kv) { return kv.second.empty(); });
  };
  const bool quiet = unnamed(now) && unnamed(regions_);  // a run without regions says nothing of them
  regions_ = std::move(now);
  if (quiet) return;
  PCCL_LOG_INFO(kLog, "epoch={}: regions: {} ({})", epoch_, regionSummary(names), how);
  std::map<std::string, std::string> members;  // region -> its members' short ids, in ring order
  for (const auto& m : ring_) members[m.region] += (members[m.region].empty() ? "" : ", ") + shortId(m.id);
  for (const auto& [region, ids] : members) {
    PCCL_LOG_DEBUG(kLog, "epoch={}: region {}: {}", epoch_, region.empty() ? "(unnamed)" : region, ids);
  }
}

void Membership::failBuild(Effects& fx, Code code, const std::string& reason) {
  PCCL_LOG_WARN(kLog, "epoch={}: ring build failed: {}", epoch_, reason);
  const bool measuring = phase_ == RunPhase::kMeasuring;
  survey_.cancel();
  phase_ = RunPhase::kStable;
  stale_ = true;
  stale_reason_ = measuring ? fmt::format("the link survey after epoch {} failed: {}", epoch_, reason)
                            : fmt::format("the ring build of epoch {} failed: {}", epoch_, reason);
  clearVotes();
  wire::TopologyFailed failed;
  failed.epoch = epoch_;
  failed.code = static_cast<uint16_t>(code);
  failed.reason = reason;
  // A survey's failure ends votes, which a member that missed it sends again when it is back.
  last_outcome_ = measuring ? Outcome{} : Outcome{epoch_, wire::encodeFrame(failed, epoch_)};
  sendToAccepted(fx, wire::encodeFrame(failed, epoch_));
}

void Membership::sendToAccepted(Effects& fx, const std::vector<uint8_t>& frame) const {
  for (const auto& kv : peers_) {
    if (kv.second.phase == PeerPhase::kAccepted) fx.push_back(Outgoing{kv.first, frame});
  }
}

}  // namespace pccl::master
