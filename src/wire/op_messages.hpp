// Collective coordination between a peer and the master (docs/protocol.md §5.3): announce, start, abort,
// done/complete, failed.
#ifndef PCCL_WIRE_OP_MESSAGES_HPP_
#define PCCL_WIRE_OP_MESSAGES_HPP_

#include <cstdint>
#include <string>

#include "wire/message.hpp"

namespace pccl::wire {

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

}  // namespace pccl::wire

#endif  // PCCL_WIRE_OP_MESSAGES_HPP_
