// An authenticated socket and, in an encrypted run, the two AEAD streams of its connection
// (docs/protocol.md §6). Every framed reader and writer after the handshake (Connection, FrameIo,
// DataChannel) takes a Link, so nothing can speak in clear on an encrypted connection by accident.
//
// Sealed control frame: the 20-byte frame header stays in clear (it carries the length needed to read
// the rest) but is authenticated as associated data; its length counts the 16-byte tag that follows the
// encrypted payload. Data frames seal their DataHeader and their payload separately (see data_channel.hpp).
#ifndef PCCL_NET_LINK_HPP_
#define PCCL_NET_LINK_HPP_

#include <cstdint>
#include <memory>
#include <vector>

#include "net/aead.hpp"
#include "net/asio.hpp"
#include "net/auth.hpp"
#include "pccl/status.hpp"
#include "wire/frame.hpp"
#include "wire/messages.hpp"

namespace pccl::net {

struct SessionCrypto {
  std::unique_ptr<AeadStream> send;  // null in a plain run
  std::unique_ptr<AeadStream> recv;
  bool on() const { return send != nullptr; }
};

struct Link {
  Tcp::socket socket;
  SessionCrypto crypto;
  SessionId session{};  // the handshake's session id (auth.hpp); zeros for a socket that had none
};

// What a sealed frame adds to the payload (the tag); 0 when `crypto` is off.
inline uint32_t sealOverhead(const SessionCrypto& crypto) { return crypto.on() ? kAeadTagBytes : 0; }

// `frame` (header + payload, as encodeFrame makes it) sealed in place: payload encrypted, tag appended,
// the header's length grown by the tag. No-op when `crypto` is off.
Status sealFrame(SessionCrypto& crypto, std::vector<uint8_t>& frame);

// Opens a sealed payload in place, given the frame header exactly as received: checks the tag over header
// and payload, then strips it (`length` shrinks by the tag). No-op when `crypto` is off.
Status openFrame(SessionCrypto& crypto, const wire::HeaderBytes& raw, wire::FrameHeader& h, uint8_t* payload);

}  // namespace pccl::net

#endif  // PCCL_NET_LINK_HPP_
