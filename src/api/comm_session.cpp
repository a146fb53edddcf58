// Communicator::Impl, the master connection (io thread): trying the run's masters in turn, joining,
// coming back to a master after losing one, and giving up (docs/concepts.md "When the master dies",
// docs/protocol.md §8.8).
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

using peer::PeerState;

namespace {
constexpr const char* kClientVersion = "pccl " PCCL_VERSION_STRING;

// Codes that no other master, and no retry, can cure.
bool endsAttempts(Code c) {
  return c == Code::kAuthFailed || c == Code::kVersionMismatch || c == Code::kInvalidUsage || c == Code::kKicked ||
         c == Code::kInvalidArgument;
}
}  // namespace

void Communicator::Impl::ioStartSession() {
  if (!link_) {
    link_ = std::make_unique<peer::MasterLink>(io_, key_, Millis(config_.handshake_timeout_ms));
    master_port_ = std::make_unique<LinkMasterPort>(*link_, *colls_);
    colls_->setMaster(master_port_.get());
    registerSessionHandlers();
  }
  attempts_since_ = Clock::now();
  tried_ = refused_ = 0;
  cycles_ = 0;
  any_master_ = false;
  openMaster();
}

void Communicator::Impl::openMaster() {
  joined_link_ = false;
  resume_sent_ = false;
  link_->open(
      masters_[master_at_], [this](const Status& s) { onMasterOpened(s); }, [this](const Status& s) { onLost(s); });
}

void Communicator::Impl::onMasterOpened(const Status& s) {
  if (!s.isOk()) return attemptFailed(s);
  sendJoin();
}

// The control connection is open: ask to join, or, when we belong to a run, to be taken back.
void Communicator::Impl::sendJoin() {
  wire::JoinRequest join;
  join.p2p_port = listener_->port();
  join.advertise_host = config_.advertise_host;
  join.group = config_.peer_group;
  join.connections = config_.connections_per_peer;
  join.host_connections =
      config_.same_host_connections != 0 ? config_.same_host_connections : config_.connections_per_peer;
  join.ring_key = identity_->publicKey();
  join.client_version = kClientVersion;
  {
    std::lock_guard<std::mutex> lk(mu_);
    resume_sent_ = has_run_ && peer::isJoined(state_);
    if (resume_sent_) {
      join.resume_flags = wire::JoinRequest::kResuming;
      join.run_id = run_id_;
      join.term = term_;
      join.peer_id = id_;
      const bool member = state_ == PeerState::kMember || state_ == PeerState::kVoting;
      if (member && topology_.epoch != 0) {
        join.epoch = topology_.epoch;
        for (const RingMember& r : topology_.ring) join.ring.push_back(r.id);
        if (last_build_.isOk() && colls_->ringUsable()) join.resume_flags |= wire::JoinRequest::kRingUp;
      }
      // Only the holder of our ring key can take our place (docs/security.md).
      const std::vector<uint8_t> proof = net::resumeProof(link_->session(), join);
      join.resume_sig = identity_->sign(proof.data(), proof.size());
    } else if (any_master_) {
      join.resume_flags = wire::JoinRequest::kAnyMaster;
    }
  }
  link_->send(join, 0);
}

// This master could not take us (unreachable, refused, or not the run's): the next one, at once, until
// every one was tried; then again after a pause, until master_reconnect_ms is spent.
void Communicator::Impl::attemptFailed(const Status& s) {
  if (endsAttempts(s.code())) return giveUp(s);
  ++tried_;
  if (link_->refused()) ++refused_;
  master_at_ = (master_at_ + 1) % masters_.size();
  if (tried_ < masters_.size()) return openMaster();
  // A newcomer every master refused as a standby: no master leads the run, so the next round asks one
  // to start it (one that leads answers as usual).
  bool newcomer;
  {
    std::lock_guard<std::mutex> lk(mu_);
    newcomer = !(has_run_ && peer::isJoined(state_));
  }
  const bool ask_any = newcomer && refused_ == masters_.size() && !any_master_;
  if (ask_any) any_master_ = true;
  tried_ = refused_ = 0;
  ++cycles_;
  const int64_t spent = msSince(attempts_since_);
  if (!ask_any && (config_.master_reconnect_ms == 0 || spent >= config_.master_reconnect_ms)) {
    std::string where;
    for (const auto& m : masters_) where += (where.empty() ? "" : ", ") + m.toString();
    return giveUp(Status(s.code() == Code::kOk ? Code::kMasterUnreachable : s.code(),
                         masters_.size() == 1 && config_.master_reconnect_ms == 0
                             ? s.message()
                             : fmt::format("no master of {} took this peer within {} ms (master_reconnect_ms {}); "
                                           "the last one: {}",
                                           where, spent, config_.master_reconnect_ms, s.message())));
  }
  const Millis pause = ask_any ? Millis(0) : Millis(std::min<int64_t>(1000, int64_t{50} << std::min<uint32_t>(cycles_, 5)));
  retry_timer_.expires_after(pause);
  retry_timer_.async_wait([this](const asio::error_code& ec) {
    if (ec) return;
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (state_ == PeerState::kLeft || state_ == PeerState::kFailed || state_ == PeerState::kIdle) return;
    }
    openMaster();
  });
}

