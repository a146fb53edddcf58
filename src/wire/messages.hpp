// Every pccl message, defined once: an enum of types and one struct per message with an explicit
// encode and a bounds-checked decode. Byte layouts are specified in docs/protocol.md.
#ifndef PCCL_WIRE_MESSAGES_HPP_
#define PCCL_WIRE_MESSAGES_HPP_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "pccl/status.hpp"
#include "wire/bytes.hpp"
#include "wire/frame.hpp"

namespace pccl::wire {

enum class MsgType : uint16_t {
  // Handshake (any connection, before authentication). A version mismatch is seen in the frame header,
  // before any payload is read, and kError's layout never changes, so it can always be reported.
  kHello = 1,
  kHelloReply = 2,
  kAuthProof = 3,
  kAuthOk = 4,
  kError = 5,
  // Peer <-> master control plane.
  kJoinRequest = 16,
  kJoinAccepted = 17,
  kHeartbeat = 18,
  kVoteUpdate = 19,
  kWithdrawVote = 20,
  kTopologyUpdate = 21,
  kP2PReady = 22,
  kTopologyReady = 23,
  kTopologyFailed = 24,
  kMembershipStatus = 25,
  kPeerLeft = 26,
  kLeave = 27,
  kP2PFailed = 28,
  kQueryStatus = 29,
  // Collective coordination (peer <-> master).
  kOpAnnounce = 32,
  kOpStart = 33,
  kOpAbort = 34,
  kOpDone = 35,
  kOpComplete = 36,
  kOpFailed = 37,
  // Shared-state sync (peer <-> master; sync_messages.hpp).
  kSyncAnnounce = 40,
  kSyncPlan = 41,
  kSyncDone = 42,
  kSyncComplete = 43,
  // Peer <-> peer (ring connections).
  kP2PHello = 48,
  kP2PAccept = 49,
  kData = 50,  // ring payload: DataHeader then the elements (see data.hpp)
};
inline constexpr size_t kMaxMsgType = 64;  // dispatch table size; every type is below it

const char* msgTypeName(uint16_t type);

using Nonce = std::array<uint8_t, 32>;
using Mac = std::array<uint8_t, 32>;
using Uuid = std::array<uint8_t, 16>;
using KxKey = std::array<uint8_t, 32>;  // an ephemeral X25519 public key (docs/protocol.md §6)
using SignKey = std::array<uint8_t, 32>;     // a peer's Ed25519 ring identity (public half)
using Signature = std::array<uint8_t, 64>;   // an Ed25519 signature

// A pccl::Code received in a message (Error, TopologyFailed, P2PFailed, OpAbort, OpFailed), or
// `fallback` when the value is 0 or not a code this build knows.
inline Code codeFromWire(uint16_t code, Code fallback) {
  return code != 0 && code <= static_cast<uint16_t>(Code::kProtocolError) ? static_cast<Code>(code) : fallback;
}

// First 8 hex digits of a peer id, for logs and messages.
std::string shortId(const Uuid& id);

// kStateFetch: a peer fetching shared-state bytes from another (docs/protocol.md §5.6).
enum class Role : uint8_t { kPeerToMaster = 1, kPeerToPeer = 2, kStateFetch = 3 };
enum class HelloFlags : uint8_t { kNone = 0, kHasSecret = 1 };

struct Hello {
  static constexpr MsgType kType = MsgType::kHello;
  uint8_t role = 0;   // Role of the connecting side
  uint8_t flags = 0;  // bit 0: the client holds a secret; bit 1: it encrypts; bit 2: it offers AES-256-GCM
  Nonce nonce{};
  KxKey kx{};         // the client's ephemeral X25519 public key when it encrypts, else zeros
  void encode(ByteWriter& w) const;
  static Result<Hello> decode(ByteReader& r);
};

struct HelloReply {
  static constexpr MsgType kType = MsgType::kHelloReply;
  uint8_t flags = 0;  // bit 0: the server requires a secret; bit 1: it encrypts; bit 2: AES-256-GCM chosen
  Nonce nonce{};
  KxKey kx{};         // the server's ephemeral X25519 public key when it encrypts, else zeros
  void encode(ByteWriter& w) const;
  static Result<HelloReply> decode(ByteReader& r);
};

struct AuthProof {
  static constexpr MsgType kType = MsgType::kAuthProof;
  Mac mac{};
  void encode(ByteWriter& w) const;
  static Result<AuthProof> decode(ByteReader& r);
};

struct AuthOk {
  static constexpr MsgType kType = MsgType::kAuthOk;
  Mac mac{};
  void encode(ByteWriter& w) const;
  static Result<AuthOk> decode(ByteReader& r);
};

// Sent before closing a connection on purpose: says why (a pccl::Code and a message).
inline constexpr size_t kMaxErrorText = 1024;
struct Error {
  static constexpr MsgType kType = MsgType::kError;
  uint16_t code = 0;
  std::string message;
  void encode(ByteWriter& w) const;
  static Result<Error> decode(ByteReader& r);
};

struct JoinRequest {
  static constexpr MsgType kType = MsgType::kJoinRequest;
  uint16_t p2p_port = 0;
  std::string advertise_host;  // empty: the master uses the address it sees
  uint32_t group = 0;
  uint32_t connections = 0;    // K this peer opens to its successor
  uint32_t host_connections = 0;  // K to a successor on the same host (sameHost in ring_pool.hpp)
  SignKey ring_key{};          // the key this peer signs its ring hellos with (net/identity.hpp)
  std::string client_version;
  void encode(ByteWriter& w) const;
  static Result<JoinRequest> decode(ByteReader& r);
};

struct JoinAccepted {
  static constexpr MsgType kType = MsgType::kJoinAccepted;
  Uuid peer_id{};
  uint32_t heartbeat_interval_ms = 0;  // the master's expectations, so the peer pings often enough
  uint32_t peer_timeout_ms = 0;
  void encode(ByteWriter& w) const;
  static Result<JoinAccepted> decode(ByteReader& r);
};

// Messages without a body.
template <MsgType T>
struct Empty {
  static constexpr MsgType kType = T;
  void encode(ByteWriter&) const {}
  static Result<Empty> decode(ByteReader&) { return Empty{}; }
};
using Heartbeat = Empty<MsgType::kHeartbeat>;
using VoteUpdate = Empty<MsgType::kVoteUpdate>;
using WithdrawVote = Empty<MsgType::kWithdrawVote>;
using Leave = Empty<MsgType::kLeave>;
using P2PAccept = Empty<MsgType::kP2PAccept>;

struct MemberInfo {
  Uuid id{};
  std::string host;
  uint16_t port = 0;
  uint32_t group = 0;
  uint32_t connections = 0;
  uint32_t host_connections = 0;
  SignKey ring_key{};  // from its JoinRequest: its ring hellos must verify with it
  bool operator==(const MemberInfo& o) const {
    return id == o.id && host == o.host && port == o.port && group == o.group && connections == o.connections &&
           host_connections == o.host_connections && ring_key == o.ring_key;
  }
};

struct TopologyUpdate {
  static constexpr MsgType kType = MsgType::kTopologyUpdate;
  uint64_t epoch = 0;
  std::vector<MemberInfo> ring;  // global ring order
  void encode(ByteWriter& w) const;
  static Result<TopologyUpdate> decode(ByteReader& r);
};

// One epoch number: P2PReady (peer: my ring connections are up), TopologyReady (master: everyone's are).
template <MsgType T>
struct EpochMsg {
  static constexpr MsgType kType = T;
  uint64_t epoch = 0;
  void encode(ByteWriter& w) const { w.u64(epoch); }
  static Result<EpochMsg> decode(ByteReader& r) {
    EpochMsg m;
    PCCL_RETURN_IF_ERROR(r.u64(&m.epoch));
    return m;
  }
};
using P2PReady = EpochMsg<MsgType::kP2PReady>;
using TopologyReady = EpochMsg<MsgType::kTopologyReady>;

// A ring build that failed: TopologyFailed (master -> peers), P2PFailed (peer -> master).
template <MsgType T>
struct EpochFailure {
  static constexpr MsgType kType = T;
  uint64_t epoch = 0;
  uint16_t code = 0;  // pccl::Code
  std::string reason;
  void encode(ByteWriter& w) const {
    w.u64(epoch);
    w.u16(code);
    w.str(reason);
  }
  static Result<EpochFailure> decode(ByteReader& r) {
    EpochFailure m;
    PCCL_RETURN_IF_ERROR(r.u64(&m.epoch));
    PCCL_RETURN_IF_ERROR(r.u16(&m.code));
    PCCL_RETURN_IF_ERROR(r.str(&m.reason));
    return m;
  }
};
using TopologyFailed = EpochFailure<MsgType::kTopologyFailed>;
using P2PFailed = EpochFailure<MsgType::kP2PFailed>;

// Peer asks the master whether a topology update would change anything; answered by MembershipStatus.
struct QueryStatus {
  static constexpr MsgType kType = MsgType::kQueryStatus;
  uint64_t request_id = 0;
  void encode(ByteWriter& w) const { w.u64(request_id); }
  static Result<QueryStatus> decode(ByteReader& r) {
    QueryStatus m;
    PCCL_RETURN_IF_ERROR(r.u64(&m.request_id));
    return m;
  }
};

struct MembershipStatus {
  static constexpr MsgType kType = MsgType::kMembershipStatus;
  uint64_t request_id = 0;  // the QueryStatus this answers
  uint32_t accepted = 0;
  uint32_t pending = 0;
  uint8_t vote_open = 0;  // some peer is waiting in updateTopology
  uint8_t stale = 0;      // a member left since the last ring was built
  void encode(ByteWriter& w) const;
  static Result<MembershipStatus> decode(ByteReader& r);
};

enum class LeaveReason : uint8_t { kGraceful = 0, kTimeout = 1, kConnectionLost = 2, kProtocolError = 3 };

struct PeerLeft {
  static constexpr MsgType kType = MsgType::kPeerLeft;
  Uuid peer_id{};
  uint8_t reason = 0;  // LeaveReason
  std::string detail;
  void encode(ByteWriter& w) const;
  static Result<PeerLeft> decode(ByteReader& r);
};

struct P2PHello {
  static constexpr MsgType kType = MsgType::kP2PHello;
  Uuid sender_id{};
  uint64_t epoch = 0;
  uint32_t index = 0;  // which of the sender's K connections this is
  Signature signature{};  // by the sender's ring key, over the connection's session id and the fields above
  void encode(ByteWriter& w) const;
  static Result<P2PHello> decode(ByteReader& r);
};

// What a peer is about to run; every peer of the group must announce the same thing (design.md §2).
struct OpAnnounce {
  static constexpr MsgType kType = MsgType::kOpAnnounce;
  uint64_t tag = 0;
  uint64_t count = 0;
  uint8_t dtype = 0;
  uint8_t op = 0;
  uint8_t quant = 0;
  uint8_t compress = 0;  // zstd level on the wire, 0 = off
  uint64_t epoch = 0;  // the ring the peer will use
  uint32_t segment_bytes = 0;  // the pipelining unit; every peer must cut the buffer the same way
  void encode(ByteWriter& w) const;
  static Result<OpAnnounce> decode(ByteReader& r);
};

// Master -> peers: everyone agreed; run it as op_id (unique within the run, increasing).
struct OpStart {
  static constexpr MsgType kType = MsgType::kOpStart;
  uint64_t tag = 0;
  uint64_t op_id = 0;
  void encode(ByteWriter& w) const;
  static Result<OpStart> decode(ByteReader& r);
};

// Master -> peers: the operation fails everywhere (op_id 0 = it never started).
struct OpAbort {
  static constexpr MsgType kType = MsgType::kOpAbort;
  uint64_t tag = 0;
  uint64_t op_id = 0;
  uint16_t code = 0;  // pccl::Code
  std::string reason;
  void encode(ByteWriter& w) const;
  static Result<OpAbort> decode(ByteReader& r);
};

// Peer -> master: OpDone (my part finished) / OpFailed (it failed here: code, reason).
// Master -> peers: OpComplete (every participant finished: the result stands).
template <MsgType T>
struct OpIdMsg {
  static constexpr MsgType kType = T;
  uint64_t op_id = 0;
  void encode(ByteWriter& w) const { w.u64(op_id); }
  static Result<OpIdMsg> decode(ByteReader& r) {
    OpIdMsg m;
    PCCL_RETURN_IF_ERROR(r.u64(&m.op_id));
    return m;
  }
};
using OpDone = OpIdMsg<MsgType::kOpDone>;
using OpComplete = OpIdMsg<MsgType::kOpComplete>;

struct OpFailed {
  static constexpr MsgType kType = MsgType::kOpFailed;
  uint64_t tag = 0;
  uint64_t op_id = 0;  // 0: the announcement of `tag` is withdrawn (e.g. its deadline passed)
  uint16_t code = 0;
  std::string reason;
  void encode(ByteWriter& w) const;
  static Result<OpFailed> decode(ByteReader& r);
};

// A whole frame (header + payload) ready to write.
template <typename Msg>
std::vector<uint8_t> encodeFrame(const Msg& msg, uint64_t epoch) {
  std::vector<uint8_t> out(kHeaderSize);
  ByteWriter w(&out);
  msg.encode(w);
  FrameHeader h;
  h.type = static_cast<uint16_t>(Msg::kType);
  h.epoch = epoch;
  h.length = static_cast<uint32_t>(out.size() - kHeaderSize);
  HeaderBytes hb = encodeHeader(h);
  std::copy(hb.begin(), hb.end(), out.begin());
  return out;
}

// Decodes a payload that must hold exactly one Msg.
template <typename Msg>
Result<Msg> decodePayload(const uint8_t* data, size_t size) {
  ByteReader r(data, size);
  auto m = Msg::decode(r);
  if (!m.isOk()) return m.status().withContext(msgTypeName(static_cast<uint16_t>(Msg::kType)));
  PCCL_RETURN_IF_ERROR(r.expectEnd().withContext(msgTypeName(static_cast<uint16_t>(Msg::kType))));
  return m;
}

}  // namespace pccl::wire

#endif  // PCCL_WIRE_MESSAGES_HPP_
