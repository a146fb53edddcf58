// Communicator::Impl, membership: the calls that join, vote, query and leave (user threads, waiting
// with deadlines), and the io thread's side of the master's messages about membership (topology
// builds, status and link queries, link surveys). The state machine is docs/architecture.md §4; the
// master session itself (joining, losing and finding a master) is comm_session.cpp.
#include <fmt/format.h>

#include <algorithm>
#include <future>

#include "api/comm_impl.hpp"
#include "pccl/version.h"
#include "util/log.hpp"

namespace pccl {

using peer::PeerState;

// ---- user-facing calls --------------------------------------------------------------------------

Status Communicator::Impl::connect() {
  std::unique_lock<std::mutex> lk(mu_);
  if (!fatal_.isOk()) return record(fatal_);
  if (state_ != PeerState::kIdle) {
    return record(Status::invalidUsage(fmt::format("connect() called while {}", peer::peerStateName(state_))));
  }
  setState(PeerState::kConnecting);
  connect_error_ = Status::ok();
  const uint64_t builds0 = builds_done_;
  asio::post(io_, [this] { ioStartSession(); });
  const TimePoint deadline = deadlineAfterMs(config_.connect_timeout_ms);
  bool done = cv_.wait_until(lk, deadline, [&] {
    return state_ == PeerState::kFailed || (state_ == PeerState::kIdle && !connect_error_.isOk()) ||
           builds_done_ > builds0;
  });
  if (state_ == PeerState::kFailed) return record(fatal_);
  if (state_ == PeerState::kIdle) return record(connect_error_);
  if (done) return record(last_build_);
  std::string where = peer::peerStateName(state_);
  lk.unlock();
  teardown();
  return record(Status::timeout(fmt::format(
      "not admitted into the ring within {} ms (still {}); accepted peers admit pending ones by all calling "
      "pcclUpdateTopology",
      config_.connect_timeout_ms, where)));
}

Status Communicator::Impl::updateTopology(bool optimize) {
  const char* call = optimize ? "optimizeTopology()" : "updateTopology()";
  std::unique_lock<std::mutex> lk(mu_);
  if (!fatal_.isOk()) return record(fatal_);
  if (state_ != PeerState::kMember) {
    return record(Status::invalidUsage(
        fmt::format("{} needs a connected member; this peer is {}", call, peer::peerStateName(state_))));
  }
  if (!inflight_.empty() || syncing_) {
    return record(Status::invalidUsage(fmt::format(
        "{} while {} collective(s){} are in flight: wait for them first", call, inflight_.size(),
        syncing_ ? " and a shared-state sync" : "")));
  }
  setState(PeerState::kVoting);
  vote_optimize_ = optimize;
  const uint64_t builds0 = builds_done_;
  asio::post(io_, [this] { sendVote(); });  // while the master is away: once it is back
  // A link survey takes rounds of the master's probe budget: each round's plan restarts the deadline.
  const TimePoint start = Clock::now();
  auto deadline = [&] { return std::max(start, probed_at_) + Millis(config_.connect_timeout_ms); };
  bool done = false;
  while (!done && Clock::now() < deadline()) {
    done = cv_.wait_until(lk, deadline(), [&] { return state_ == PeerState::kFailed || builds_done_ > builds0; });
  }
  if (state_ == PeerState::kFailed) return record(fatal_);
  if (done) return record(last_build_);
  lk.unlock();
  asio::post(io_, [this] {
    if (link_ && link_->isReady()) link_->send(wire::WithdrawVote{}, epoch());
    std::lock_guard<std::mutex> g(mu_);
    if (state_ == PeerState::kVoting) setState(PeerState::kMember);
    cv_.notify_all();
  });
  return record(Status::timeout(fmt::format("topology {} not agreed within {} ms: every accepted peer must call {}",
                                            optimize ? "optimisation" : "update", config_.connect_timeout_ms,
                                            optimize ? "pcclOptimizeTopology" : "pcclUpdateTopology")));
}

Result<std::vector<LinkInfo>> Communicator::Impl::links() {
  std::unique_lock<std::mutex> lk(mu_);
  if (!fatal_.isOk()) return record(fatal_);
  if (!peer::isJoined(state_)) {
    return record(Status::invalidUsage(fmt::format("not connected (state {})", peer::peerStateName(state_))));
  }
  PCCL_RETURN_IF_ERROR(record(waitMaster(lk, deadlineAfterMs(config_.peer_timeout_ms))));
  std::vector<wire::LinkEntry> entries;
  uint32_t first = 0;
  int lost = 0;  // queries lost with the master's connection
  while (true) {
    const uint64_t id = ++next_query_;
    const uint64_t losses = losses_;
    waiting_.insert(id);
    asio::post(io_, [this, id, first] {
      if (link_) link_->send(wire::LinkQuery{id, first}, epoch());
    });
    // Twice the link's own timeout: a connection gone dark under the query is noticed (a loss) first.
    bool answered = cv_.wait_for(lk, Millis(2 * int64_t{config_.peer_timeout_ms}), [&] {
      return !fatal_.isOk() || link_answers_.count(id) != 0 || away_ || losses_ != losses;
    });
    waiting_.erase(id);
    if (!fatal_.isOk()) return record(fatal_);
    if ((away_ || losses_ != losses) && link_answers_.count(id) == 0) {
      // The query went with the connection: the same page again, once a master took this peer back.
      if (++lost > 3) {
        return record(Status::timeout("the master was lost while it answered a link query; ask again once it is back"));
      }
      PCCL_RETURN_IF_ERROR(record(waitMaster(lk, deadlineAfterMs(config_.peer_timeout_ms))));
      continue;
    }
    if (!answered) {
      return record(Status::masterUnreachable(
          fmt::format("master did not answer a link query within {} ms", 2 * int64_t{config_.peer_timeout_ms})));
    }
    wire::LinkReport page = std::move(link_answers_[id]);
    link_answers_.erase(id);
    entries.insert(entries.end(), page.links.begin(), page.links.end());
    first = page.first + static_cast<uint32_t>(page.links.size());
    if (page.links.empty() || first >= page.total) break;
  }
  std::vector<LinkInfo> out;
  auto rankOf = [&](const wire::Uuid& id) -> int64_t {
    for (size_t i = 0; i < topology_.ring.size(); ++i) {
      if (topology_.ring[i].id == id) return static_cast<int64_t>(i);
    }
    return -1;
  };
  for (const wire::LinkEntry& e : entries) {
    const int64_t from = rankOf(e.from);
    const int64_t to = rankOf(e.to);
    if (from < 0 || to < 0) continue;
    LinkInfo li;
    li.from_rank = static_cast<uint32_t>(from);
    li.to_rank = static_cast<uint32_t>(to);
    li.from = e.from;
    li.to = e.to;
    li.bandwidth = static_cast<double>(e.bandwidth);
    li.rtt_s = static_cast<double>(e.rtt_us) * 1e-6;
    out.push_back(li);
  }
  return out;
}

// One round trip to the master, so the answer reflects its state at the time of the call.
Result<bool> Communicator::Impl::arePeersPending() {
  std::unique_lock<std::mutex> lk(mu_);
  if (!fatal_.isOk()) return record(fatal_);
  if (!peer::isJoined(state_)) {
    return record(Status::invalidUsage(fmt::format("not connected (state {})", peer::peerStateName(state_))));
  }
  // While the master is away nobody can be admitted, and the ring goes on as it is: nothing to do at a
  // safe point. A master that takes the run back without every member makes the run stale (true).
  if (away_) return false;
  const uint64_t id = ++next_query_;
  const uint64_t losses = losses_;
  waiting_.insert(id);
  asio::post(io_, [this, id] {
    if (link_) link_->send(wire::QueryStatus{id}, epoch());
  });
  // A loss ends the wait even when the master is back by the time this thread looks (a quick re-dial):
  // the query may have gone with the old connection. Twice the link's own timeout: a connection gone
  // dark under the query is noticed (a loss) first.
  bool answered = cv_.wait_for(lk, Millis(2 * int64_t{config_.peer_timeout_ms}), [&] {
    return !fatal_.isOk() || answers_.count(id) != 0 || away_ || losses_ != losses;
  });
  waiting_.erase(id);
  if (!fatal_.isOk()) return record(fatal_);
  if ((away_ || losses_ != losses) && answers_.count(id) == 0) return false;  // lost the master meanwhile: as above
  if (!answered) {
    return record(Status::masterUnreachable(
        fmt::format("master did not answer a status query within {} ms", 2 * int64_t{config_.peer_timeout_ms})));
  }
  wire::MembershipStatus st = answers_[id];
  answers_.erase(id);
  return st.pending > 0 || st.vote_open != 0 || st.stale != 0;
}

Status Communicator::Impl::leave() { return leaveWith(Status::invalidUsage("the communicator left the run")); }

// Collectives still in flight fail with `why`.
Status Communicator::Impl::leaveWith(const Status& why) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (state_ == PeerState::kLeft || state_ == PeerState::kIdle || state_ == PeerState::kFailed) {
      return Status::ok();
    }
  }
  // Shared with the io thread, which may get to it only after the wait below gave up.
  auto left = std::make_shared<std::promise<void>>();
  auto acknowledged = left->get_future();
  asio::post(io_, [this, left, why] {
    session_->stop();
    colls_->failAll(why);
    ring_pool_->reset(Status::ok());
    prober_->cancel();
    if (!link_) return left->set_value();
    link_->leave(epoch(), [left] { left->set_value(); });
  });
  acknowledged.wait_for(kLeaveTimeout);
  // Acknowledged or not, the session is over: the io thread closes the link when it gets there
  // (a busy io thread must not hold this call, nor the destructor, past its deadline).
  asio::post(io_, [this] {
    if (link_) link_->close();
  });
  std::lock_guard<std::mutex> lk(mu_);
  if (state_ != PeerState::kFailed) setState(PeerState::kLeft);
  return Status::ok();
}

