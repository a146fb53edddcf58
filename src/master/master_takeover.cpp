// MasterServer, taking a run over (run_recovery.hpp): members coming back to this master, the end of
// the rebuild window, dropping a run a newer master leads, the state file, and the etcd leadership
// (etcd_leadership.hpp). The rest of MasterServer is master_server.cpp.
#include <fmt/format.h>

#include <vector>

#include "master/master_server.hpp"
#include "util/log.hpp"

namespace pccl::master {

using wire::shortId;

namespace {
constexpr const char* kLog = "master";
}  // namespace

Status MasterServer::resumePeer(Session& s, const wire::JoinRequest& m) {
  const bool recovering = recovery_->role() == MasterRole::kRecovering;
  // A peer that held no ring (still pending) comes back as a pending peer under its id.
  const bool pending = m.epoch == 0 && (m.resume_flags & wire::JoinRequest::kRingUp) == 0;
  if (!membership_.contains(m.peer_id) && !recovering && !pending) {
    s.conn->sendErrorAndClose(
        Status::kicked(fmt::format("peer {} is no longer a member of run {}: it was removed while it was away from "
                                   "this master (epoch {} now); create a new communicator and join again",
                                   shortId(m.peer_id), shortId(m.run_id), membership_.epoch())),
        membership_.epoch());
    return Status::ok();
  }
  if (pending && !membership_.contains(m.peer_id) && membership_.size() >= config_.max_peers) {
    // Back as a pending peer the master does not hold: admitted as a newcomer would be.
    return refuseJoin(s, Status::invalidUsage(fmt::format("run is full: max_peers = {} reached", config_.max_peers)));
  }
  if (Session* old = sessionById(m.peer_id); old != nullptr && old != &s) {
    // Its old connection is still open here (the peer gave up on it first): this one replaces it.
    PCCL_LOG_INFO(kLog, "peer={}: came back on a new connection from {}; closing its old one", shortId(m.peer_id),
                  s.conn->peerName());
    old->joined = false;
    serial_by_id_.erase(m.peer_id);
    old->conn->close(Status::ok());
  }
  wire::MemberInfo info = memberInfo(s, m);
  info.id = m.peer_id;
  s.p2p = net::HostPort{info.host, info.port};
  backFromHold(m.peer_id);
  s.joined = true;
  s.id = m.peer_id;
  serial_by_id_[m.peer_id] = s.serial;
  sendAccepted(s, m.peer_id, true);
  if (pending && !membership_.contains(m.peer_id)) apply(membership_.join(info));
  if (!recovering) {
    sendResumed(s);
    if (membership_.contains(m.peer_id)) {
      apply(membership_.returned(m.peer_id));
      apply(syncs_.returned(m.peer_id));
    }
    return Status::ok();
  }
  s.awaiting_resume = true;
  if (!pending) {
    if (!membership_.contains(m.peer_id)) apply(membership_.rejoin(info, 0));
    // Its place in the ring it holds, with the region that ring gave it: the run goes on with the regions
    // its members hold (the next build decides them again, from what they declared and the links).
    wire::MemberInfo held = info;
    held.region = m.ring_region;
    recovery_->noteReturn(held, m);
  }
  if (recovery_->due(Clock::now())) finishRecovery();
  return Status::ok();
}

void MasterServer::sendResumed(Session& s) {
  wire::RunResumed r;
  r.epoch = membership_.epoch();
  r.term = recovery_->run().term;
  r.stale = membership_.status().stale;
  r.detail = membership_.staleReason();
  s.conn->send(r, membership_.epoch());
  s.last_tx = Clock::now();
}

void MasterServer::finishRecovery() {
  RunRecovery::Rebuild r = recovery_->finish();
  PCCL_LOG_INFO(kLog, "run {} (term {}): goes on at epoch {} with {} member(s){}{}", shortId(recovery_->run().run_id),
                recovery_->run().term, r.epoch, r.ring.size(), r.stale ? "; stale: " : "", r.why);
  // The members that came back hear that the run goes on before anything else (a newcomer admitted by
  // the resume hears of its ring as usual).
  std::vector<Session*> returned;
  for (auto& kv : sessions_) {
    if (kv.second->joined && kv.second->awaiting_resume) returned.push_back(kv.second.get());
    kv.second->awaiting_resume = false;
  }
  Effects fx = membership_.resume(r.epoch, std::move(r.ring), r.stale ? r.why : std::string());
  for (Session* s : returned) sendResumed(*s);
  apply(fx);
  publishRecord();
}

void MasterServer::resetRun(const Session* keep, const Status& why) {
  std::vector<std::shared_ptr<net::Connection>> conns;
  for (auto& kv : sessions_) {
    if (kv.second.get() == keep) continue;
    kv.second->joined = false;  // no departure to report: the run is not ours any more
    conns.push_back(kv.second->conn);
  }
  serial_by_id_.clear();
  for (auto& c : conns) c->sendErrorAndClose(why, membership_.epoch());
  freshBooks();
}

void MasterServer::onElected(const EtcdRecord& record) {
  if (stopping_) return;
  recovery_->elect(record.run, Clock::now());
  ++takeovers_;
  if (recovery_->role() == MasterRole::kRecovering) {
    membership_.hold();
    PCCL_LOG_INFO(kLog, "etcd: elected leader of run {} at term {} (the last leader was {}); waiting up to {} ms for "
                  "its members to come back",
                  shortId(record.run.run_id), record.run.term, record.leader.empty() ? "?" : record.leader,
                  config_.rebuild_window_ms);
  } else {
    PCCL_LOG_INFO(kLog, "etcd: elected leader of a new run {} at term {}", shortId(recovery_->run().run_id),
                  recovery_->run().term);
  }
  publishRecord();
  publishStats();
}

void MasterServer::onDeposed(const Status& why) {
  if (stopping_) return;
  PCCL_LOG_WARN(kLog, "etcd: stepping down: {}", why.message());
  ++step_downs_;
  resetRun(nullptr, Status::masterUnreachable("this master stepped down: " + why.message()));
  recovery_->follow("");
  publishStats();
}

void MasterServer::publishRecord() {
  if (!etcd_ || recovery_->changes() == published_) return;
  published_ = recovery_->changes();
  EtcdRecord r;
  r.run = recovery_->run();
  for (const auto& m : membership_.ring()) r.members.push_back(m.id);
  etcd_->publish(r);
}

Status MasterServer::persistRecord() {
  if (config_.state_file.empty() || recovery_->changes() == persisted_) return Status::ok();
  Status st = writeRunRecord(config_.state_file, recovery_->run());
  if (!st.isOk()) {
    PCCL_LOG_ERROR(kLog, "{}", st.toString());
    return st;
  }
  persisted_ = recovery_->changes();
  return Status::ok();
}

}  // namespace pccl::master
