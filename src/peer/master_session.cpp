#include "peer/master_session.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "net/tcp_rto.hpp"
#include "util/log.hpp"

namespace pccl::peer {

namespace {
constexpr const char* kLog = "peer";

// Codes that no other master, and no retry, can cure.
bool endsAttempts(Code c) {
  return c == Code::kAuthFailed || c == Code::kVersionMismatch || c == Code::kInvalidUsage || c == Code::kKicked ||
         c == Code::kInvalidArgument;
}
}  // namespace

MasterSession::MasterSession(Config config, Io& io, Listener& listener)
    : config_(std::move(config)), io_(io), listener_(listener) {}

void MasterSession::registerHandlers(wire::Dispatcher& d) {
  d.on<wire::JoinAccepted>([this](const wire::FrameHeader&, const wire::JoinAccepted& m) { return onJoinAccepted(m); });
  d.on<wire::RunResumed>([this](const wire::FrameHeader&, const wire::RunResumed& m) { return onRunResumed(m); });
}

void MasterSession::start() {
  state_ = State::kJoining;
  restartRound();
}

void MasterSession::stop() { state_ = State::kIdle; }

// A new round of attempts, from the current master on.
void MasterSession::restartRound() {
  attempts_since_ = config_.now();
  tried_ = refused_ = 0;
  cycles_ = 0;
  any_master_ = false;
  open();
}

void MasterSession::open() {
  joined_link_ = false;
  resume_sent_ = false;
  io_.dial(config_.masters[at_]);
}

void MasterSession::opened(const Status& s, bool refused) {
  if (state_ == State::kIdle) return;
  if (!s.isOk()) return attemptFailed(s, refused);
  sendJoin();
}

// The control connection is open: ask to join, or, when we belong to a run, to be taken back.
void MasterSession::sendJoin() {
  resume_sent_ = has_run_ && member();
  if (resume_sent_) return io_.sendJoin(Join::kResume, run_id_, term_);
  io_.sendJoin(any_master_ ? Join::kAnyMaster : Join::kNewcomer, wire::Uuid{}, 0);
}

// This master could not take us (unreachable, refused, or not the run's): the next one, at once, until
// every one was tried; then again after a pause, until master_reconnect_ms is spent.
void MasterSession::attemptFailed(const Status& s, bool refused) {
  if (endsAttempts(s.code())) return fail(s);
  const size_t n = config_.masters.size();
  ++tried_;
  if (refused) ++refused_;
  at_ = (at_ + 1) % n;
  if (tried_ < n) return open();
  // A newcomer every master refused as a standby: no master leads the run, so the next round asks one
  // to start it (one that leads answers as usual).
  const bool newcomer = !(has_run_ && member());
  const bool ask_any = newcomer && refused_ == n && !any_master_;
  if (ask_any) any_master_ = true;
  tried_ = refused_ = 0;
  ++cycles_;
  const int64_t spent = std::chrono::duration_cast<Millis>(config_.now() - attempts_since_).count();
  const int64_t limit = config_.master_reconnect_ms;
  if (!ask_any && (limit == 0 || spent >= limit)) {
    std::string where;
    for (const auto& m : config_.masters) where += (where.empty() ? "" : ", ") + m.toString();
    return fail(Status(s.code() == Code::kOk ? Code::kMasterUnreachable : s.code(),
                       n == 1 && limit == 0
                           ? s.message()
                           : fmt::format("no master of {} took this peer within {} ms (master_reconnect_ms {}); "
                                         "the last one: {}",
                                         where, spent, limit, s.message())));
  }
  io_.retryAfter(ask_any ? Millis(0) : doublingBackoff(Millis(50), cycles_, Millis(1000)));
}

void MasterSession::retry() {
  if (state_ != State::kIdle) open();
}

void MasterSession::fail(const Status& s) {
  state_ = State::kIdle;
  listener_.fatal(s);
}

// The connection broke (or the master refused us) before or after it took us in.
void MasterSession::lost(const Status& s, bool refused) {
  if (state_ == State::kIdle) return;
  if (!joined_link_) return attemptFailed(s, refused);
  if (endsAttempts(s.code()) || config_.master_reconnect_ms == 0) return fail(s);
  if (state_ != State::kAway) away_since_ = config_.now();
  state_ = State::kAway;
  listener_.away(s);
  if (state_ == State::kIdle) return;
  restartRound();  // the same master first: a broken connection, or a restart in place
}

Status MasterSession::onJoinAccepted(const wire::JoinAccepted& m) {
  if (has_run_ && (m.run_id != run_id_ || m.term < term_)) {
    // Another run's master, or one that a newer master replaced: following it would split the run.
    const Status why = Status::masterUnreachable(
        fmt::format("{} refused: it leads run {} at term {}, this peer follows run {} at term {}", io_.masterName(),
                    wire::shortId(m.run_id), m.term, wire::shortId(run_id_), term_));
    PCCL_LOG_WARN(kLog, "peer={}: {}", wire::shortId(peer_id_), why.message());
    io_.later([this, why] {
      io_.close();
      attemptFailed(why, false);
    });
    return Status::ok();
  }
  joined_link_ = true;
  // The master counts as lost after its silence outlasts our peer_timeout_ms (at least two of its
  // heartbeats), TCP's retransmission after a dark path came back (net/tcp_rto.hpp) and one more of its
  // heartbeats: a path dark for less than peer_timeout_ms loses no master (docs/algorithms.md §6).
  io_.startHeartbeats(Millis(std::min(config_.heartbeat_interval_ms, m.heartbeat_interval_ms)),
                      Millis(std::max<uint64_t>(config_.peer_timeout_ms, 2ull * m.heartbeat_interval_ms) +
                             net::tcpRecoveryMs() + m.heartbeat_interval_ms));
  if (resume_sent_) {
    if (m.resumed == 0 || m.peer_id != peer_id_) return Status::protocol("JoinAccepted did not take this peer back");
    term_ = m.term;
    PCCL_LOG_INFO(kLog, "peer={}: {} took this peer back (run {}, term {}); waiting for the run to resume",
                  wire::shortId(peer_id_), io_.masterName(), wire::shortId(run_id_), term_);
    return Status::ok();
  }
  if (state_ != State::kJoining) return Status::protocol("JoinAccepted while not joining");
  has_run_ = true;
  run_id_ = m.run_id;
  term_ = m.term;
  peer_id_ = m.peer_id;
  state_ = State::kJoined;
  io_.setReady(true);
  listener_.joined(m);
  return Status::ok();
}

Status MasterSession::onRunResumed(const wire::RunResumed& m) {
  if (!resume_sent_ || !joined_link_) return Status::ok();  // we joined this master as a newcomer: nothing to resume
  const int64_t away_ms =
      state_ == State::kAway ? std::chrono::duration_cast<Millis>(config_.now() - away_since_).count() : 0;
  state_ = State::kJoined;
  io_.setReady(true);
  listener_.back(m, away_ms);
  return Status::ok();
}

}  // namespace pccl::peer
