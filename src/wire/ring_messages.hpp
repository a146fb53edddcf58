// The introduction of a ring connection, from a peer to its ring successor (docs/protocol.md §5.4). The
// Data frames that follow are in data.hpp.
#ifndef PCCL_WIRE_RING_MESSAGES_HPP_
#define PCCL_WIRE_RING_MESSAGES_HPP_

#include <cstdint>

#include "wire/message.hpp"

namespace pccl::wire {

// P2PHello / P2PAccept flags (protocol 17, docs/protocol.md §5.4.3).
inline constexpr uint8_t kHelloResumable = 1;  // this end can resume the connection if it breaks
inline constexpr uint8_t kHelloResume = 2;     // hello only: this connection replaces a broken one (same index)
// Hello only (protocol 20): the connection carries data from the acceptor to the sender (the sender
// cannot be dialled, wire::opensLink), not from the sender to the acceptor.
inline constexpr uint8_t kHelloReverse = 4;
inline constexpr uint8_t kHelloKnownFlags = kHelloResumable | kHelloResume | kHelloReverse;

struct P2PHello {
  static constexpr MsgType kType = MsgType::kP2PHello;
  Uuid sender_id{};
  uint64_t epoch = 0;
  uint32_t index = 0;  // which of the sender's K connections this is
  uint8_t flags = 0;   // kHello*
  uint64_t received = 0;  // kHelloResume: the frames the sender has taken in on the broken connection
  Signature signature{};  // by the sender's ring key, over the connection's session id and the fields above
  void encode(ByteWriter& w) const;
  static Result<P2PHello> decode(ByteReader& r);
};

struct P2PAccept {
  static constexpr MsgType kType = MsgType::kP2PAccept;
  uint8_t flags = 0;      // kHelloResumable: the connection resumes (both ends said so)
  uint64_t received = 0;  // a resume: the frames the acceptor has taken in on the broken connection
  void encode(ByteWriter& w) const;
  static Result<P2PAccept> decode(ByteReader& r);
};

// A ring link between two members that cannot dial each other runs through a relay (protocol 20,
// docs/protocol.md §5.4.4): both ends dial the relay (role kRelay) and introduce each connection with
// a RelayHello signed by their ring key; once the relay holds both ends of connection `index`, it
// answers RelayReady on both and from then on copies raw bytes between them: the two ends then run an
// ordinary ring connection (handshake, P2PHello) through it, `from` as the dialer.
struct RelayHello {
  static constexpr MsgType kType = MsgType::kRelayHello;
  Uuid sender_id{};  // `from` or `to`: which end of the link this connection is
  uint64_t epoch = 0;
  Uuid from{};  // the link carries data from `from` to `to` (ring neighbours in `epoch`'s ring)
  Uuid to{};
  uint32_t index = 0;  // which of the link's connections
  Signature signature{};  // by the sender's ring key, over the connection's session id and the fields above
  void encode(ByteWriter& w) const;
  static Result<RelayHello> decode(ByteReader& r);
};
using RelayReady = Empty<MsgType::kRelayReady>;

}  // namespace pccl::wire

#endif  // PCCL_WIRE_RING_MESSAGES_HPP_
