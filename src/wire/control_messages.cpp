#include "wire/control_messages.hpp"

namespace pccl::wire {

void JoinRequest::encode(ByteWriter& w) const {
  w.u16(p2p_port);
  w.str(advertise_host);
  w.u32(group);
  w.u32(connections);
  w.u32(host_connections);
  w.fixed(ring_key);
  w.str(client_version);
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
  return m;
}

void JoinAccepted::encode(ByteWriter& w) const {
  w.fixed(peer_id);
  w.u32(heartbeat_interval_ms);
  w.u32(peer_timeout_ms);
}
Result<JoinAccepted> JoinAccepted::decode(ByteReader& r) {
  JoinAccepted m;
  PCCL_RETURN_IF_ERROR(r.fixed(&m.peer_id));
  PCCL_RETURN_IF_ERROR(r.u32(&m.heartbeat_interval_ms));
  PCCL_RETURN_IF_ERROR(r.u32(&m.peer_timeout_ms));
  return m;
}

namespace {
// id(16) + host length(2) + port(2) + group(4) + connections(4) + host_connections(4) + ring_key(32)
constexpr size_t kMinMemberBytes = 64;
}  // namespace

void TopologyUpdate::encode(ByteWriter& w) const {
  w.u64(epoch);
  w.u32(static_cast<uint32_t>(ring.size()));
  for (const MemberInfo& m : ring) {
    w.fixed(m.id);
    w.str(m.host);
    w.u16(m.port);
    w.u32(m.group);
    w.u32(m.connections);
    w.u32(m.host_connections);
    w.fixed(m.ring_key);
  }
}
Result<TopologyUpdate> TopologyUpdate::decode(ByteReader& r) {
  TopologyUpdate m;
  PCCL_RETURN_IF_ERROR(r.u64(&m.epoch));
  uint32_t n = 0;
  PCCL_RETURN_IF_ERROR(r.count(&n, kMinMemberBytes));
  m.ring.resize(n);
  for (MemberInfo& mi : m.ring) {
    PCCL_RETURN_IF_ERROR(r.fixed(&mi.id));
    PCCL_RETURN_IF_ERROR(r.str(&mi.host, 255));
    PCCL_RETURN_IF_ERROR(r.u16(&mi.port));
    PCCL_RETURN_IF_ERROR(r.u32(&mi.group));
    PCCL_RETURN_IF_ERROR(r.u32(&mi.connections));
    PCCL_RETURN_IF_ERROR(r.u32(&mi.host_connections));
    PCCL_RETURN_IF_ERROR(r.fixed(&mi.ring_key));
  }
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
