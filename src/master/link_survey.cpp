#include "master/link_survey.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "util/log.hpp"

namespace pccl::master {

namespace {
constexpr const char* kLog = "master";
}  // namespace

using wire::shortId;

// ---- LinkBook ------------------------------------------------------------------------------------

void LinkBook::record(const wire::Uuid& from, const wire::Uuid& to, MeasuredLink link) {
  // A round trip crosses both directions, so A -> B and B -> A measure the same one; the smaller of the
  // two is the less disturbed (a probe's pong may wait behind the bulk data of another link in its round).
  auto back = links_.find({to, from});
  if (back != links_.end() && back->second.rtt_us != 0 && link.rtt_us != 0) {
    link.rtt_us = std::min(link.rtt_us, back->second.rtt_us);
    back->second.rtt_us = link.rtt_us;
  }
  links_[{from, to}] = link;
}

void LinkBook::forget(const wire::Uuid& peer) {
  for (auto it = links_.begin(); it != links_.end();) {
    it = it->first.first == peer || it->first.second == peer ? links_.erase(it) : std::next(it);
  }
}

const MeasuredLink* LinkBook::find(const wire::Uuid& from, const wire::Uuid& to) const {
  auto it = links_.find({from, to});
  return it == links_.end() ? nullptr : &it->second;
}

std::vector<wire::LinkEntry> LinkBook::entries() const {
  std::vector<wire::LinkEntry> out;
  out.reserve(links_.size());
  for (const auto& [key, link] : links_) out.push_back(wire::LinkEntry{key.first, key.second, link.bandwidth, link.rtt_us});
  return out;
}

LinkMatrix LinkBook::matrix(const std::vector<wire::Uuid>& members) const {
  LinkMatrix m(members.size());
  for (size_t i = 0; i < members.size(); ++i) {
    for (size_t j = 0; j < members.size(); ++j) {
      if (i == j) continue;
      if (const MeasuredLink* l = find(members[i], members[j])) {
        m.set(i, j, static_cast<double>(l->bandwidth), static_cast<double>(l->rtt_us) * 1e-6);
      }
    }
  }
  return m;
}

// ---- scheduling ----------------------------------------------------------------------------------

std::vector<std::vector<ProbePair>> scheduleRounds(std::vector<ProbePair> pairs, size_t n) {
  // By cyclic distance first: the pairs of one distance form a full round when all are there.
  std::sort(pairs.begin(), pairs.end(), [n](const ProbePair& a, const ProbePair& b) {
    const size_t da = (a.second + n - a.first) % n;
    const size_t db = (b.second + n - b.first) % n;
    return da != db ? da < db : a < b;
  });
  pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
  std::vector<std::vector<ProbePair>> rounds;
  std::vector<bool> sends(n), receives(n);
  while (!pairs.empty()) {
    std::fill(sends.begin(), sends.end(), false);
    std::fill(receives.begin(), receives.end(), false);
    std::vector<ProbePair> round;
    std::vector<ProbePair> rest;
    for (const ProbePair& p : pairs) {
      if (p.first == p.second || p.first >= n || p.second >= n) continue;
      if (!sends[p.first] && !receives[p.second]) {
        sends[p.first] = true;
        receives[p.second] = true;
        round.push_back(p);
      } else {
        rest.push_back(p);
      }
    }
    if (!round.empty()) rounds.push_back(std::move(round));
    pairs = std::move(rest);
  }
  return rounds;
}

// ---- LinkSurvey ----------------------------------------------------------------------------------

Effects LinkSurvey::begin(std::vector<wire::MemberInfo> members, std::vector<ProbePair> pairs,
                          const SurveyConfig& config, TimePoint now) {
  members_ = std::move(members);
  config_ = config;
  total_pairs_ = pairs.size();
  rounds_ = scheduleRounds(std::move(pairs), members_.size());
  retried_ = false;
  failed_.clear();
  round_ = 0;
  started_ = now;
  active_ = true;
  return startRound(now);
}

bool LinkSurvey::involves(const wire::Uuid& id) const {
  return active_ && std::any_of(members_.begin(), members_.end(), [&](const auto& m) { return m.id == id; });
}

bool LinkSurvey::awaits(const wire::Uuid& id) const {
  if (!active_) return false;
  for (size_t i : awaiting_) {
    if (members_[i].id == id) return true;
  }
  return false;
}

Effects LinkSurvey::startRound(TimePoint now) {
  Effects fx;
  pending_.clear();
  awaiting_.clear();
  if (round_ >= rounds_.size()) return fx;
  probe_id_ = next_probe_id_++;
  round_started_ = now;
  std::map<size_t, wire::ProbePlan> plans;
  for (const ProbePair& p : rounds_[round_]) {
    pending_[p] = Pending{};
    wire::ProbePlan& tx = plans[p.first];
    tx.has_target = true;
    tx.target = members_[p.second];
    tx.target_connections = wire::linkConnections(members_[p.first], members_[p.second]);
    tx.target_dials = !wire::opensLink(members_[p.first], members_[p.second]);
    wire::ProbePlan& rx = plans[p.second];
    rx.has_source = true;
    rx.source = members_[p.first];
    rx.source_connections = wire::linkConnections(members_[p.first], members_[p.second]);
    rx.dial_source = tx.target_dials;
  }
  for (auto& [index, plan] : plans) {
    plan.probe_id = probe_id_;
    plan.budget_ms = config_.budget_ms;
    plan.max_bytes = std::max<uint64_t>(config_.max_bytes, 1);
    awaiting_.insert(index);
    fx.push_back(Outgoing{members_[index].id, wire::encodeFrame(plan, 0)});
  }
  PCCL_LOG_DEBUG(kLog, "link survey: round {} of {} ({} links, probe {})", round_ + 1, rounds_.size(),
                 rounds_[round_].size(), probe_id_);
  return fx;
}

Effects LinkSurvey::report(const wire::Uuid& id, const wire::ProbeReport& r, LinkBook* book, TimePoint now,
                           bool* finished) {
  *finished = false;
  Effects fx;
  if (!active_ || r.probe_id != probe_id_) {
    PCCL_LOG_DEBUG(kLog, "peer={}: ignoring a report for probe {} (current: {})", shortId(id), r.probe_id, probe_id_);
    return fx;
  }
  size_t self = members_.size();
  for (size_t i = 0; i < members_.size(); ++i) {
    if (members_[i].id == id) self = i;
  }
  if (self == members_.size() || awaiting_.erase(self) == 0) return fx;
  if (!r.detail.empty()) PCCL_LOG_WARN(kLog, "peer={}: link probe {}: {}", shortId(id), probe_id_, r.detail);
  for (auto& [pair, pend] : pending_) {
    if (pair.first == self && r.target_id == members_[pair.second].id) {
      pend.tx = true;
      pend.link.rtt_us = r.rtt_us;
    }
    if (pair.second == self && r.source_id == members_[pair.first].id) {
      pend.rx = true;
      pend.link.bandwidth = r.rx_rate;
    }
  }
  if (!awaiting_.empty()) return fx;
  for (const auto& [pair, pend] : pending_) {
    MeasuredLink link = pend.link;
    if (!pend.tx || !pend.rx || link.rtt_us == 0) link.bandwidth = 0;  // a side that did not report the link
    if (link.bandwidth == 0 && !retried_) failed_.push_back(pair);     // measured again after the last round
    book->record(members_[pair.first].id, members_[pair.second].id, link);
    PCCL_LOG_DEBUG(kLog, "link {} -> {}: {:.1f} MB/s, rtt {:.2f} ms", shortId(members_[pair.first].id),
                   shortId(members_[pair.second].id), static_cast<double>(link.bandwidth) / 1e6,
                   static_cast<double>(link.rtt_us) / 1e3);
  }
  ++round_;
  if (round_ >= rounds_.size() && !retried_ && !failed_.empty()) {
    // A probe broken by the network (a reset, a blackout while connecting) would leave a good link
    // unusable until the next survey: the links that failed are measured once more, in rounds of their
    // own. A link that fails again is recorded unusable.
    PCCL_LOG_INFO(kLog, "link survey: measuring {} link(s) again that did not work", failed_.size());
    retried_ = true;
    for (auto& round : scheduleRounds(std::move(failed_), members_.size())) rounds_.push_back(std::move(round));
    failed_.clear();
  }
  if (round_ >= rounds_.size()) {
    active_ = false;
    *finished = true;
    pending_.clear();
    return fx;
  }
  return startRound(now);
}

Status LinkSurvey::check(TimePoint now) const {
  if (!active_ || awaiting_.empty()) return Status::ok();
  if (now - round_started_ <= Millis(uint64_t{config_.budget_ms} + config_.slack_ms)) return Status::ok();
  std::string who;
  for (size_t i : awaiting_) who += (who.empty() ? "" : ", ") + shortId(members_[i].id);
  return Status::timeout(fmt::format("link survey round {} of {}: no report from peer(s) {} within {} ms", round_ + 1,
                                     rounds_.size(), who, uint64_t{config_.budget_ms} + config_.slack_ms));
}

}  // namespace pccl::master
