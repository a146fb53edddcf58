// Collective bookkeeping between a peer and the master (docs/protocol.md §5.3). Since protocol 4 the
// master is off the data path: a peer starts an operation on the ring at once and tells the master
// in passing (OpAnnounce, then OpDone or OpFailed); the master only aborts what cannot go on (a
// mismatch, tags that diverge, a member that left) and settles operations left in doubt by a failure
// during the peers' commit round (OpState -> OpQuery -> OpOutcome). An operation is named by
// (epoch, tag, seq): seq counts the calls of that tag on the ring of that epoch, from 0.
#ifndef PCCL_WIRE_OP_MESSAGES_HPP_
#define PCCL_WIRE_OP_MESSAGES_HPP_

#include <cstdint>
#include <string>

#include "wire/data.hpp"
#include "wire/message.hpp"

namespace pccl::wire {

// Peer -> master: what the peer started; every peer of the group must announce the same thing
// (design.md §2). Not waited for.
struct OpAnnounce {
  static constexpr MsgType kType = MsgType::kOpAnnounce;
  uint64_t tag = 0;
  uint32_t seq = 0;
  uint64_t count = 0;
  uint8_t dtype = 0;
  uint8_t op = 0;
  uint8_t quant = 0;
  uint8_t compress = 0;  // zstd level on the wire, 0 = off
  uint64_t epoch = 0;  // the ring the peer runs it on
  uint32_t segment_bytes = 0;  // the pipelining unit; every peer must cut the buffer the same way
  uint8_t algo = 0;            // wire::Algo: how the data moves
  uint8_t kind = 0;            // wire::Collective (protocol 8)
  uint32_t root = 0;           // broadcast: the root's rank in the group's ring
  OpDesc desc() const { return OpDesc{count, segment_bytes, dtype, op, quant, compress, algo, kind, root}; }
  void encode(ByteWriter& w) const;
  static Result<OpAnnounce> decode(ByteReader& r);
};

// Master -> peers: the operation (tag, seq) of the current epoch fails everywhere. A peer that has not
// called it yet remembers it and fails the call when it comes.
struct OpAbort {
  static constexpr MsgType kType = MsgType::kOpAbort;
  uint64_t tag = 0;
  uint32_t seq = 0;
  uint16_t code = 0;  // pccl::Code
  std::string reason;
  void encode(ByteWriter& w) const;
  static Result<OpAbort> decode(ByteReader& r);
};

// Peer -> master: the operation committed on this peer (bookkeeping only).
struct OpDone {
  static constexpr MsgType kType = MsgType::kOpDone;
  uint64_t tag = 0;
  uint32_t seq = 0;
  void encode(ByteWriter& w) const;
  static Result<OpDone> decode(ByteReader& r);
};

// Peer -> master: the operation failed here (code, reason); ring_broken: this peer closed its ring
// connections (the run needs a new ring).
struct OpFailed {
  static constexpr MsgType kType = MsgType::kOpFailed;
  uint64_t tag = 0;
  uint32_t seq = 0;
  uint16_t code = 0;
  uint8_t ring_broken = 0;
  std::string reason;
  void encode(ByteWriter& w) const;
  static Result<OpFailed> decode(ByteReader& r);
};

// Where an operation stands on one peer (OpState.state).
enum class OpPhase : uint8_t {
  kUnknown = 0,    // not an operation this peer knows (never called it, or not in that ring)
  kFailed = 1,     // failed here (a running operation asked about fails at once and says so)
  kPrepared = 2,   // all its data is in; waiting to learn whether every peer has it
  kCommitted = 3,  // succeeded here
};

// Peer -> master: this peer's state of (epoch, tag, seq). Sent unasked with kPrepared when the peer is
// in doubt (a failure during the commit round), and as the answer to an OpQuery.
struct OpState {
  static constexpr MsgType kType = MsgType::kOpState;
  uint64_t epoch = 0;
  uint64_t tag = 0;
  uint32_t seq = 0;
  uint8_t state = 0;  // OpPhase
  void encode(ByteWriter& w) const;
  static Result<OpState> decode(ByteReader& r);
};

// Master -> peer: "what is your state of (epoch, tag, seq)?" (answered with OpState).
struct OpQuery {
  static constexpr MsgType kType = MsgType::kOpQuery;
  uint64_t epoch = 0;
  uint64_t tag = 0;
  uint32_t seq = 0;
  void encode(ByteWriter& w) const;
  static Result<OpQuery> decode(ByteReader& r);
};

// Master -> peers: how an operation left in doubt ends: committed (every surviving peer has the
// result) or failed with code and reason.
struct OpOutcome {
  static constexpr MsgType kType = MsgType::kOpOutcome;
  uint64_t epoch = 0;
  uint64_t tag = 0;
  uint32_t seq = 0;
  uint8_t committed = 0;
  uint16_t code = 0;
  std::string reason;
  void encode(ByteWriter& w) const;
  static Result<OpOutcome> decode(ByteReader& r);
};

}  // namespace pccl::wire

#endif  // PCCL_WIRE_OP_MESSAGES_HPP_
