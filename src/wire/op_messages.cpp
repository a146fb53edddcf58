#include "wire/op_messages.hpp"

#include <fmt/format.h>

namespace pccl::wire {

void OpAnnounce::encode(ByteWriter& w) const {
  w.u64(tag);
  w.u32(seq);
  w.u64(count);
  w.u8(dtype);
  w.u8(op);
  w.u8(quant);
  w.u8(compress);
  w.u64(epoch);
  w.u32(segment_bytes);
  w.u8(algo);
  w.u8(kind);
  w.u32(root);
}
Result<OpAnnounce> OpAnnounce::decode(ByteReader& r) {
  OpAnnounce m;
  PCCL_RETURN_IF_ERROR(r.u64(&m.tag));
  PCCL_RETURN_IF_ERROR(r.u32(&m.seq));
  PCCL_RETURN_IF_ERROR(r.u64(&m.count));
  PCCL_RETURN_IF_ERROR(r.u8(&m.dtype));
  PCCL_RETURN_IF_ERROR(r.u8(&m.op));
  PCCL_RETURN_IF_ERROR(r.u8(&m.quant));
  PCCL_RETURN_IF_ERROR(r.u8(&m.compress));
  PCCL_RETURN_IF_ERROR(r.u64(&m.epoch));
  PCCL_RETURN_IF_ERROR(r.u32(&m.segment_bytes));
  PCCL_RETURN_IF_ERROR(r.u8(&m.algo));
  PCCL_RETURN_IF_ERROR(r.u8(&m.kind));
  PCCL_RETURN_IF_ERROR(r.u32(&m.root));
  if (m.kind > kMaxCollective) return Status::protocol(fmt::format("OpAnnounce: unknown collective {}", m.kind));
  return m;
}

void OpAbort::encode(ByteWriter& w) const {
  w.u64(tag);
  w.u32(seq);
  w.u16(code);
  w.str(reason);
}
Result<OpAbort> OpAbort::decode(ByteReader& r) {
  OpAbort m;
  PCCL_RETURN_IF_ERROR(r.u64(&m.tag));
  PCCL_RETURN_IF_ERROR(r.u32(&m.seq));
  PCCL_RETURN_IF_ERROR(r.u16(&m.code));
  PCCL_RETURN_IF_ERROR(r.str(&m.reason));
  return m;
}

void OpDone::encode(ByteWriter& w) const {
  w.u64(tag);
  w.u32(seq);
}
Result<OpDone> OpDone::decode(ByteReader& r) {
  OpDone m;
  PCCL_RETURN_IF_ERROR(r.u64(&m.tag));
  PCCL_RETURN_IF_ERROR(r.u32(&m.seq));
  return m;
}

void OpFailed::encode(ByteWriter& w) const {
  w.u64(tag);
  w.u32(seq);
  w.u16(code);
  w.u8(ring_broken);
  w.str(reason);
}
Result<OpFailed> OpFailed::decode(ByteReader& r) {
  OpFailed m;
  PCCL_RETURN_IF_ERROR(r.u64(&m.tag));
  PCCL_RETURN_IF_ERROR(r.u32(&m.seq));
  PCCL_RETURN_IF_ERROR(r.u16(&m.code));
  PCCL_RETURN_IF_ERROR(r.u8(&m.ring_broken));
  if (m.ring_broken > 1) return Status::protocol("OpFailed: ring_broken must be 0 or 1");
  PCCL_RETURN_IF_ERROR(r.str(&m.reason));
  return m;
}

void OpState::encode(ByteWriter& w) const {
  w.u64(epoch);
  w.u64(tag);
  w.u32(seq);
  w.u8(state);
}
Result<OpState> OpState::decode(ByteReader& r) {
  OpState m;
  PCCL_RETURN_IF_ERROR(r.u64(&m.epoch));
  PCCL_RETURN_IF_ERROR(r.u64(&m.tag));
  PCCL_RETURN_IF_ERROR(r.u32(&m.seq));
  PCCL_RETURN_IF_ERROR(r.u8(&m.state));
  if (m.state > static_cast<uint8_t>(OpPhase::kCommitted)) return Status::protocol("OpState: unknown state");
  return m;
}

void OpQuery::encode(ByteWriter& w) const {
  w.u64(epoch);
  w.u64(tag);
  w.u32(seq);
}
Result<OpQuery> OpQuery::decode(ByteReader& r) {
  OpQuery m;
  PCCL_RETURN_IF_ERROR(r.u64(&m.epoch));
  PCCL_RETURN_IF_ERROR(r.u64(&m.tag));
  PCCL_RETURN_IF_ERROR(r.u32(&m.seq));
  return m;
}

void OpOutcome::encode(ByteWriter& w) const {
  w.u64(epoch);
  w.u64(tag);
  w.u32(seq);
  w.u8(committed);
  w.u16(code);
  w.str(reason);
}
Result<OpOutcome> OpOutcome::decode(ByteReader& r) {
  OpOutcome m;
  PCCL_RETURN_IF_ERROR(r.u64(&m.epoch));
  PCCL_RETURN_IF_ERROR(r.u64(&m.tag));
  PCCL_RETURN_IF_ERROR(r.u32(&m.seq));
  PCCL_RETURN_IF_ERROR(r.u8(&m.committed));
  if (m.committed > 1) return Status::protocol("OpOutcome: committed must be 0 or 1");
  PCCL_RETURN_IF_ERROR(r.u16(&m.code));
  PCCL_RETURN_IF_ERROR(r.str(&m.reason));
  return m;
}

}  // namespace pccl::wire
