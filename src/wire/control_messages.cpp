#include "wire/control_messages.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>

namespace pccl::wire {

namespace {
bool isLoopback(const std::string& host) {
  if (host == "localhost" || host == "::1" || host == "[::1]") return true;
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  return inet_pton(AF_INET6, host.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}
}  // namespace

bool sameHost(const std::string& a, const std::string& b) {
  if (a.empty() || b.empty()) return false;
  return a == b || (isLoopback(a) && isLoopback(b));
}

bool isValidRegion(const std::string& region) {
  if (region.size() > kMaxRegion) return false;
  for (const char c : region) {
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

namespace {
Status readLevels(ByteReader& r, uint8_t* levels, const char* what) {
  PCCL_RETURN_IF_ERROR(r.u8(levels));
  if (*levels > kMaxLevels) return Status::protocol(fmt::format("{} levels {} unknown", what, *levels));
  return Status::ok();
}

// A 0/1 byte.
Status readFlag(ByteReader& r, uint8_t* flag, const char* what) {
  PCCL_RETURN_IF_ERROR(r.u8(flag));
  if (*flag > 1) return Status::protocol(fmt::format("{} is {} (0 or 1)", what, *flag));
  return Status::ok();
}

// A region string: length-checked by the reader, then its characters (docs/protocol.md §5.2.2).
Status readRegion(ByteReader& r, std::string* region, const char* what) {
  PCCL_RETURN_IF_ERROR(r.str(region, kMaxRegion));
  if (!isValidRegion(*region)) {
    return Status::protocol(fmt::format("{} has a character outside [A-Za-z0-9._-]", what));
  }
  return Status::ok();
}
}  // namespace

bool opensLink(const MemberInfo& from, const MemberInfo& to) {
  return to.inbound != 0 || from.inbound == 0 || sameHost(from.host, to.host);
}

bool linkable(const MemberInfo& a, const MemberInfo& b) {
  return a.inbound != 0 || b.inbound != 0 || sameHost(a.host, b.host);
}

uint32_t linkConnections(const MemberInfo& from, const MemberInfo& to) {
  return sameHost(from.host, to.host) && from.host_connections != 0 ? from.host_connections : from.connections;
}

void JoinRequest::encode(ByteWriter& w) const {
  w.u16(p2p_port);
  w.str(advertise_host);
  w.u32(group);
  w.u32(connections);
  w.u32(host_connections);
  w.fixed(ring_key);
  w.str(client_version);
  w.u8(resume_flags);
  w.fixed(run_id);
  w.u64(term);
  w.fixed(peer_id);
  w.u64(epoch);
  w.u32(static_cast<uint32_t>(ring.size()));
  for (const Uuid& id : ring) w.fixed(id);
  if (resuming()) w.fixed(resume_sig);
  w.str(region);
  w.str(ring_region);
  w.u8(levels);
  w.u8(inbound);
}
Result<JoinRequest> JoinRequest::decode(ByteReader& r) {
  JoinRequest m;
  PCCL_RETURN_IF_ERROR(r.u16(&m.p2p_port));
  PCCL_RETURN_IF_ERROR(r.str(&m.advertise_host, 255));
  PCCL_RETURN_IF_ERROR(r.u32(&m.group));
  PCCL_RETURN_IF_ERROR(r.u32(&m.connections));
  PCCL_RETURN_IF_ERROR(r.u32(&m.host_connections));
  PCCL_RETURN_IF_ERROR(r.fixed(&m.ring_key));
  PCCL_RETURN_IF_ERROR(r.str(&m.client_version, 64));
  PCCL_RETURN_IF_ERROR(r.u8(&m.resume_flags));
  if ((m.resume_flags & ~(JoinRequest::kResuming | JoinRequest::kRingUp | JoinRequest::kAnyMaster |
                          JoinRequest::kReconnects)) != 0) {
    return Status::protocol(fmt::format("JoinRequest resume_flags {} has unknown bits", m.resume_flags));
  }
  PCCL_RETURN_IF_ERROR(r.fixed(&m.run_id));
  PCCL_RETURN_IF_ERROR(r.u64(&m.term));
  PCCL_RETURN_IF_ERROR(r.fixed(&m.peer_id));
  PCCL_RETURN_IF_ERROR(r.u64(&m.epoch));
  uint32_t n = 0;
  PCCL_RETURN_IF_ERROR(r.count(&n, 16));
  if (n > kMaxResumeRing) return Status::protocol(fmt::format("JoinRequest ring of {} members (max {})", n, kMaxResumeRing));
  m.ring.resize(n);
  for (Uuid& id : m.ring) PCCL_RETURN_IF_ERROR(r.fixed(&id));
  if (m.resuming()) PCCL_RETURN_IF_ERROR(r.fixed(&m.resume_sig));
  PCCL_RETURN_IF_ERROR(readRegion(r, &m.region, "JoinRequest region"));
  PCCL_RETURN_IF_ERROR(readRegion(r, &m.ring_region, "JoinRequest ring_region"));
  PCCL_RETURN_IF_ERROR(readLevels(r, &m.levels, "JoinRequest"));
  PCCL_RETURN_IF_ERROR(readFlag(r, &m.inbound, "JoinRequest inbound"));
  return m;
}

void JoinAccepted::encode(ByteWriter& w) const {
  w.fixed(peer_id);
  w.u32(heartbeat_interval_ms);
  w.u32(peer_timeout_ms);
  w.fixed(run_id);
  w.u64(term);
  w.u64(epoch);
  w.u8(resumed);
}
Result<JoinAccepted> JoinAccepted::decode(ByteReader& r) {
  JoinAccepted m;
  PCCL_RETURN_IF_ERROR(r.fixed(&m.peer_id));
  PCCL_RETURN_IF_ERROR(r.u32(&m.heartbeat_interval_ms));
  PCCL_RETURN_IF_ERROR(r.u32(&m.peer_timeout_ms));
  PCCL_RETURN_IF_ERROR(r.fixed(&m.run_id));
  PCCL_RETURN_IF_ERROR(r.u64(&m.term));
  PCCL_RETURN_IF_ERROR(r.u64(&m.epoch));
  PCCL_RETURN_IF_ERROR(r.u8(&m.resumed));
  return m;
}

void RunResumed::encode(ByteWriter& w) const {
  w.u64(epoch);
  w.u64(term);
  w.u8(stale);
  w.str(detail);
}
Result<RunResumed> RunResumed::decode(ByteReader& r) {
  RunResumed m;
  PCCL_RETURN_IF_ERROR(r.u64(&m.epoch));
  PCCL_RETURN_IF_ERROR(r.u64(&m.term));
  PCCL_RETURN_IF_ERROR(r.u8(&m.stale));
  PCCL_RETURN_IF_ERROR(r.str(&m.detail, 4096));
  return m;
}

void encodeMember(ByteWriter& w, const MemberInfo& m) {
  w.fixed(m.id);
  w.str(m.host);
  w.u16(m.port);
  w.u32(m.group);
  w.u32(m.connections);
  w.u32(m.host_connections);
  w.fixed(m.ring_key);
  w.str(m.region);
  w.u8(m.levels);
  w.u64(m.two_level_bytes);
  w.u8(m.inbound);
  w.fixed(m.relay);
}

Status decodeMember(ByteReader& r, MemberInfo* m) {
  PCCL_RETURN_IF_ERROR(r.fixed(&m->id));
  PCCL_RETURN_IF_ERROR(r.str(&m->host, 255));
  PCCL_RETURN_IF_ERROR(r.u16(&m->port));
  PCCL_RETURN_IF_ERROR(r.u32(&m->group));
  PCCL_RETURN_IF_ERROR(r.u32(&m->connections));
  PCCL_RETURN_IF_ERROR(r.u32(&m->host_connections));
  PCCL_RETURN_IF_ERROR(r.fixed(&m->ring_key));
  PCCL_RETURN_IF_ERROR(readRegion(r, &m->region, "member region"));
  PCCL_RETURN_IF_ERROR(readLevels(r, &m->levels, "member"));
  PCCL_RETURN_IF_ERROR(r.u64(&m->two_level_bytes));
  PCCL_RETURN_IF_ERROR(readFlag(r, &m->inbound, "member inbound"));
  PCCL_RETURN_IF_ERROR(r.fixed(&m->relay));
  if (m->relay == m->id) return Status::protocol("a member that relays its own ring link");
  return Status::ok();
}

void TopologyUpdate::encode(ByteWriter& w) const {
  w.u64(epoch);
  w.u32(static_cast<uint32_t>(ring.size()));
  for (const MemberInfo& m : ring) encodeMember(w, m);
}
Result<TopologyUpdate> TopologyUpdate::decode(ByteReader& r) {
  TopologyUpdate m;
  PCCL_RETURN_IF_ERROR(r.u64(&m.epoch));
  uint32_t n = 0;
  PCCL_RETURN_IF_ERROR(r.count(&n, kMinMemberBytes));
  m.ring.resize(n);
  for (MemberInfo& mi : m.ring) PCCL_RETURN_IF_ERROR(decodeMember(r, &mi));
  return m;
}

void MembershipStatus::encode(ByteWriter& w) const {
  w.u64(request_id);
  w.u32(accepted);
  w.u32(pending);
  w.u8(vote_open);
  w.u8(stale);
}
Result<MembershipStatus> MembershipStatus::decode(ByteReader& r) {
  MembershipStatus m;
  PCCL_RETURN_IF_ERROR(r.u64(&m.request_id));
  PCCL_RETURN_IF_ERROR(r.u32(&m.accepted));
  PCCL_RETURN_IF_ERROR(r.u32(&m.pending));
  PCCL_RETURN_IF_ERROR(r.u8(&m.vote_open));
  PCCL_RETURN_IF_ERROR(r.u8(&m.stale));
  return m;
}

void PeerLeft::encode(ByteWriter& w) const {
  w.fixed(peer_id);
  w.u8(reason);
  w.str(detail);
}
Result<PeerLeft> PeerLeft::decode(ByteReader& r) {
  PeerLeft m;
  PCCL_RETURN_IF_ERROR(r.fixed(&m.peer_id));
  PCCL_RETURN_IF_ERROR(r.u8(&m.reason));
  PCCL_RETURN_IF_ERROR(r.str(&m.detail));
  return m;
}

}  // namespace pccl::wire
