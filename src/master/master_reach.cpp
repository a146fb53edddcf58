// MasterServer, a new member's reachability (issue 37): the master dials the ring port the member
// advertised, once, as its ring neighbours will, authenticates like a ring connection and drops it (the
// peer takes it for a ring connection that said no hello, as with checkHeldAlive). A port that answers is
// reachable; one that refuses or stays dark (a firewall, a NAT, an advertised address that is not the
// peer's) is not: logged with the address the member's connection to the master came from (the public
// side of a NAT, when it differs from the advertised one) and counted in MasterStats::unreachable. The
// join does not wait for it.
#include <fmt/format.h>

#include "master/master_server.hpp"
#include "net/handshake.hpp"
#include "util/log.hpp"

namespace pccl::master {

using wire::shortId;

namespace {
constexpr const char* kLog = "master";
}  // namespace

void MasterServer::checkReachable(const wire::Uuid& id, const net::HostPort& at, const std::string& seen) {
  const Millis timeout(config_.handshake_timeout_ms);
  const std::string where = fmt::format("{}:{}", at.host, at.port);
  auto done = [this, id, where, seen](bool ok, const std::string& why) {
    if (stopping_ || !membership_.contains(id)) return;
    reachable_[id] = ok;
    if (ok) {
      PCCL_LOG_INFO(kLog, "peer={}: its ring port {} accepts connections from the master; its connection came from {}",
                    shortId(id), where, seen);
    } else {
      PCCL_LOG_WARN(kLog,
                    "peer={}: its ring port {} is not reachable from the master ({}); its connection came from {}: "
                    "behind a firewall or NAT, or advertising an address that is not its own, no ring neighbour "
                    "can dial it",
                    shortId(id), where, why, seen);
    }
    publishStats();
  };
  net::ClientHandshake hs{wire::Role::kPeerToPeer, key_, timeout, "reachability of peer " + shortId(id)};
  net::asyncConnect(io_, at, timeout, [this, hs, done](net::Connected c) {
    if (stopping_) return;
    if (c.ec) {
      done(false, c.timed_out ? "no answer to a connection" : c.ec.message());
      return;
    }
    net::asyncClientHandshake(std::move(c.socket), hs, [done](Result<net::Link> r) {
      done(r.isOk(), r.isOk() ? std::string() : r.status().message());
    });
  });
}

}  // namespace pccl::master
