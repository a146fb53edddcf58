#include "codec/compress.hpp"

#include <fmt/format.h>
#include <zstd.h>

namespace pccl::codec {

Compressor::Compressor() : cctx_(ZSTD_createCCtx()), dctx_(ZSTD_createDCtx()) {}

Compressor::~Compressor() {
  ZSTD_freeCCtx(static_cast<ZSTD_CCtx*>(cctx_));
  ZSTD_freeDCtx(static_cast<ZSTD_DCtx*>(dctx_));
}

size_t Compressor::bound(size_t n) { return ZSTD_compressBound(n); }

Result<size_t> Compressor::compress(const uint8_t* src, size_t n, uint8_t* dst, size_t capacity, int level) {
  if (cctx_ == nullptr) return Status::internal("zstd: no compression context (out of memory)");
  // With a checksum (4 bytes): a corrupted frame is refused rather than decoded into wrong values.
  auto* cctx = static_cast<ZSTD_CCtx*>(cctx_);
  ZSTD_CCtx_reset(cctx, ZSTD_reset_session_and_parameters);
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, level);
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
  const size_t r = ZSTD_compress2(cctx, dst, capacity, src, n);
  if (ZSTD_isError(r)) return Status::internal(fmt::format("zstd compression failed: {}", ZSTD_getErrorName(r)));
  return r < n ? r : size_t{0};
}

Status Compressor::decompress(const uint8_t* src, size_t n, uint8_t* dst, size_t expected) {
  if (dctx_ == nullptr) return Status::internal("zstd: no decompression context (out of memory)");
  // Checked before anything is written: a frame announcing another size is refused outright.
  const unsigned long long declared = ZSTD_getFrameContentSize(src, n);
  if (declared == ZSTD_CONTENTSIZE_ERROR) return Status::protocol("corrupted compressed segment: not a zstd frame");
  if (declared != ZSTD_CONTENTSIZE_UNKNOWN && declared != expected) {
    return Status::protocol(
        fmt::format("corrupted compressed segment: it decompresses to {} bytes, expected {}", declared, expected));
  }
  const size_t r = ZSTD_decompressDCtx(static_cast<ZSTD_DCtx*>(dctx_), dst, expected, src, n);
  if (ZSTD_isError(r)) {
    return Status::protocol(fmt::format("corrupted compressed segment: {}", ZSTD_getErrorName(r)));
  }
  if (r != expected) {
    return Status::protocol(fmt::format("corrupted compressed segment: {} bytes after decompression, expected {}", r,
                                        expected));
  }
  return Status::ok();
}

}  // namespace pccl::codec