void Communicator::Impl::setState(PeerState to) {  // requires mu_
  if (!peer::isLegalTransition(state_, to)) {
    PCCL_LOG_ERROR(kLog, "illegal state transition {} -> {} (ignored)", peer::peerStateName(state_),
                   peer::peerStateName(to));
    return;
  }
  PCCL_LOG_DEBUG(kLog, "{} -> {}", peer::peerStateName(state_), peer::peerStateName(to));
  state_ = to;
  cv_.notify_all();
}

// Abandons a connect() that timed out: back to kIdle so connect() may be called again.
void Communicator::Impl::teardown() {
  std::promise<void> done;
  asio::post(io_, [this, &done] {
    session_->stop();
    colls_->failAll(Status::timeout("connect() gave up"));
    ring_pool_->reset(Status::ok());
    prober_->cancel();
    if (link_) link_->close();
    std::lock_guard<std::mutex> lk(mu_);
    if (state_ != PeerState::kFailed) {
      state_ = PeerState::kIdle;  // deliberate reset from any joined state
      connect_error_ = Status::ok();
      cv_.notify_all();
    }
    done.set_value();
  });
  done.get_future().wait();
}

// ---- io thread: the master's messages about membership ------------------------------------------

void Communicator::Impl::registerMembershipHandlers() {
  wire::Dispatcher& d = link_->dispatcher();
  d.on<wire::TopologyUpdate>([this](const wire::FrameHeader&, const wire::TopologyUpdate& m) { return onTopology(m); });
  d.on<wire::TopologyReady>([this](const wire::FrameHeader&, const wire::TopologyReady& m) { return onReady(m); });
  d.on<wire::TopologyFailed>([this](const wire::FrameHeader&, const wire::TopologyFailed& m) { return onFailed(m); });
  d.on<wire::MembershipStatus>([this](const wire::FrameHeader&, const wire::MembershipStatus& m) {
    std::lock_guard<std::mutex> lk(mu_);
    if (m.request_id == 0 || m.request_id > next_query_) return Status::protocol("unsolicited MembershipStatus");
    if (waiting_.count(m.request_id) != 0) answers_[m.request_id] = m;
    cv_.notify_all();
    return Status::ok();
  });
  d.on<wire::ProbePlan>([this](const wire::FrameHeader&, const wire::ProbePlan& m) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      probed_at_ = Clock::now();
      cv_.notify_all();
    }
    prober_->start(id_, m, [this](const wire::ProbeReport& r) {
      if (link_) link_->send(r, epoch());
    });
    return Status::ok();
  });
  d.on<wire::LinkReport>([this](const wire::FrameHeader&, const wire::LinkReport& m) {
    std::lock_guard<std::mutex> lk(mu_);
    if (m.request_id == 0 || m.request_id > next_query_) return Status::protocol("unsolicited LinkReport");
    if (waiting_.count(m.request_id) != 0) link_answers_[m.request_id] = m;
    cv_.notify_all();
    return Status::ok();
  });
  d.on<wire::PeerLeft>([this](const wire::FrameHeader&, const wire::PeerLeft& m) {
    PCCL_LOG_INFO(kLog, "peer={} epoch={}: peer {} left the run{}{}", wire::shortId(id_), epoch(),
                  wire::shortId(m.peer_id), m.detail.empty() ? "" : ": ", m.detail);
    return Status::ok();
  });
}

