// fp4 on float32 with AVX2 (callers check simd::hasAvx2() first): the same bytes and values as the
// scalar loops of codec/quant.cpp, faster. x86 only (PCCL_X86).
#ifndef PCCL_CODEC_FP4_SIMD_HPP_
#define PCCL_CODEC_FP4_SIMD_HPP_

#include <cstddef>
#include <cstdint>

#include "codec/simd.hpp"
#include "kernels/fp4_math.hpp"

#ifdef PCCL_X86
namespace pccl::codec {

// The largest |x| of x[0..n), and *odd = some element is NaN or infinite (max is exact: any order
// gives the scalar loop's result).
float fp4AmaxAvx2(const float* x, size_t n, bool* odd);
// A normal block's codes of x[0..n), n even, into out[0..n/2): seven comparisons per element with the
// block's midpoints (Fp4Thresholds::magnitude), a byte shuffle per 16 codes.
void fp4CodesAvx2(const float* x, size_t n, const kernels::Fp4Thresholds<float>& th, uint8_t* out);
// Whole normal blocks of kFp4Block float32 elements, fused: for block j of x (j < blocks), its scale
// (amax / 6, as float bytes) at scales + 4 j and its 32 code bytes at codes + 32 j. Stops before the
// first block holding a NaN or an infinity (the caller encodes that one element by element) and returns
// the number of blocks it encoded. The same bits as fp4AmaxAvx2 + Fp4Thresholds + fp4CodesAvx2.
size_t fp4EncodeBlocksAvx2(const float* x, size_t blocks, uint8_t* scales, uint8_t* codes);
// dst[0..n) := value[code i] (+ in[i] when `in` is not null, added as decoded + in), n a multiple of 8;
// `value` is the block's 16 decoded values.
void fp4DecodeAvx2(const uint8_t* codes, size_t n, const float* value, const float* in, float* dst);

}  // namespace pccl::codec
#endif

#endif  // PCCL_CODEC_FP4_SIMD_HPP_
