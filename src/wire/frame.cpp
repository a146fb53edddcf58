#include "wire/frame.hpp"

#include <fmt/format.h>

#include "wire/bytes.hpp"

namespace pccl::wire {

void setHeaderLength(uint8_t* header, uint32_t length) {
  constexpr size_t kLengthOffset = 16;  // magic u32 | version u16 | type u16 | epoch u64 | length u32
  for (size_t i = 0; i < 4; ++i) header[kLengthOffset + i] = static_cast<uint8_t>(length >> (8 * i));
}

HeaderBytes encodeHeader(const FrameHeader& h) {
  std::vector<uint8_t> v;
  v.reserve(kHeaderSize);
  ByteWriter w(&v);
  w.u32(h.magic);
  w.u16(h.version);
  w.u16(h.type);
  w.u64(h.epoch);
  w.u32(h.length);
  HeaderBytes out{};
  std::copy(v.begin(), v.end(), out.begin());
  return out;
}

Result<FrameHeader> decodeHeader(const uint8_t* data, size_t size, uint32_t max_payload) {
  if (size < kHeaderSize) {
    return Status::protocol(fmt::format("truncated frame header: {} of {} bytes", size, kHeaderSize));
  }
  ByteReader r(data, kHeaderSize);
  FrameHeader h;
  PCCL_RETURN_IF_ERROR(r.u32(&h.magic));
  PCCL_RETURN_IF_ERROR(r.u16(&h.version));
  PCCL_RETURN_IF_ERROR(r.u16(&h.type));
  PCCL_RETURN_IF_ERROR(r.u64(&h.epoch));
  PCCL_RETURN_IF_ERROR(r.u32(&h.length));
  if (h.magic != kMagic) {
    return Status::protocol(fmt::format("bad frame magic 0x{:08x} (expected 0x{:08x}): not a pccl peer", h.magic, kMagic));
  }
  if (h.version != kProtocolVersion) {
    return Status::versionMismatch(
        fmt::format("remote speaks pccl protocol version {}, this build speaks version {}", h.version, kProtocolVersion));
  }
  if (h.length > max_payload) {
    return Status::protocol(fmt::format("frame payload of {} bytes exceeds the limit of {} bytes", h.length, max_payload));
  }
  return h;
}

}  // namespace pccl::wire
