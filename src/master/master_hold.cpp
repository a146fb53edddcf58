// MasterServer, a member whose control connection broke (docs/protocol.md §8.4, "A broken connection"):
// a middlebox reset, or an error on the way, is not the peer leaving. A member that said it comes back
// (JoinRequest::kReconnects) keeps its place for the silence limit (what a silent peer gets) while it
// dials the master again and resumes its session; its ring goes on meanwhile. A process that is gone
// refuses connections on its ring port: the master dials it once, and removes it at once on a refusal.
#include <fmt/format.h>

#include "master/master_server.hpp"
#include "net/handshake.hpp"
#include "net/tcp_rto.hpp"
#include "util/log.hpp"

namespace pccl::master {

using wire::shortId;

namespace {
constexpr const char* kLog = "master";
// Between two dials of a held member's ring port whose connection was dropped unanswered.
constexpr Millis kHeldRedial{100};
}  // namespace

bool MasterServer::holdPeer(const Session& s, const Status& reason) {
  if (!s.reconnects || !membership_.contains(s.id) || recovery_->role() != MasterRole::kLeader) return false;
  const Millis grace(config_.peer_timeout_ms + net::tcpRecoveryMs() + config_.heartbeat_interval_ms);
  const TimePoint now = Clock::now();
  Held& h = held_[s.id];
  h.since = now;
  h.until = now + grace;
  h.why = reason.message();
  h.gen = ++hold_gen_;
  PCCL_LOG_INFO(kLog, "peer={}: its connection from {} broke ({}); holding its place for {} ms for it to come back",
                shortId(s.id), s.conn->peerName(), h.why, grace.count());
  // A member that cannot be dialled (a firewall may well refuse the dial) waits for its deadline.
  if (dialable(s.id)) checkHeldAlive(s.id, h.gen, s.p2p);
  publishStats();  // one connection fewer
  return true;
}

// A dial of the member's ring port, authenticated like a ring connection and dropped at once (the
// peer takes it for a ring connection that said no hello). Refused: the process is gone. A handshake
// that completes: it lives, and the hold runs to its deadline. A connection taken but dropped before
// the handshake ends is what a dying process's listener does in the moment before the kernel closes
// it: dial again shortly (a few times), and the next dial is refused. A dial that times out (a dark
// path) leaves the hold to its deadline.
void MasterServer::checkHeldAlive(const wire::Uuid& id, uint64_t gen, const net::HostPort& at, uint32_t attempts_left) {
  const Millis timeout(config_.handshake_timeout_ms);
  net::ClientHandshake hs{wire::Role::kPeerToPeer, key_, timeout, "held peer " + shortId(id)};
  net::asyncConnect(io_, at, timeout, [this, id, gen, at, hs, attempts_left, timeout](net::Connected c) {
    if (stopping_) return;
    auto held = [this, id, gen] {
      auto it = held_.find(id);
      return it != held_.end() && it->second.gen == gen;
    };
    if (c.ec == asio::error::connection_refused) {
      if (!held()) return;
      auto it = held_.find(id);
      const std::string detail = fmt::format("{}; its ring port refuses connections: the peer is gone", it->second.why);
      held_.erase(it);
      removePeer(id, wire::LeaveReason::kConnectionLost, detail);
      publishStats();
      return;
    }
    if (c.ec) return;  // no answer: the deadline decides
    const TimePoint started = Clock::now();
    net::asyncClientHandshake(std::move(c.socket), hs,
                              [this, id, gen, at, attempts_left, started, timeout, held](Result<net::Link> r) {
      if (stopping_ || r.isOk() || attempts_left <= 1 || !held()) return;
      if (Clock::now() - started >= timeout) return;  // the handshake timed out: a dark path, not a dying process
      auto timer = std::make_shared<asio::steady_timer>(io_, kHeldRedial);
      timer->async_wait([this, timer, id, gen, at, attempts_left](const asio::error_code& ec) {
        if (!ec && !stopping_) checkHeldAlive(id, gen, at, attempts_left - 1);
      });
    });
  });
}

bool MasterServer::dialable(const wire::Uuid& id) const {
  auto r = reachable_.find(id);
  if (r != reachable_.end()) return r->second;
  for (const wire::MemberInfo& m : membership_.ring()) {
    if (m.id == id) return m.inbound != 0;
  }
  return true;
}

void MasterServer::backFromHold(const wire::Uuid& id) {
  auto it = held_.find(id);
  if (it == held_.end()) return;
  PCCL_LOG_INFO(kLog, "peer={}: came back {} ms after its connection broke; the run goes on with it", shortId(id),
                std::chrono::duration_cast<Millis>(Clock::now() - it->second.since).count());
  held_.erase(it);
}

void MasterServer::expireHolds(TimePoint now) {
  std::vector<std::pair<wire::Uuid, std::string>> gone;
  for (auto it = held_.begin(); it != held_.end();) {
    if (now < it->second.until) {
      ++it;
      continue;
    }
    gone.emplace_back(it->first, fmt::format("its connection broke ({}) and it did not come back within {} ms",
                                             it->second.why,
                                             std::chrono::duration_cast<Millis>(it->second.until - it->second.since).count()));
    it = held_.erase(it);
  }
  for (const auto& [id, detail] : gone) removePeer(id, wire::LeaveReason::kTimeout, detail);
  if (!gone.empty()) publishStats();
}

}  // namespace pccl::master
