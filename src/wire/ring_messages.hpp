// The introduction of a ring connection, from a peer to its ring successor (docs/protocol.md §5.4). The
// Data frames that follow are in data.hpp.
#ifndef PCCL_WIRE_RING_MESSAGES_HPP_
#define PCCL_WIRE_RING_MESSAGES_HPP_

#include <cstdint>

#include "wire/message.hpp"

namespace pccl::wire {

using P2PAccept = Empty<MsgType::kP2PAccept>;

struct P2PHello {
  static constexpr MsgType kType = MsgType::kP2PHello;
  Uuid sender_id{};
  uint64_t epoch = 0;
  uint32_t index = 0;  // which of the sender's K connections this is
  Signature signature{};  // by the sender's ring key, over the connection's session id and the fields above
  void encode(ByteWriter& w) const;
  static Result<P2PHello> decode(ByteReader& r);
};

}  // namespace pccl::wire

#endif  // PCCL_WIRE_RING_MESSAGES_HPP_
