// The frame header that starts every message on every pccl connection (docs/protocol.md §Frame).
//   magic u32 | version u16 | type u16 | epoch u64 | payload_length u32   (20 bytes, little-endian)
#ifndef PCCL_WIRE_FRAME_HPP_
#define PCCL_WIRE_FRAME_HPP_

#include <array>
#include <cstddef>
#include <cstdint>

#include "pccl/status.hpp"

namespace pccl::wire {

inline constexpr uint32_t kMagic = 0x4C434350;  // bytes "PCCL"
inline constexpr uint16_t kProtocolVersion = 20;
inline constexpr size_t kHeaderSize = 20;
// Limits enforced on the header, before any payload is allocated.
inline constexpr uint32_t kMaxHandshakePayload = 4096;      // before authentication
inline constexpr uint32_t kMaxControlPayload = 1u << 20;    // authenticated control messages

struct FrameHeader {
  uint32_t magic = kMagic;
  uint16_t version = kProtocolVersion;
  uint16_t type = 0;
  uint64_t epoch = 0;
  uint32_t length = 0;
};

using HeaderBytes = std::array<uint8_t, kHeaderSize>;

HeaderBytes encodeHeader(const FrameHeader& h);
// Rewrites the payload_length field of an encoded header (`header` points at its first byte).
void setHeaderLength(uint8_t* header, uint32_t length);

// Validates magic, version and the length limit. A version other than ours yields
// Code::kVersionMismatch naming both versions; everything else Code::kProtocolError.
Result<FrameHeader> decodeHeader(const uint8_t* data, size_t size, uint32_t max_payload);

}  // namespace pccl::wire

#endif  // PCCL_WIRE_FRAME_HPP_
