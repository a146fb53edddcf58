#include "wire/ring_messages.hpp"

namespace pccl::wire {

void P2PHello::encode(ByteWriter& w) const {
  w.fixed(sender_id);
  w.u64(epoch);
  w.u32(index);
  w.fixed(signature);
}
Result<P2PHello> P2PHello::decode(ByteReader& r) {
  P2PHello m;
  PCCL_RETURN_IF_ERROR(r.fixed(&m.sender_id));
  PCCL_RETURN_IF_ERROR(r.u64(&m.epoch));
  PCCL_RETURN_IF_ERROR(r.u32(&m.index));
  PCCL_RETURN_IF_ERROR(r.fixed(&m.signature));
  return m;
}

}  // namespace pccl::wire