Status Communicator::Impl::onTopology(const wire::TopologyUpdate& m) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (state_ == PeerState::kBuildingRing && m.epoch == building_.epoch) {
      // Repeated by a master that held our place while our control connection was broken: the build
      // goes on; if it ended, the master may not have heard how.
      PCCL_LOG_INFO(kLog, "peer={} epoch={}: the master repeated the ring of epoch {}: {}", wire::shortId(id_),
                    topology_.epoch, m.epoch, build_outcome_ ? "sending our outcome again" : "still building it");
      if (build_outcome_ && build_outcome_->epoch == m.epoch) asio::post(io_, [this] { sendBuildOutcome(); });
      return Status::ok();
    }
  }
  bool found = false;
  for (const auto& mi : m.ring) found = found || mi.id == id_;
  if (!found) return Status::protocol(fmt::format("TopologyUpdate for epoch {} does not include us", m.epoch));
  building_ = topologyFrom(m.ring, id_, m.epoch);
  {
    std::lock_guard<std::mutex> lk(mu_);
    setState(PeerState::kBuildingRing);
  }
  colls_->clearRing();
  peer::RingPlan plan = peer::planRing(m.ring, id_, m.epoch);
  std::vector<peer::Relay::Link> relayed = peer::relayedBy(m.ring, id_);
  building_two_level_ = twoLevelOf(m.ring, id_);
  if (building_two_level_) addTwoLevelLinks(plan, m.ring, id_, *building_two_level_);
  building_.hierarchical = building_two_level_ != nullptr;
  // Every connection the plan makes others open to us may be in its handshake at once (a two-level
  // member accepts several links of K each): the listener's bound on handshakes in progress is above that.
  uint32_t inbound = plan.predecessor_connections;
  for (const auto& x : plan.extra) inbound += x.dial ? 0 : x.connections;
  for (const auto& l : relayed) inbound += 2 * l.connections;  // both ends of the links we relay dial us
  relay_->expect(m.epoch, std::move(relayed));
  listener_->setMaxPendingHandshakes(std::max<uint32_t>(kListenerHandshakes, inbound + kListenerHandshakes));
  building_.successor_connections = plan.successor_connections;
  building_.predecessor_connections = plan.predecessor_connections;
  build_outcome_.reset();
  ring_pool_->build(plan, [this](uint64_t epoch, const Status& s) {
    if (!s.isOk()) PCCL_LOG_WARN(kLog, "peer={} epoch={}: ring build failed: {}", wire::shortId(id_), epoch, s.toString());
    build_outcome_ = BuildOutcome{epoch, s};
    sendBuildOutcome();
  });
  return Status::ok();
}

