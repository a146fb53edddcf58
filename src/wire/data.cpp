#include "wire/data.hpp"

#include <vector>

#include "wire/bytes.hpp"
#include "wire/messages.hpp"

namespace pccl::wire {

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
  if ((d.flags & ~kDataKnownFlags) != 0) return Status::protocol("data header: unknown flags set");
  return d;
}

}  // namespace pccl::wire
