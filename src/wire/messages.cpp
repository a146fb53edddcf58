#include "wire/messages.hpp"

#include <fmt/format.h>

namespace pccl::wire {

const char* msgTypeName(uint16_t type) {
  switch (static_cast<MsgType>(type)) {
    case MsgType::kHello: return "Hello";
    case MsgType::kHelloReply: return "HelloReply";
    case MsgType::kAuthProof: return "AuthProof";
    case MsgType::kAuthOk: return "AuthOk";
    case MsgType::kError: return "Error";
    case MsgType::kJoinRequest: return "JoinRequest";
    case MsgType::kJoinAccepted: return "JoinAccepted";
    case MsgType::kHeartbeat: return "Heartbeat";
    case MsgType::kVoteUpdate: return "VoteUpdate";
    case MsgType::kWithdrawVote: return "WithdrawVote";
    case MsgType::kTopologyUpdate: return "TopologyUpdate";
    case MsgType::kP2PReady: return "P2PReady";
    case MsgType::kTopologyReady: return "TopologyReady";
    case MsgType::kTopologyFailed: return "TopologyFailed";
    case MsgType::kMembershipStatus: return "MembershipStatus";
    case MsgType::kPeerLeft: return "PeerLeft";
    case MsgType::kLeave: return "Leave";
    case MsgType::kP2PFailed: return "P2PFailed";
    case MsgType::kQueryStatus: return "QueryStatus";
    case MsgType::kOpAnnounce: return "OpAnnounce";
    case MsgType::kSyncAnnounce: return "SyncAnnounce";
    case MsgType::kSyncPlan: return "SyncPlan";
    case MsgType::kSyncDone: return "SyncDone";
    case MsgType::kSyncComplete: return "SyncComplete";
    case MsgType::kOpStart: return "OpStart";
    case MsgType::kOpAbort: return "OpAbort";
    case MsgType::kOpDone: return "OpDone";
    case MsgType::kOpComplete: return "OpComplete";
    case MsgType::kOpFailed: return "OpFailed";
    case MsgType::kData: return "Data";
    case MsgType::kP2PHello: return "P2PHello";
    case MsgType::kP2PAccept: return "P2PAccept";
  }
  return "Unknown";
}

std::string shortId(const Uuid& id) {
  return fmt::format("{:02x}{:02x}{:02x}{:02x}", id[0], id[1], id[2], id[3]);
}

void Hello::encode(ByteWriter& w) const {
  w.u8(role);
  w.u8(flags);
  w.fixed(nonce);
  w.fixed(kx);
}
Result<Hello> Hello::decode(ByteReader& r) {
  Hello m;
  PCCL_RETURN_IF_ERROR(r.u8(&m.role));
  PCCL_RETURN_IF_ERROR(r.u8(&m.flags));
  PCCL_RETURN_IF_ERROR(r.fixed(&m.nonce));
  PCCL_RETURN_IF_ERROR(r.fixed(&m.kx));
  return m;
}

void HelloReply::encode(ByteWriter& w) const {
  w.u8(flags);
  w.fixed(nonce);
  w.fixed(kx);
}
Result<HelloReply> HelloReply::decode(ByteReader& r) {
  HelloReply m;
  PCCL_RETURN_IF_ERROR(r.u8(&m.flags));
  PCCL_RETURN_IF_ERROR(r.fixed(&m.nonce));
  PCCL_RETURN_IF_ERROR(r.fixed(&m.kx));
  return m;
}

void AuthProof::encode(ByteWriter& w) const { w.fixed(mac); }
Result<AuthProof> AuthProof::decode(ByteReader& r) {
  AuthProof m;
  PCCL_RETURN_IF_ERROR(r.fixed(&m.mac));
  return m;
}

void AuthOk::encode(ByteWriter& w) const { w.fixed(mac); }
Result<AuthOk> AuthOk::decode(ByteReader& r) {
  AuthOk m;
  PCCL_RETURN_IF_ERROR(r.fixed(&m.mac));
  return m;
}

void Error::encode(ByteWriter& w) const {
  w.u16(code);
  // Bounded so an Error always fits the handshake frame limit.
  w.str(message.size() <= kMaxErrorText ? message : message.substr(0, kMaxErrorText));
}
Result<Error> Error::decode(ByteReader& r) {
  Error m;
  PCCL_RETURN_IF_ERROR(r.u16(&m.code));
  PCCL_RETURN_IF_ERROR(r.str(&m.message));
  return m;
}

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

void P2PHello::encode(ByteWriter& w) const {
  w.fixed(sender_id);
  w.u64(epoch);
  w.u32(index);
  w.fixed(signature);
}
Result<P2PHello> P2PHello::decode(ByteReader& r) {
  P2PHello m;
  PCCL_RETURN_IF_ERROR(r.fixed(&m.sender_id));
  PCCL_RETURN_IF_ERROR(r.u64(&m.epoch));
  PCCL_RETURN_IF_ERROR(r.u32(&m.index));
  PCCL_RETURN_IF_ERROR(r.fixed(&m.signature));
  return m;
}

void OpAnnounce::encode(ByteWriter& w) const {
  w.u64(tag);
  w.u64(count);
  w.u8(dtype);
  w.u8(op);
  w.u8(quant);
  w.u8(compress);
  w.u64(epoch);
  w.u32(segment_bytes);
}
Result<OpAnnounce> OpAnnounce::decode(ByteReader& r) {
  OpAnnounce m;
  PCCL_RETURN_IF_ERROR(r.u64(&m.tag));
  PCCL_RETURN_IF_ERROR(r.u64(&m.count));
  PCCL_RETURN_IF_ERROR(r.u8(&m.dtype));
  PCCL_RETURN_IF_ERROR(r.u8(&m.op));
  PCCL_RETURN_IF_ERROR(r.u8(&m.quant));
  PCCL_RETURN_IF_ERROR(r.u8(&m.compress));
  PCCL_RETURN_IF_ERROR(r.u64(&m.epoch));
  PCCL_RETURN_IF_ERROR(r.u32(&m.segment_bytes));
  return m;
}

void OpStart::encode(ByteWriter& w) const {
  w.u64(tag);
  w.u64(op_id);
}
Result<OpStart> OpStart::decode(ByteReader& r) {
  OpStart m;
  PCCL_RETURN_IF_ERROR(r.u64(&m.tag));
  PCCL_RETURN_IF_ERROR(r.u64(&m.op_id));
  return m;
}

void OpAbort::encode(ByteWriter& w) const {
  w.u64(tag);
  w.u64(op_id);
  w.u16(code);
  w.str(reason);
}
Result<OpAbort> OpAbort::decode(ByteReader& r) {
  OpAbort m;
  PCCL_RETURN_IF_ERROR(r.u64(&m.tag));
  PCCL_RETURN_IF_ERROR(r.u64(&m.op_id));
  PCCL_RETURN_IF_ERROR(r.u16(&m.code));
  PCCL_RETURN_IF_ERROR(r.str(&m.reason));
  return m;
}

void OpFailed::encode(ByteWriter& w) const {
  w.u64(tag);
  w.u64(op_id);
  w.u16(code);
  w.str(reason);
}
Result<OpFailed> OpFailed::decode(ByteReader& r) {
  OpFailed m;
  PCCL_RETURN_IF_ERROR(r.u64(&m.tag));
  PCCL_RETURN_IF_ERROR(r.u64(&m.op_id));
  PCCL_RETURN_IF_ERROR(r.u16(&m.code));
  PCCL_RETURN_IF_ERROR(r.str(&m.reason));
  return m;
}

}  // namespace pccl::wire
