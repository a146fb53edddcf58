#include "wire/ring_messages.hpp"

namespace pccl::wire {

void P2PHello::encode(ByteWriter& w) const {
  w.fixed(sender_id);
  w.u64(epoch);
  w.u32(index);
  w.u8(flags);
  w.u64(received);
  w.fixed(signature);
}
Result<P2PHello> P2PHello::decode(ByteReader& r) {
  P2PHello m;
  PCCL_RETURN_IF_ERROR(r.fixed(&m.sender_id));
  PCCL_RETURN_IF_ERROR(r.u64(&m.epoch));
  PCCL_RETURN_IF_ERROR(r.u32(&m.index));
  PCCL_RETURN_IF_ERROR(r.u8(&m.flags));
  PCCL_RETURN_IF_ERROR(r.u64(&m.received));
  PCCL_RETURN_IF_ERROR(r.fixed(&m.signature));
  if ((m.flags & ~kHelloKnownFlags) != 0) return Status::protocol("P2PHello with unknown flags");
  return m;
}

void P2PAccept::encode(ByteWriter& w) const {
  w.u8(flags);
  w.u64(received);
}
Result<P2PAccept> P2PAccept::decode(ByteReader& r) {
  P2PAccept m;
  PCCL_RETURN_IF_ERROR(r.u8(&m.flags));
  PCCL_RETURN_IF_ERROR(r.u64(&m.received));
  if ((m.flags & ~kHelloResumable) != 0) return Status::protocol("P2PAccept with unknown flags");
  return m;
}

void RelayHello::encode(ByteWriter& w) const {
  w.fixed(sender_id);
  w.u64(epoch);
  w.fixed(from);
  w.fixed(to);
  w.u32(index);
  w.fixed(signature);
}
Result<RelayHello> RelayHello::decode(ByteReader& r) {
  RelayHello m;
  PCCL_RETURN_IF_ERROR(r.fixed(&m.sender_id));
  PCCL_RETURN_IF_ERROR(r.u64(&m.epoch));
  PCCL_RETURN_IF_ERROR(r.fixed(&m.from));
  PCCL_RETURN_IF_ERROR(r.fixed(&m.to));
  PCCL_RETURN_IF_ERROR(r.u32(&m.index));
  PCCL_RETURN_IF_ERROR(r.fixed(&m.signature));
  if (m.sender_id != m.from && m.sender_id != m.to) return Status::protocol("RelayHello from neither end of its link");
  if (m.from == m.to) return Status::protocol("RelayHello for a link from a member to itself");
  return m;
}

}  // namespace pccl::wire
