// Communicator::Impl, the master session (io thread; docs/concepts.md "When the master dies",
// docs/protocol.md §8.8). The state machine — which master, joining, coming back after losing one,
// giving up — is peer::MasterSession; here are its hands (the MasterLink, the JoinRequest, a timer) and
// what the communicator does when the session joined, lost the master, got it back, or gave up.
//
// Losing the master is not losing the run: the ring keeps carrying collectives while the peer tries
// every master address, again and again, for master_reconnect_ms. The first master that takes it back
// (a restart in place, or a standby) hears its run id, term, id and last ring, and answers RunResumed
// once the run goes on; then the reports the old master never got are sent again.
#include <fmt/format.h>

#include <algorithm>

#include "api/comm_impl.hpp"
#include "pccl/version.h"
#include "util/log.hpp"

namespace pccl {

using peer::MasterSession;
using peer::PeerState;

namespace {
constexpr const char* kClientVersion = "pccl " PCCL_VERSION_STRING;
}  // namespace

MasterSession::Config Communicator::Impl::sessionConfig(const CommConfig& config, std::vector<net::HostPort> masters) {
  MasterSession::Config c;
  c.masters = std::move(masters);
  c.master_reconnect_ms = config.master_reconnect_ms;
  c.heartbeat_interval_ms = config.heartbeat_interval_ms;
  c.peer_timeout_ms = config.peer_timeout_ms;
  return c;
}

void Communicator::Impl::ioStartSession() {
  if (!link_) {
    link_ = std::make_unique<peer::MasterLink>(io_, key_, Millis(config_.handshake_timeout_ms));
    master_port_ = std::make_unique<LinkMasterPort>(*link_, *colls_);
    colls_->setMaster(master_port_.get());
    session_->registerHandlers(link_->dispatcher());
    sync_->registerHandlers(link_->dispatcher());
    registerMembershipHandlers();
  }
  session_->start();
}

// ---- the session's hands ----------------------------------------------------------------------------

void Communicator::Impl::dial(const net::HostPort& master) {
  link_->open(
      master, [this](const Status& s) { session_->opened(s, link_->refused()); },
      [this](const Status& s) { session_->lost(s, link_->refused()); });
}

// The control connection is open: ask to join, or, when we belong to a run, to be taken back.
void Communicator::Impl::sendJoin(MasterSession::Join kind, const wire::Uuid& run_id, uint64_t term) {
  wire::JoinRequest join;
  join.p2p_port = listener_->port();
  join.advertise_host = config_.advertise_host;
  join.group = config_.peer_group;
  join.connections = linkConnections(config_);
  join.host_connections = config_.same_host_connections != 0 ? config_.same_host_connections : join.connections;
  join.ring_key = identity_->publicKey();
  join.client_version = kClientVersion;
  join.region = config_.region;
  join.levels = levelsAsked(config_);
  join.inbound = config_.inbound == 0 ? 0 : 1;
  if (kind == MasterSession::Join::kAnyMaster) join.resume_flags = wire::JoinRequest::kAnyMaster;
  if (kind == MasterSession::Join::kResume) {
    std::lock_guard<std::mutex> lk(mu_);
    join.resume_flags = wire::JoinRequest::kResuming;
    join.run_id = run_id;
    join.term = term;
    join.peer_id = id_;
    const bool member = state_ == PeerState::kMember || state_ == PeerState::kVoting;
    if (member && topology_.epoch != 0) {
      join.epoch = topology_.epoch;
      for (const RingMember& r : topology_.ring) join.ring.push_back(r.id);
      if (topology_.rank < topology_.ring.size()) {
        join.ring_region = topology_.ring[topology_.rank].region;
        // What the ring's master found (its dial-back), for a master that takes the run over.
        join.inbound = topology_.ring[topology_.rank].inbound ? 1 : 0;
      }
      if (last_build_.isOk() && colls_->ringUsable()) join.resume_flags |= wire::JoinRequest::kRingUp;
    }
  }
  if (config_.master_reconnect_ms > 0) join.resume_flags |= wire::JoinRequest::kReconnects;
  if (join.resuming()) {
    // Only the holder of our ring key can take our place (docs/security.md).
    const std::vector<uint8_t> proof = net::resumeProof(link_->session(), join);
    join.resume_sig = identity_->sign(proof.data(), proof.size());
  }
  link_->send(join, 0);
}

void Communicator::Impl::startHeartbeats(Millis interval, Millis timeout) { link_->startHeartbeats(interval, timeout); }
void Communicator::Impl::setReady(bool ready) { link_->setReady(ready); }
void Communicator::Impl::close() { link_->close(); }
std::string Communicator::Impl::masterName() const { return link_->masterName(); }
void Communicator::Impl::later(std::function<void()> fn) { asio::post(io_, std::move(fn)); }

void Communicator::Impl::retryAfter(Millis pause) {
  retry_timer_.expires_after(pause);
  retry_timer_.async_wait([this](const asio::error_code& ec) {
    if (!ec) session_->retry();
  });
}

// ---- what the communicator does about it --------------------------------------------------------------

void Communicator::Impl::joined(const wire::JoinAccepted& m) {
  std::lock_guard<std::mutex> lk(mu_);
  id_ = m.peer_id;
  colls_->setName("peer=" + wire::shortId(id_));
  stats_.setPeer(wire::shortId(id_));
  PCCL_LOG_INFO(kLog, "peer={}: joined run {} (term {}), pending admission", wire::shortId(id_),
                wire::shortId(m.run_id), m.term);
  setState(PeerState::kPending);
}

// No master took us (a connect() fails), or none will take us back (the communicator is dead).
void Communicator::Impl::fatal(const Status& why) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (state_ == PeerState::kConnecting) {
      connect_error_ = why;
      setState(PeerState::kIdle);
      return;
    }
  }
  goFatal(why);
}

