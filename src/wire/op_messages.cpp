#include "wire/op_messages.hpp"

namespace pccl::wire {

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
