// The ring's data frames: the 20-byte frame header (type kData) followed by a 24-byte DataHeader and
// the elements themselves. The receiver learns where the elements go from the DataHeader alone, so it
// can read them straight into their destination.
//   op_id u64 | phase u32 | flags u32 | offset u64 (element offset within the phase's chunk)
#ifndef PCCL_WIRE_DATA_HPP_
#define PCCL_WIRE_DATA_HPP_

#include <array>
#include <cstdint>

#include "pccl/status.hpp"
#include "wire/frame.hpp"

namespace pccl::wire {

inline constexpr size_t kDataHeaderSize = 24;
inline constexpr uint32_t kMaxDataPayload = 64u << 20;  // one segment's bytes, checked before reading them

inline constexpr uint32_t kDataCompressed = 1;  // flags: the payload is one zstd frame
// flags: a request for shared-state bytes (state-fetch connections only, docs/protocol.md §5.6)
inline constexpr uint32_t kDataRequest = 2;
inline constexpr uint32_t kDataKnownFlags = kDataCompressed | kDataRequest;

struct DataHeader {
  uint64_t op_id = 0;
  uint32_t phase = 0;  // ring step: 0..N-2 reduce-scatter, N-1..2N-3 all-gather
  uint32_t flags = 0;  // kData* bits; others must be 0
  uint64_t offset = 0;
};

using DataHeaderBytes = std::array<uint8_t, kDataHeaderSize>;
// Frame header + data header for `payload_bytes` of elements.
std::array<uint8_t, kHeaderSize + kDataHeaderSize> encodeDataFrameHead(const DataHeader& d, uint64_t epoch,
                                                                       uint32_t payload_bytes);
Result<DataHeader> decodeDataHeader(const uint8_t* data, size_t size);

}  // namespace pccl::wire

#endif  // PCCL_WIRE_DATA_HPP_