void Communicator::Impl::goFatal(const Status& s) {
  colls_->linkLost(s);
  ring_pool_->reset(Status::ok());
  prober_->cancel();
  std::lock_guard<std::mutex> lk(mu_);
  if (state_ == PeerState::kLeft || state_ == PeerState::kIdle || state_ == PeerState::kFailed) return;
  PCCL_LOG_WARN(kLog, "peer={} epoch={}: {}", wire::shortId(id_), topology_.epoch, s.toString());
  sync_->linkLost(s);
  fatal_ = s;
  away_ = false;
  setState(PeerState::kFailed);
}

void Communicator::Impl::away(const Status& s) {
  prober_->cancel();
  // A shared-state sync goes on (its transfers are between peers): the master that holds our place
  // repeats what we missed once we are back, and another master ends it (back()).
  std::lock_guard<std::mutex> lk(mu_);
  ++losses_;
  if (!away_) {
    away_ = true;
    away_since_ = Clock::now();
    away_why_ = s;
    away_term_ = session_->term();
    stats_.masterLost();
    PCCL_LOG_WARN(kLog, "peer={} epoch={}: lost the master ({}); collectives go on on the ring while it tries {} "
                  "master address(es) for up to {} ms",
                  wire::shortId(id_), topology_.epoch, s.message(), master_count_, config_.master_reconnect_ms);
  }
  // A ring being built goes on: a master that holds our place (a broken connection, not a dead master)
  // repeats what we missed once we are back (back()).
  cv_.notify_all();
}

// The new ring cannot be finished without the master that ordered it: under another master (another
// term: the one that ordered it is gone) the build ends here.
void Communicator::Impl::abandonBuild() {
  const Status why = Status::topologyChanged(fmt::format(
      "the master was lost while the ring of epoch {} was being built; call pcclUpdateTopology once it is back",
      building_.epoch));
  colls_->clearRing(why);
  ring_pool_->reset(Status::ok());
  last_build_ = why;
  ++builds_done_;
  setState(PeerState::kMember);
}

void Communicator::Impl::back(const wire::RunResumed& m, int64_t away_ms) {
  colls_->masterBack();
  std::lock_guard<std::mutex> lk(mu_);
  if (away_) stats_.masterBack(static_cast<uint64_t>(away_ms));
  if (away_ && m.term != away_term_) {
    if (state_ == PeerState::kBuildingRing) abandonBuild();
    sync_->interrupt(Status::topologyChanged(fmt::format(
        "the master was lost during the shared-state sync ({}); sync again now that {} (term {}) leads the run",
        away_why_.message(), link_->masterName(), m.term)));
  } else if (away_) {
    asio::post(io_, [this] { sync_->masterBack(); });
  }
  away_ = false;
  PCCL_LOG_INFO(kLog, "peer={} epoch={}: the run goes on under {} (term {}, epoch {}) after {} ms away{}{}",
                wire::shortId(id_), topology_.epoch, link_->masterName(), m.term, m.epoch, away_ms,
                m.stale != 0 ? "; the ring must be rebuilt: " : "", m.detail);
  if (state_ == PeerState::kVoting) asio::post(io_, [this] { sendVote(); });
  cv_.notify_all();
}

void Communicator::Impl::sendVote() {
  if (!link_ || !link_->isReady()) return;  // sent when the master is back (back())
  bool optimize;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (state_ != PeerState::kVoting) return;
    optimize = vote_optimize_;
  }
  if (optimize) {
    link_->send(wire::VoteOptimize{}, epoch());
  } else {
    link_->send(wire::VoteUpdate{}, epoch());
  }
}

Status Communicator::Impl::waitMaster(std::unique_lock<std::mutex>& lk, TimePoint deadline) {
  cv_.wait_until(lk, deadline, [&] { return !away_ || !fatal_.isOk(); });
  if (!fatal_.isOk()) return fatal_;
  if (!away_) return Status::ok();
  return Status::timeout(fmt::format("the master has been away for {} ms ({}); this peer is still trying to reach one",
                                     msSince(away_since_), away_why_.message()));
}

}  // namespace pccl
