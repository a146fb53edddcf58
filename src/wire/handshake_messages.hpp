// The handshake's messages (docs/protocol.md §5.1, §6): Hello, HelloReply, AuthProof, AuthOk, and Error,
// which any connection may send before closing on purpose.
#ifndef PCCL_WIRE_HANDSHAKE_MESSAGES_HPP_
#define PCCL_WIRE_HANDSHAKE_MESSAGES_HPP_

#include <cstdint>
#include <string>

#include "wire/message.hpp"

namespace pccl::wire {

// kStateFetch: a peer fetching shared-state bytes from another (docs/protocol.md §5.6); kProbe: a peer
// measuring its link to another (§5.7).
// kRelay (protocol 20): a connection to a member that relays a ring link (docs/protocol.md §5.4.4).
enum class Role : uint8_t { kPeerToMaster = 1, kPeerToPeer = 2, kStateFetch = 3, kProbe = 4, kRelay = 5 };
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

}  // namespace pccl::wire

#endif  // PCCL_WIRE_HANDSHAKE_MESSAGES_HPP_