void Communicator::Impl::sendBuildOutcome() {
  if (!link_ || !build_outcome_) return;
  const uint64_t epoch = build_outcome_->epoch;
  const Status& s = build_outcome_->status;
  if (s.isOk()) {
    link_->send(wire::P2PReady{epoch}, epoch);
  } else {
    link_->send(wire::P2PFailed{epoch, static_cast<uint16_t>(s.code()), s.message()}, epoch);
  }
}

Status Communicator::Impl::onReady(const wire::TopologyReady& m) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    // Another epoch's, or repeated after we came back to the master (we had it, or never built it).
    if (m.epoch != building_.epoch || state_ != PeerState::kBuildingRing) return Status::ok();
  }
  // Our neighbours within the group's ring, named in mismatch messages.
  std::vector<const RingMember*> group;
  std::vector<std::string> regions;  // by group rank
  size_t self = 0;
  for (const auto& r : building_.ring) {
    if (r.group != building_.ring[building_.rank].group) continue;
    if (r.id == id_) self = group.size();
    group.push_back(&r);
    regions.push_back(r.region);
  }
  const size_t n = group.size();
  const bool one_host = std::all_of(group.begin(), group.end(),
                                    [&](const RingMember* r) { return peer::sameHost(group[0]->host, r->host); });
  const std::string pred = n > 0 ? wire::shortId(group[(self + n - 1) % n]->id) : "?";
  const std::string succ = n > 0 ? wire::shortId(group[(self + 1) % n]->id) : "?";
  colls_->setSelf(wire::shortId(id_));
  colls_->setRegions(collective::regionLayout(regions));
  colls_->setOneHost(one_host);
  colls_->setRing(building_.epoch, building_.group_rank, building_.group_world_size, ring_pool_->outbound(),
                  ring_pool_->inbound(), pred, succ, gatherLimit(config_, one_host));
  if (building_two_level_) {
    std::vector<collective::Collectives::PeerLink> links;
    const auto channels = ring_pool_->extraLinks();
    const auto& extra = ring_pool_->plan().extra;
    for (size_t i = 0; i < extra.size() && i < channels.size(); ++i) {
      links.push_back({extra[i].rank, wire::shortId(extra[i].peer.id), channels[i]});
    }
    colls_->setTwoLevel(building_two_level_, std::move(links));
  }
  std::lock_guard<std::mutex> lk(mu_);
  topology_ = building_;
  last_build_ = Status::ok();
  ++builds_done_;
  stats_.ringInstalled(topology_.epoch);
  const std::string& region = topology_.ring[topology_.rank].region;
  PCCL_LOG_INFO(kLog, "peer={} epoch={}: ring ready: rank {} of {} (group rank {} of {}){}{}", wire::shortId(id_),
                topology_.epoch, topology_.rank, topology_.world_size, topology_.group_rank,
                topology_.group_world_size, region.empty() ? "" : ", region ", region);
  setState(PeerState::kMember);
  return Status::ok();
}

Status Communicator::Impl::onFailed(const wire::TopologyFailed& m) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    // A failure ends a vote (a survey's) or a build. A member that is neither had it already: repeated
    // after we came back to the master; its ring stays.
    if (state_ == PeerState::kMember) return Status::ok();
    if (state_ == PeerState::kBuildingRing && m.epoch != building_.epoch) return Status::ok();
  }
  const Status failed(wire::codeFromWire(m.code, Code::kPeerLost),
                      fmt::format("topology update to epoch {} failed: {}", m.epoch, m.reason));
  colls_->clearRing(Status(failed.code(), fmt::format("the ring build of epoch {} failed: {}", m.epoch, m.reason)));
  ring_pool_->reset(Status::ok());
  prober_->cancel();
  std::lock_guard<std::mutex> lk(mu_);
  last_build_ = failed;
  ++builds_done_;
  setState(PeerState::kMember);
  return Status::ok();
}

}  // namespace pccl
