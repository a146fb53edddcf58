// zstd on the wire bytes of a segment (after quantization), with contexts reused across calls.
// A frame is sent compressed only when that makes it smaller; the data header's flag says which.
// Thread: one owner at a time (the communicator's io thread).
#ifndef PCCL_CODEC_COMPRESS_HPP_
#define PCCL_CODEC_COMPRESS_HPP_

#include <cstddef>
#include <cstdint>

#include "pccl/status.hpp"

namespace pccl::codec {

inline constexpr int kMinZstdLevel = 1;
inline constexpr int kMaxZstdLevel = 19;

class Compressor {
 public:
  Compressor();
  ~Compressor();
  Compressor(const Compressor&) = delete;
  Compressor& operator=(const Compressor&) = delete;

  // Capacity `dst` needs for any input of n bytes.
  static size_t bound(size_t n);
  // Compresses src[0..n) into dst at `level`; returns the compressed size, or 0 when the result
  // would not be smaller than the input (send it raw then).
  Result<size_t> compress(const uint8_t* src, size_t n, uint8_t* dst, size_t capacity, int level);
  // Decompresses a frame a peer sent: it must hold exactly `expected` bytes, else ProtocolError.
  Status decompress(const uint8_t* src, size_t n, uint8_t* dst, size_t expected);

 private:
  void* cctx_ = nullptr;
  void* dctx_ = nullptr;
};

}  // namespace pccl::codec

#endif  // PCCL_CODEC_COMPRESS_HPP_