void Communicator::Impl::giveUp(const Status& s) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (state_ == PeerState::kConnecting) {
      connect_error_ = s;
      setState(PeerState::kIdle);
      return;
    }
  }
  goFatal(s);
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

// The link broke (or the master refused us) before or after it took us in.
void Communicator::Impl::onLost(const Status& s) {
  if (!joined_link_) return attemptFailed(s);
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (state_ == PeerState::kLeft || state_ == PeerState::kIdle || state_ == PeerState::kFailed) return;
  }
  if (endsAttempts(s.code()) || config_.master_reconnect_ms == 0) return goFatal(s);
  masterAway(s);
  attempts_since_ = Clock::now();
  tried_ = refused_ = 0;
  cycles_ = 0;
  any_master_ = false;
  openMaster();  // the same master first: a broken connection, or a restart in place
}

void Communicator::Impl::masterAway(const Status& s) {
  prober_->cancel();
  sync_->interrupt(Status::topologyChanged(
      fmt::format("the master was lost during the shared-state sync ({}); sync again once it is back", s.message())));
  std::lock_guard<std::mutex> lk(mu_);
  ++losses_;
  if (!away_) {
    away_ = true;
    away_since_ = Clock::now();
    away_why_ = s;
    stats_.masterLost();
    PCCL_LOG_WARN(kLog, "peer={} epoch={}: lost the master ({}); collectives go on on the ring while it tries {} "
                  "master address(es) for up to {} ms",
                  wire::shortId(id_), topology_.epoch, s.message(), masters_.size(), config_.master_reconnect_ms);
  }
  if (state_ == PeerState::kBuildingRing) {
    // The new ring cannot be finished without the master that ordered it (the old one is gone already).
    const Status why = Status::topologyChanged(fmt::format(
        "the master was lost while the ring of epoch {} was being built; call pcclUpdateTopology once it is back",
        building_.epoch));
    colls_->clearRing(why);
    ring_pool_->reset(Status::ok());
    last_build_ = why;
    ++builds_done_;
    setState(PeerState::kMember);
  }
  cv_.notify_all();
}

Status Communicator::Impl::onJoined(const wire::JoinAccepted& m) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (has_run_ && (m.run_id != run_id_ || m.term < term_)) {
      // Another run's master, or one that a newer master replaced: following it would split the run.
      const Status why = Status::masterUnreachable(fmt::format(
          "{} refused: it leads run {} at term {}, this peer follows run {} at term {}", link_->masterName(),
          wire::shortId(m.run_id), m.term, wire::shortId(run_id_), term_));
      PCCL_LOG_WARN(kLog, "peer={}: {}", wire::shortId(id_), why.message());
      asio::post(io_, [this, why] {
        link_->close();
        attemptFailed(why);
      });
      return Status::ok();
    }
  }
  joined_link_ = true;
  Millis interval(std::min(config_.heartbeat_interval_ms, m.heartbeat_interval_ms));
  Millis timeout(std::max<uint64_t>(config_.peer_timeout_ms, 2ull * m.heartbeat_interval_ms));
  link_->startHeartbeats(interval, timeout);
  std::lock_guard<std::mutex> lk(mu_);
  if (resume_sent_) {
    if (m.resumed == 0 || m.peer_id != id_) return Status::protocol("JoinAccepted did not take this peer back");
    term_ = m.term;
    PCCL_LOG_INFO(kLog, "peer={} epoch={}: {} took this peer back (run {}, term {}); waiting for the run to resume",
                  wire::shortId(id_), topology_.epoch, link_->masterName(), wire::shortId(run_id_), term_);
    return Status::ok();
  }
  if (state_ != PeerState::kConnecting) return Status::protocol("JoinAccepted while not joining");
  id_ = m.peer_id;
  has_run_ = true;
  run_id_ = m.run_id;
  term_ = m.term;
  link_->setReady(true);
  colls_->setName("peer=" + wire::shortId(id_));
  stats_.setPeer(wire::shortId(id_));
  PCCL_LOG_INFO(kLog, "peer={}: joined run {} (term {}), pending admission", wire::shortId(id_), wire::shortId(run_id_),
                term_);
  setState(PeerState::kPending);
  return Status::ok();
}

Status Communicator::Impl::onRunResumed(const wire::RunResumed& m) {
  if (!resume_sent_ || !joined_link_) return Status::ok();  // we joined this master as a newcomer: nothing to resume
  link_->setReady(true);
  colls_->masterBack();
  std::lock_guard<std::mutex> lk(mu_);
  const int64_t away_ms = away_ ? msSince(away_since_) : 0;
  if (away_) stats_.masterBack(static_cast<uint64_t>(away_ms));
  away_ = false;
  PCCL_LOG_INFO(kLog, "peer={} epoch={}: the run goes on under {} (term {}, epoch {}) after {} ms away{}{}",
                wire::shortId(id_), topology_.epoch, link_->masterName(), m.term, m.epoch, away_ms,
                m.stale != 0 ? "; the ring must be rebuilt: " : "", m.detail);
  if (state_ == PeerState::kVoting) asio::post(io_, [this] { sendVote(); });
  cv_.notify_all();
  return Status::ok();
}

void Communicator::Impl::sendVote() {
  if (!link_ || !link_->isReady()) return;  // sent when the master is back (onRunResumed)
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
