// What every pccl message shares (docs/protocol.md §2–§4): the enum of message types, the field types,
// the encode/decode frame helpers and the template for messages without a body. The messages
// themselves are defined by role: handshake_messages.hpp (§5.1), control_messages.hpp (§5.2),
// op_messages.hpp (§5.3), ring_messages.hpp (§5.4), sync_messages.hpp (§5.5), probe_messages.hpp (§5.7);
// messages.hpp has them all.
#ifndef PCCL_WIRE_MESSAGE_HPP_
#define PCCL_WIRE_MESSAGE_HPP_

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
  kVoteOptimize = 30,
  kRunResumed = 31,
  // Collective bookkeeping (peer <-> master). 33 (OpStart) and 36 (OpComplete) were protocol 3's.
  kOpAnnounce = 32,
  kOpAbort = 34,
  kOpDone = 35,
  kOpFailed = 37,
  kOpState = 38,
  kOpQuery = 39,
  kOpOutcome = 44,
  // Shared-state sync (peer <-> master; sync_messages.hpp).
  kSyncAnnounce = 40,
  kSyncPlan = 41,
  kSyncDone = 42,
  kSyncComplete = 43,
  // Peer <-> peer (ring connections).
  kP2PHello = 48,
  kP2PAccept = 49,
  kData = 50,  // ring payload: DataHeader then the elements (see data.hpp)
  kRelayHello = 52,  // to a relay (protocol 20; ring_messages.hpp)
  kRelayReady = 53,
  // Link measurement (peer <-> master; probe_messages.hpp).
  kProbePlan = 56,
  kProbeReport = 57,
  kLinkQuery = 58,
  kLinkReport = 59,
};
inline constexpr size_t kMaxMsgType = 64;  // dispatch table size; every type is below it

const char* msgTypeName(uint16_t type);

using Nonce = std::array<uint8_t, 32>;
using Mac = std::array<uint8_t, 32>;
using Uuid = std::array<uint8_t, 16>;
using KxKey = std::array<uint8_t, 32>;  // an ephemeral X25519 public key (docs/protocol.md §6)
using SignKey = std::array<uint8_t, 32>;     // a peer's Ed25519 ring identity (public half)
using Signature = std::array<uint8_t, 64>;   // an Ed25519 signature

// A pccl::Code received in a message (Error, TopologyFailed, P2PFailed, OpAbort, OpFailed, OpOutcome, ring aborts), or
// `fallback` when the value is 0 or not a code this build knows.
inline Code codeFromWire(uint16_t code, Code fallback) {
  return code != 0 && code <= static_cast<uint16_t>(Code::kTopologyChanged) ? static_cast<Code>(code) : fallback;
}

// First 8 hex digits of a peer id, for logs and messages.
std::string shortId(const Uuid& id);

// Messages without a body.
template <MsgType T>
struct Empty {
  static constexpr MsgType kType = T;
  void encode(ByteWriter&) const {}
  static Result<Empty> decode(ByteReader&) { return Empty{}; }
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

#endif  // PCCL_WIRE_MESSAGE_HPP_
