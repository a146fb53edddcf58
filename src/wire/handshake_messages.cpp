#include "wire/handshake_messages.hpp"

namespace pccl::wire {

void Hello::encode(ByteWriter& w) const {
  w.u8(role);
  w.u8(flags);
  w.fixed(nonce);
  w.fixed(kx);
}
Result<Hello> Hello::decode(ByteReader& r) {
  Hello m;
  PCCL_RETURN_IF_ERROR(r.u8(&m.role));
  PCCL_RETURN_IF_ERROR(r.u8(&m.flags));
  PCCL_RETURN_IF_ERROR(r.fixed(&m.nonce));
  PCCL_RETURN_IF_ERROR(r.fixed(&m.kx));
  return m;
}

void HelloReply::encode(ByteWriter& w) const {
  w.u8(flags);
  w.fixed(nonce);
  w.fixed(kx);
}
Result<HelloReply> HelloReply::decode(ByteReader& r) {
  HelloReply m;
  PCCL_RETURN_IF_ERROR(r.u8(&m.flags));
  PCCL_RETURN_IF_ERROR(r.fixed(&m.nonce));
  PCCL_RETURN_IF_ERROR(r.fixed(&m.kx));
  return m;
}

void AuthProof::encode(ByteWriter& w) const { w.fixed(mac); }
Result<AuthProof> AuthProof::decode(ByteReader& r) {
  AuthProof m;
  PCCL_RETURN_IF_ERROR(r.fixed(&m.mac));
  return m;
}

void AuthOk::encode(ByteWriter& w) const { w.fixed(mac); }
Result<AuthOk> AuthOk::decode(ByteReader& r) {
  AuthOk m;
  PCCL_RETURN_IF_ERROR(r.fixed(&m.mac));
  return m;
}

void Error::encode(ByteWriter& w) const {
  w.u16(code);
  // Bounded so an Error always fits the handshake frame limit.
  w.str(message.size() <= kMaxErrorText ? message : message.substr(0, kMaxErrorText));
}
Result<Error> Error::decode(ByteReader& r) {
  Error m;
  PCCL_RETURN_IF_ERROR(r.u16(&m.code));
  PCCL_RETURN_IF_ERROR(r.str(&m.message));
  return m;
}

}  // namespace pccl::wire
