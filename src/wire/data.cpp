#include "wire/data.hpp"

#include <vector>

#include "wire/bytes.hpp"
#include "wire/messages.hpp"

namespace pccl::wire {

namespace {
void writeDesc(ByteWriter& w, const OpDesc& d) {
  w.u64(d.count);
  w.u32(d.segment_bytes);
  w.u8(d.dtype);
  w.u8(d.op);
  w.u8(d.quant);
  w.u8(d.compress);
  w.u8(d.algo);
}

Status readDesc(ByteReader& r, OpDesc* d) {
  PCCL_RETURN_IF_ERROR(r.u64(&d->count));
  PCCL_RETURN_IF_ERROR(r.u32(&d->segment_bytes));
  PCCL_RETURN_IF_ERROR(r.u8(&d->dtype));
  PCCL_RETURN_IF_ERROR(r.u8(&d->op));
  PCCL_RETURN_IF_ERROR(r.u8(&d->quant));
  PCCL_RETURN_IF_ERROR(r.u8(&d->compress));
  return r.u8(&d->algo);
}
}  // namespace

std::array<uint8_t, kHeaderSize + kDataHeaderSize> encodeDataFrameHead(const DataHeader& d, uint64_t epoch,
                                                                       uint32_t payload_bytes) {
  FrameHeader h;
  h.type = static_cast<uint16_t>(MsgType::kData);
  h.epoch = epoch;
  h.length = static_cast<uint32_t>(kDataHeaderSize) + payload_bytes;
  HeaderBytes hb = encodeHeader(h);
  std::vector<uint8_t> v;
  v.reserve(kDataHeaderSize);
  ByteWriter w(&v);
  w.u64(d.op_id);
  w.u32(d.phase);
  w.u32(d.flags);
  w.u64(d.offset);
  w.u32(d.seq);
  writeDesc(w, d.desc);
  std::array<uint8_t, kHeaderSize + kDataHeaderSize> out{};
  std::copy(hb.begin(), hb.end(), out.begin());
  std::copy(v.begin(), v.end(), out.begin() + kHeaderSize);
  return out;
}

Result<DataHeader> decodeDataHeader(const uint8_t* data, size_t size) {
  ByteReader r(data, size);
  DataHeader d;
  PCCL_RETURN_IF_ERROR(r.u64(&d.op_id));
  PCCL_RETURN_IF_ERROR(r.u32(&d.phase));
  PCCL_RETURN_IF_ERROR(r.u32(&d.flags));
  PCCL_RETURN_IF_ERROR(r.u64(&d.offset));
  PCCL_RETURN_IF_ERROR(r.u32(&d.seq));
  PCCL_RETURN_IF_ERROR(readDesc(r, &d.desc));
  if ((d.flags & ~kDataKnownFlags) != 0) return Status::protocol("data header: unknown flags set");
  return d;
}

std::vector<uint8_t> encodeRingCtl(const RingCtl& c) {
  std::vector<uint8_t> v;
  ByteWriter w(&v);
  w.u8(c.kind);
  w.u32(c.value);
  w.u16(c.code);
  writeDesc(w, c.desc);
  w.str(c.reason.size() > kMaxRingCtlReason ? c.reason.substr(0, kMaxRingCtlReason) : c.reason);
  return v;
}

Result<RingCtl> decodeRingCtl(const uint8_t* data, size_t size) {
  ByteReader r(data, size);
  RingCtl c;
  PCCL_RETURN_IF_ERROR(r.u8(&c.kind));
  if (c.kind < RingCtl::kHello || c.kind > RingCtl::kAbort) {
    return Status::protocol("ring control frame: unknown kind " + std::to_string(c.kind));
  }
  PCCL_RETURN_IF_ERROR(r.u32(&c.value));
  PCCL_RETURN_IF_ERROR(r.u16(&c.code));
  PCCL_RETURN_IF_ERROR(readDesc(r, &c.desc));
  PCCL_RETURN_IF_ERROR(r.str(&c.reason, kMaxRingCtlReason));
  PCCL_RETURN_IF_ERROR(r.expectEnd());
  return c;
}

}  // namespace pccl::wire
