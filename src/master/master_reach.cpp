// MasterServer, a new member's reachability (issue 37): the master dials the ring port the member
// advertised, once, as its ring neighbours will, authenticates like a ring connection and drops it (the
// peer takes it for a ring connection that said no hello, as with checkHeldAlive). A port that answers is
// reachable; one that refuses or stays dark (a firewall, a NAT, an advertised address that is not the
// peer's) is not: logged with the address the member's connection to the master came from (the public
// side of a NAT, when it differs from the advertised one) and counted in MasterStats::unreachable. The
// member joins the membership once the verdict is in (MemberInfo::inbound: whoever can dial, dials); a
// member that declared inbound = false is not dialled (master_server.cpp).
#include <fmt/format.h>

#include "master/master_server.hpp"
#include "net/handshake.hpp"
#include "util/log.hpp"

namespace pccl::master {

using wire::shortId;

namespace {
constexpr const char* kLog = "master";
}  // namespace

void MasterServer::checkReachable(wire::MemberInfo info, const std::string& seen) {
  const Millis timeout(config_.handshake_timeout_ms);
  const wire::Uuid id = info.id;
  const std::string where = fmt::format("{}:{}", info.host, info.port);
  const net::HostPort at{info.host, info.port};
  auto done = [this, info = std::move(info), where, seen](bool ok, const std::string& why) {
    // Its session may have closed meanwhile (then it never joined), or come back as a resume that put
    // it in the membership already.
    if (stopping_ || serial_by_id_.count(info.id) == 0) return;
    reachable_[info.id] = ok;
    if (ok) {
      PCCL_LOG_INFO(kLog, "peer={}: its ring port {} accepts connections from the master; its connection came from {}",
                    shortId(info.id), where, seen);
    } else {
      PCCL_LOG_WARN(kLog,
                    "peer={}: its ring port {} is not reachable from the master ({}); its connection came from {}: "
                    "behind a firewall or NAT, or advertising an address that is not its own; its links will be "
                    "opened from its side",
                    shortId(info.id), where, why, seen);
    }
    if (!membership_.contains(info.id)) {
      wire::MemberInfo joined = info;
      joined.inbound = ok ? 1 : 0;
      apply(membership_.join(joined));
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
