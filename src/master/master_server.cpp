#include "master/master_server.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "net/auth.hpp"
#include "net/identity.hpp"
#include "net/tcp_rto.hpp"
#include "util/log.hpp"
#include "util/secret.hpp"
#include "wire/dispatch.hpp"

namespace pccl::master {

using wire::shortId;

namespace {
constexpr const char* kLog = "master";
}  // namespace

MasterServer::MasterServer(asio::io_context& io, MasterConfig config, StatsSink on_stats)
    : io_(io),
      config_(std::move(config)),
      key_(std::make_shared<net::AuthKey>(config_.secret, config_.encrypt)),
      ticker_(io),
      // Checks run 20 times per timeout, so detection overshoots the timeout by at most 5%.
      tick_period_(std::clamp<int64_t>(std::min<int64_t>(config_.heartbeat_interval_ms, config_.peer_timeout_ms / 20),
                                       10, 1000)),
      ops_(config_.max_concurrent_ops, Millis(config_.announce_window_ms)),
      on_stats_(std::move(on_stats)) {
  wipeSecret(config_.secret);  // key_ is all the master keeps of it
  freshBooks();
}

void MasterServer::freshBooks() {
  membership_ = Membership();
  SurveyConfig survey;
  survey.budget_ms = config_.probe_budget_ms;
  survey.max_bytes = config_.probe_bytes;
  survey.slack_ms = config_.peer_timeout_ms + 2 * config_.handshake_timeout_ms;
  membership_.configureSurveys(survey, config_.auto_optimize == 1);
  ops_ = OpCoordinator(config_.max_concurrent_ops, Millis(config_.announce_window_ms));
  resolver_ = OpResolver();
  syncs_ = SyncCoordinator(&membership_);
}

MasterServer::~MasterServer() = default;

Status MasterServer::open() {
  PCCL_ASSIGN_OR_RETURN(net::HostPort hp, net::parseHostPort(config_.listen_address, "listen address"));
  std::optional<RunRecord> stored;
  if (!config_.state_file.empty()) {
    PCCL_ASSIGN_OR_RETURN(stored, readRunRecord(config_.state_file));
  }
  // Under etcd the run comes from etcd's record once elected: until then this master leads nothing.
  const bool standby = config_.standby || !config_.etcd_url.empty();
  recovery_ = std::make_unique<RunRecovery>(standby, stored, Millis(config_.rebuild_window_ms), Clock::now());
  if (recovery_->role() == MasterRole::kRecovering) {
    membership_.hold();
    PCCL_LOG_INFO(kLog, "run {}: restarted (state file {}): term {}; waiting up to {} ms for its members to come back",
                  shortId(recovery_->run().run_id), config_.state_file, recovery_->run().term, config_.rebuild_window_ms);
  } else if (recovery_->role() == MasterRole::kStandby && config_.etcd_url.empty()) {
    PCCL_LOG_INFO(kLog, "standby: leading no run until a member of one comes back to this master");
  }
  PCCL_RETURN_IF_ERROR(persistRecord());
  if (!config_.etcd_url.empty()) recovery_->follow("");
  net::ListenerConfig lc;
  lc.address = hp;
  lc.key = key_;
  lc.handshake_timeout = Millis(config_.handshake_timeout_ms);
  lc.max_pending_handshakes = config_.max_pending_handshakes;
  lc.name = kLog;
  listener_ = std::make_shared<net::Listener>(io_, lc);
  PCCL_RETURN_IF_ERROR(listener_->open());
  if (!config_.etcd_url.empty()) {
    EtcdConfig ec;
    ec.url = config_.etcd_url;
    ec.prefix = config_.etcd_prefix;
    ec.name = config_.advertise_address.empty() ? listener_->boundAddress() : config_.advertise_address;
    ec.lease = Millis(config_.etcd_lease_ms);
    EtcdLeadership::Callbacks cb;
    cb.on_elected = [this](const EtcdRecord& r) { onElected(r); };
    cb.on_lost = [this](const Status& why) { onDeposed(why); };
    cb.on_leader = [this](const std::string& leader) {
      if (recovery_->role() == MasterRole::kFollower) recovery_->follow(leader);
    };
    etcd_ = std::make_unique<EtcdLeadership>(io_, std::move(ec), std::move(cb));
  }
  publishStats();  // the role and run are visible as soon as start() returns
  return Status::ok();
}

void MasterServer::start() {
  if (key_->hasSecret()) {
    PCCL_LOG_INFO(kLog, "peers must authenticate with the shared secret");
  } else {
    PCCL_LOG_WARN(kLog, "no secret configured: this run is OPEN, anyone who can reach {} may join",
                  listener_->boundAddress());
  }
  listener_->start([this](net::Authenticated a) { onAuthenticated(std::move(a)); });
  if (etcd_) {
    Status st = etcd_->start();
    if (!st.isOk()) PCCL_LOG_ERROR(kLog, "etcd: {}", st.toString());
  }
  publishStats();
  tick();
}

void MasterServer::shutdown() {
  if (etcd_) etcd_->stop();  // resigns: a follower takes over at once
  stopping_ = true;
  ticker_.cancel();
  listener_->close();
  // Closing runs the close handlers, which erase from sessions_: iterate over a copy of the keys.
  std::vector<std::shared_ptr<net::Connection>> conns;
  for (auto& kv : sessions_) conns.push_back(kv.second->conn);
  for (auto& c : conns) c->close(Status::systemError("master shutting down"));
  sessions_.clear();
  serial_by_id_.clear();
}

void MasterServer::onAuthenticated(net::Authenticated auth) {
  if (auth.role != wire::Role::kPeerToMaster) {
    PCCL_LOG_WARN(kLog, "dropping {}: peer-to-peer connection sent to the master", net::remoteName(auth.link.socket));
    return;
  }
  auto s = std::make_unique<Session>();
  s->serial = next_serial_++;
  s->conn = std::make_shared<net::Connection>(std::move(auth.link), wire::kMaxControlPayload);
  Session& ref = *s;
  sessions_[s->serial] = std::move(s);
  registerHandlers(ref);
  uint64_t serial = ref.serial;
  PCCL_LOG_DEBUG(kLog, "authenticated connection from {}", ref.conn->peerName());
  publishStats();
  ref.conn->start([this, serial](const wire::FrameHeader& h, const uint8_t* p, size_t n) -> Status {
        auto it = sessions_.find(serial);
        if (it == sessions_.end()) return Status::internal("frame for a closed session");
        // Past the etcd lease's local deadline this master no longer leads: its step-down is queued.
        if (etcd_ && etcd_->overdue()) return Status::ok();
        return it->second->dispatcher.dispatch(h, p, n);
      },
      [this, serial](const Status& reason) { onClosed(serial, reason); });
}

void MasterServer::registerHandlers(Session& s) {
  Session* sp = &s;
  auto requireJoined = [sp]() -> Status {
    return sp->joined ? Status::ok() : Status::protocol("message before JoinRequest");
  };
  s.dispatcher.on<wire::JoinRequest>([this, sp](const wire::FrameHeader&, const wire::JoinRequest& m) {
    return onJoin(*sp, m);
  });
  s.dispatcher.on<wire::Heartbeat>([](const wire::FrameHeader&, const wire::Heartbeat&) { return Status::ok(); });
  auto vote = [this, sp, requireJoined](bool optimize) {
    PCCL_RETURN_IF_ERROR(requireJoined());
    apply(ops_.voteStarted(sp->id));
    apply(syncs_.voteStarted(sp->id));
    apply(membership_.vote(sp->id, optimize));
    return Status::ok();
  };
  s.dispatcher.on<wire::VoteUpdate>([vote](const wire::FrameHeader&, const wire::VoteUpdate&) { return vote(false); });
  s.dispatcher.on<wire::VoteOptimize>(
      [vote](const wire::FrameHeader&, const wire::VoteOptimize&) { return vote(true); });
  s.dispatcher.on<wire::ProbeReport>([this, sp, requireJoined](const wire::FrameHeader&, const wire::ProbeReport& m) {
    PCCL_RETURN_IF_ERROR(requireJoined());
    apply(membership_.probeReport(sp->id, m));
    return Status::ok();
  });
  s.dispatcher.on<wire::LinkQuery>([this, sp, requireJoined](const wire::FrameHeader&, const wire::LinkQuery& m) {
    PCCL_RETURN_IF_ERROR(requireJoined());
    const std::vector<wire::LinkEntry> all = membership_.links().entries();
    wire::LinkReport r;
    r.request_id = m.request_id;
    r.epoch = membership_.epoch();
    r.total = static_cast<uint32_t>(all.size());
    r.first = std::min<uint32_t>(m.first, r.total);
    const size_t end = std::min<size_t>(all.size(), size_t{r.first} + wire::kLinkReportPage);
    r.links.assign(all.begin() + r.first, all.begin() + static_cast<std::ptrdiff_t>(end));
    sp->conn->send(r, membership_.epoch());
    sp->last_tx = Clock::now();
    return Status::ok();
  });
  s.dispatcher.on<wire::WithdrawVote>([this, sp, requireJoined](const wire::FrameHeader&, const wire::WithdrawVote&) {
    PCCL_RETURN_IF_ERROR(requireJoined());
    apply(membership_.withdrawVote(sp->id));
    return Status::ok();
  });
  s.dispatcher.on<wire::QueryStatus>([this, sp, requireJoined](const wire::FrameHeader&, const wire::QueryStatus& m) {
    PCCL_RETURN_IF_ERROR(requireJoined());
    wire::MembershipStatus st = membership_.status();
    st.request_id = m.request_id;
    sp->conn->send(st, membership_.epoch());
    sp->last_tx = Clock::now();
    return Status::ok();
  });
  s.dispatcher.on<wire::OpAnnounce>([this, sp, requireJoined](const wire::FrameHeader&, const wire::OpAnnounce& m) {
    PCCL_RETURN_IF_ERROR(requireJoined());
    apply(ops_.announce(sp->id, groupOf(sp->id), groupMembers(sp->id), membership_.epoch(), collectivesBlocked(), m));
    return Status::ok();
  });
  s.dispatcher.on<wire::SyncAnnounce>([this, sp, requireJoined](const wire::FrameHeader&, const wire::SyncAnnounce& m) {
    PCCL_RETURN_IF_ERROR(requireJoined());
    apply(syncs_.announce(sp->id, groupOf(sp->id), groupMembers(sp->id), membership_.epoch(), collectivesBlocked(), m));
    return Status::ok();
  });
  s.dispatcher.on<wire::SyncDone>([this, sp, requireJoined](const wire::FrameHeader&, const wire::SyncDone& m) {
    PCCL_RETURN_IF_ERROR(requireJoined());
    apply(syncs_.done(sp->id, m));
    return Status::ok();
  });
  s.dispatcher.on<wire::OpDone>([this, sp, requireJoined](const wire::FrameHeader&, const wire::OpDone& m) {
    PCCL_RETURN_IF_ERROR(requireJoined());
    apply(ops_.done(sp->id, groupOf(sp->id), m));
    return Status::ok();
  });
  s.dispatcher.on<wire::OpFailed>([this, sp, requireJoined](const wire::FrameHeader&, const wire::OpFailed& m) {
    PCCL_RETURN_IF_ERROR(requireJoined());
    apply(ops_.failed(sp->id, groupOf(sp->id), m));
    if (m.ring_broken != 0) {
      membership_.markStale(fmt::format("a transfer: tag {} failed at peer {} ({})", m.tag, shortId(sp->id), m.reason));
    }
    return Status::ok();
  });
  s.dispatcher.on<wire::OpState>([this, sp, requireJoined](const wire::FrameHeader&, const wire::OpState& m) {
    PCCL_RETURN_IF_ERROR(requireJoined());
    bool failed = false;
    apply(resolver_.state(sp->id, groupOf(sp->id), m, groupMembers(sp->id), &failed));
    if (failed) membership_.markStale(fmt::format("tag {} failed while peers were in doubt", m.tag));
    return Status::ok();
  });
  s.dispatcher.on<wire::P2PReady>([this, sp, requireJoined](const wire::FrameHeader&, const wire::P2PReady& m) {
    PCCL_RETURN_IF_ERROR(requireJoined());
    apply(membership_.p2pReady(sp->id, m.epoch));
    return Status::ok();
  });
  s.dispatcher.on<wire::P2PFailed>([this, sp, requireJoined](const wire::FrameHeader&, const wire::P2PFailed& m) {
    PCCL_RETURN_IF_ERROR(requireJoined());
    const Code code = wire::codeFromWire(m.code, Code::kPeerLost);
    apply(membership_.p2pFailed(sp->id, m.epoch, code, m.reason));
    return Status::ok();
  });
  s.dispatcher.on<wire::Leave>([this, sp, requireJoined](const wire::FrameHeader&, const wire::Leave&) {
    PCCL_RETURN_IF_ERROR(requireJoined());
    wire::Uuid id = sp->id;
    serial_by_id_.erase(id);
    sp->joined = false;  // the close handler must not report a second departure
    removePeer(id, wire::LeaveReason::kGraceful, "");
    // Closing runs onClosed at once, which drops this session; it frees the session (and this
    // handler) only after the handler has returned (releaseLater).
    sp->conn->close(Status::ok());
    return Status::ok();
  });
}

Status MasterServer::onJoin(Session& s, const wire::JoinRequest& m) {
  if (s.joined) return Status::protocol("second JoinRequest on one connection");
  if (m.connections == 0 || m.connections > 1024) {
    return Status::protocol(fmt::format("connections_per_peer {} outside 1..1024", m.connections));
  }
  if (m.host_connections == 0 || m.host_connections > 1024) {
    return Status::protocol(fmt::format("same_host_connections {} outside 1..1024", m.host_connections));
  }
  if (m.resuming()) {
    // Only the holder of a member's ring key may come back as that member (docs/security.md).
    const std::vector<uint8_t> proof = net::resumeProof(s.conn->session(), m);
    if (!net::verifySignature(m.ring_key, proof.data(), proof.size(), m.resume_sig)) {
      return refuseJoin(s, Status::authFailed(fmt::format("a resume of member {} not signed with the ring key it "
                                                          "carries, on this connection",
                                                          shortId(m.peer_id))));
    }
  }
  s.reconnects = (m.resume_flags & wire::JoinRequest::kReconnects) != 0;
  const RunRecovery::Decision d = recovery_->decide(m, membership_.size());
  if (d.verdict == RunRecovery::Verdict::kResume || d.verdict == RunRecovery::Verdict::kSupersede) {
    if (Status proved = recovery_->proveMember(m); !proved.isOk()) return refuseJoin(s, proved);
  }
  switch (d.verdict) {
    case RunRecovery::Verdict::kRefuse:
      return refuseJoin(s, Status(d.code, d.reason));
    case RunRecovery::Verdict::kSupersede:
      PCCL_LOG_WARN(kLog, "stepping down: {}", d.reason);
      ++step_downs_;
      resetRun(&s, Status::masterUnreachable("this master stepped down: " + d.reason));
      [[fallthrough]];
    case RunRecovery::Verdict::kAdopt:
      recovery_->adopt(m, Clock::now());
      membership_.hold();
      ++takeovers_;
      PCCL_LOG_INFO(kLog, "run {}: taking it back from peer {} (its epoch {}, ring of {}): term {}; waiting up to {} ms "
                    "for the rest of that ring",
                    shortId(m.run_id), shortId(m.peer_id), m.epoch, m.ring.size(), recovery_->run().term,
                    config_.rebuild_window_ms);
      if (Status proved = recovery_->proveMember(m); !proved.isOk()) return refuseJoin(s, proved);
      (void)persistRecord();
      [[fallthrough]];
    case RunRecovery::Verdict::kResume:
      return resumePeer(s, m);
    case RunRecovery::Verdict::kJoin:
      break;
  }
  if (membership_.size() >= config_.max_peers) {
    s.conn->sendErrorAndClose(
        Status::invalidUsage(fmt::format("run is full: max_peers = {} reached", config_.max_peers)), 0);
    return Status::ok();
  }
  if (recovery_->role() == MasterRole::kStandby) {  // a newcomer that no other master took
    recovery_->lead();
    PCCL_LOG_INFO(kLog, "standby: no other master took {}: leading run {} (term {})", s.conn->peerName(),
                  shortId(recovery_->run().run_id), recovery_->run().term);
    (void)persistRecord();
  }
  wire::MemberInfo info = memberInfo(s, m);
  info.id = net::randomUuid();
  s.p2p = net::HostPort{info.host, info.port};
  s.joined = true;
  s.id = info.id;
  serial_by_id_[info.id] = s.serial;
  PCCL_LOG_DEBUG(kLog, "join from {} ({})", s.conn->peerName(), m.client_version);
  sendAccepted(s, info.id, false);
  if (info.inbound != 0) {
    checkReachable(info, s.conn->peerName());  // joins it once its ring port answered or did not
    return Status::ok();
  }
  PCCL_LOG_INFO(kLog, "peer={}: declared that it cannot be dialled (inbound = false): its links are opened from "
                "its side; its connection came from {}", shortId(info.id), s.conn->peerName());
  reachable_[info.id] = false;
  apply(membership_.join(info));
  publishStats();
  return Status::ok();
}

Status MasterServer::refuseJoin(Session& s, const Status& why) {
  PCCL_LOG_INFO(kLog, "refusing {}: {}", s.conn->peerName(), why.message());
  s.conn->sendErrorAndClose(why, membership_.epoch());
  return Status::ok();
}

wire::MemberInfo MasterServer::memberInfo(const Session& s, const wire::JoinRequest& m) const {
  wire::MemberInfo info;
  std::string seen = s.conn->peerName();
  seen = seen.substr(0, seen.rfind(':'));
  if (!seen.empty() && seen.front() == '[') seen = seen.substr(1, seen.size() - 2);
  info.host = m.advertise_host.empty() ? seen : m.advertise_host;
  info.port = m.p2p_port;
  info.group = m.group;
  info.connections = m.connections;
  info.host_connections = m.host_connections;
  info.ring_key = m.ring_key;
  info.region = m.region;  // declared; a build puts the effective one in the ring (master/regions.hpp)
  info.levels = m.levels;  // asked; a build puts the group's decision in the ring (master/levels.hpp)
  info.inbound = m.inbound;  // declared; a new member's dial-back may turn 1 into 0 (master_reach.cpp)
  return info;
}

void MasterServer::sendAccepted(Session& s, const wire::Uuid& id, bool resumed) {
  wire::JoinAccepted acc;
  acc.peer_id = id;
  acc.heartbeat_interval_ms = config_.heartbeat_interval_ms;
  acc.peer_timeout_ms = config_.peer_timeout_ms;
  acc.run_id = recovery_->run().run_id;
  acc.term = recovery_->run().term;
  acc.epoch = membership_.epoch();
  acc.resumed = resumed ? 1 : 0;
  s.conn->send(acc, membership_.epoch());
  s.last_tx = Clock::now();
}

// A connection closes from inside its own session's handlers (Leave, a failed send in apply(), an
// Error sent at once): the session leaves every table now, but its memory (the dispatcher whose
// handler may be running) is freed by a posted task, after the handler has returned.
void MasterServer::releaseLater(std::unique_ptr<Session> s) {
  if (stopping_) return;  // shutdown() runs outside every handler: free it now
  std::shared_ptr<Session> dead(std::move(s));
  asio::post(io_, [dead] {});
}

void MasterServer::onClosed(uint64_t serial, const Status& reason) {
  auto it = sessions_.find(serial);
  if (it == sessions_.end()) return;
  std::unique_ptr<Session> s = std::move(it->second);
  sessions_.erase(it);
  forget(s.get(), reason);
  releaseLater(std::move(s));
}

void MasterServer::forget(const Session* s, const Status& reason) {
  if (stopping_ || !s->joined) {
    if (!stopping_) publishStats();
    if (!reason.isOk() && !stopping_) {
      PCCL_LOG_WARN(kLog, "connection from {} closed before joining: {}", s->conn->peerName(), reason.toString());
    }
    return;
  }
  serial_by_id_.erase(s->id);
  wire::LeaveReason why = wire::LeaveReason::kConnectionLost;
  if (reason.code() == Code::kTimeout) why = wire::LeaveReason::kTimeout;
  if (reason.code() == Code::kProtocolError || reason.code() == Code::kVersionMismatch) {
    why = wire::LeaveReason::kProtocolError;
  }
  if (why == wire::LeaveReason::kProtocolError) {
    PCCL_LOG_WARN(kLog, "dropping peer {} at {}: {}", shortId(s->id), s->conn->peerName(), reason.toString());
  }
  if (why == wire::LeaveReason::kConnectionLost && holdPeer(*s, reason)) return;
  removePeer(s->id, why, reason.message());
}

void MasterServer::removePeer(const wire::Uuid& id, wire::LeaveReason why, const std::string& detail) {
  held_.erase(id);
  reachable_.erase(id);
  apply(ops_.peerGone(id, detail.empty() ? "left" : detail));
  bool failed = false;
  apply(resolver_.peerGone(id, &failed));
  apply(syncs_.peerGone(id, detail.empty() ? "left" : detail));
  const bool was_accepted = membership_.isAccepted(id);
  apply(membership_.remove(id, why, detail));
  recovery_->forget(id);
  if (membership_.size() == 0 && was_accepted && why != wire::LeaveReason::kGraceful &&
      recovery_->role() == MasterRole::kLeader) {
    // Every member vanished without a word: frozen or cut off, this master may have been replaced. It
    // takes the run back if its members return, but starts nothing new unless no other master will.
    recovery_->stepDown();
    ++step_downs_;
    PCCL_LOG_WARN(kLog, "run {}: every member was lost without leaving; stepping down to standby",
                  shortId(recovery_->run().run_id));
  }
}

uint32_t MasterServer::groupOf(const wire::Uuid& id) const {
  for (const auto& r : membership_.ring()) {
    if (r.id == id) return r.group;
  }
  return 0;
}

MasterServer::Session* MasterServer::sessionById(const wire::Uuid& id) {
  auto it = serial_by_id_.find(id);
  if (it == serial_by_id_.end()) return nullptr;
  auto s = sessions_.find(it->second);
  return s == sessions_.end() ? nullptr : s->second.get();
}

std::vector<wire::Uuid> MasterServer::groupMembers(const wire::Uuid& id) const {
  const uint32_t group = groupOf(id);
  bool in_ring = false;
  for (const auto& r : membership_.ring()) in_ring = in_ring || r.id == id;
  std::vector<wire::Uuid> members;
  for (const auto& r : membership_.ring()) {
    if (in_ring && r.group == group && membership_.isAccepted(r.id)) members.push_back(r.id);
  }
  return members;
}

Status MasterServer::collectivesBlocked() const {
  const wire::MembershipStatus st = membership_.status();
  if (st.stale != 0) {
    // A failed ring build leaves the master an epoch ahead of every peer: this, not the epoch, is the news.
    return Status::peerLost(membership_.staleReason() + "; every peer must call pcclUpdateTopology first");
  }
  if (st.vote_open != 0 || membership_.runPhase() != Membership::RunPhase::kStable) {
    return Status::topologyChanged("a peer is in pcclUpdateTopology while others run a collective");
  }
  return Status::ok();
}

void MasterServer::apply(const Effects& fx) {
  for (const Outgoing& o : fx) {
    Session* s = sessionById(o.to);
    if (s == nullptr) continue;
    s->conn->sendFrame(o.frame);
    s->last_tx = Clock::now();
  }
  if (recovery_ && recovery_->role() != MasterRole::kRecovering && recovery_->role() != MasterRole::kFollower) {
    // The record keeps the members' ring keys; it changes only when someone joins or leaves.
    const std::pair<size_t, uint64_t> shape{membership_.size(), membership_.epoch()};
    if (shape != keys_shape_) {
      keys_shape_ = shape;
      std::map<wire::Uuid, wire::SignKey> keys;
      for (const wire::MemberInfo& p : membership_.joinOrder()) keys[p.id] = p.ring_key;
      recovery_->setMembers(std::move(keys));
    }
    recovery_->noteEpoch(membership_.epoch());
    (void)persistRecord();
    publishRecord();
  }
  publishStats();
}

void MasterServer::publishStats() {
  if (!on_stats_) return;
  MasterStats st;
  st.epoch = membership_.epoch();
  st.accepted = static_cast<uint32_t>(membership_.acceptedCount());
  st.pending = static_cast<uint32_t>(membership_.pendingCount());
  st.building = membership_.runPhase() == Membership::RunPhase::kBuilding;
  st.connections = sessions_.size();
  st.collectives = ops_.pendingCount() + ops_.runningCount();
  st.measuring = membership_.runPhase() == Membership::RunPhase::kMeasuring;
  st.topology_surveys = membership_.surveys();
  st.links_measured = membership_.linksMeasured();
  st.links_known = membership_.links().size();
  st.predicted_bottleneck = membership_.predictedBottleneck();
  st.join_order_bottleneck = membership_.joinOrderBottleneck();
  if (recovery_) {
    st.role = static_cast<int>(recovery_->role());
    st.term = recovery_->run().term;
    st.run_id = recovery_->run().run_id;
  }
  st.takeovers = takeovers_;
  st.step_downs = step_downs_;
  for (const auto& [id, ok] : reachable_) st.unreachable += ok ? 0u : 1u;
  on_stats_(st);
}

void MasterServer::tick() {
  if (stopping_) return;
  if (etcd_ && etcd_->overdue()) {  // past the lease's local deadline: the step-down is queued; act on nothing
    tickLater();
    return;
  }
  const TimePoint now = Clock::now();
  const Millis interval(config_.heartbeat_interval_ms);
  // Silence beyond peer_timeout_ms, TCP's retransmission after a dark path came back (net/tcp_rto.hpp)
  // and one of the peer's heartbeats (it pings at most our interval apart): a path dark for less than
  // peer_timeout_ms removes no one (docs/algorithms.md §6, "Network faults").
  const Millis timeout(config_.peer_timeout_ms + net::tcpRecoveryMs() + config_.heartbeat_interval_ms);
  const Millis handshake(config_.handshake_timeout_ms);
  std::vector<std::pair<std::shared_ptr<net::Connection>, Status>> to_close;
  for (auto& kv : sessions_) {
    Session& s = *kv.second;
    auto silent = std::chrono::duration_cast<Millis>(now - s.conn->lastReceive());
    if (!s.joined && now - s.connected_at > handshake) {
      to_close.emplace_back(s.conn, Status::timeout("no JoinRequest within the handshake timeout"));
    } else if (s.joined && silent > timeout) {
      to_close.emplace_back(s.conn, Status::timeout(fmt::format(
                                        "no heartbeat for {} ms (timeout {} ms: peer timeout {} ms, {} ms for TCP "
                                        "to see a dark path back, one heartbeat interval)",
                                        silent.count(), timeout.count(), config_.peer_timeout_ms,
                                        net::tcpRecoveryMs(), config_.heartbeat_interval_ms)));
    } else if (s.joined && now - s.last_tx >= interval) {
      s.conn->send(wire::Heartbeat{}, membership_.epoch());
      s.last_tx = now;
    }
  }
  if (Effects fx = ops_.tick(now); !fx.empty()) apply(fx);  // tags that diverged for announce_window_ms
  if (Effects fx = membership_.tick(); !fx.empty()) apply(fx);  // a link survey round overdue
  if (recovery_->due(now)) finishRecovery();                       // the rebuild window closed
  expireHolds(now);                                                // held members that did not come back
  for (auto& [conn, why] : to_close) {
    PCCL_LOG_INFO(kLog, "kicking {}: {}", conn->peerName(), why.message());
    // The Error tells a frozen peer why when it wakes; the linger bounds how long we wait to close.
    conn->sendErrorAndClose(Status::kicked("removed by the master: " + why.message()), membership_.epoch(), &why);
  }
  tickLater();
}

void MasterServer::tickLater() {
  ticker_.expires_after(tick_period_);
  ticker_.async_wait([this](const asio::error_code& ec) {
    if (!ec) tick();
  });
}

}  // namespace pccl::master
