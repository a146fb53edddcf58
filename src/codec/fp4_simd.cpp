// The AVX2 loops of fp4 on float32 (codec/fp4_simd.hpp). Compiled with -O3 -ffp-contract=off, like
// quant.cpp: every comparison and multiplication is the scalar code's (kernels/fp4_math.hpp).
#include "codec/fp4_simd.hpp"

#ifdef PCCL_X86

#include <cstring>
#include <limits>

namespace pccl::codec {

PCCL_TARGET_AVX2 float fp4AmaxAvx2(const float* x, size_t n, bool* odd) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 big = _mm256_set1_ps(std::numeric_limits<float>::max());
  __m256 m0 = _mm256_setzero_ps(), m1 = m0;
  __m256 bad = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 a = _mm256_and_ps(_mm256_loadu_ps(x + i), abs_mask);
    const __m256 b = _mm256_and_ps(_mm256_loadu_ps(x + i + 8), abs_mask);
    m0 = _mm256_max_ps(m0, a);
    m1 = _mm256_max_ps(m1, b);
    bad = _mm256_or_ps(bad, _mm256_or_ps(_mm256_cmp_ps(a, big, _CMP_NLE_UQ), _mm256_cmp_ps(b, big, _CMP_NLE_UQ)));
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, _mm256_max_ps(m0, m1));
  float amax = 0;
  for (float l : lanes) amax = l > amax ? l : amax;
  bool any = _mm256_movemask_ps(bad) != 0;
  for (; i < n; ++i) {
    const float a = kernels::fp4Abs(x[i]);
    amax = a > amax ? a : amax;
    any |= !(a <= std::numeric_limits<float>::max());
  }
  *odd = any;
  return amax;
}

namespace {

// The codes of x[0..8), one per 32-bit lane: seven comparisons with the thresholds t, and the sign.
PCCL_TARGET_AVX2 inline __m256i fp4Codes8(const float* x, const __m256* t) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 v = _mm256_loadu_ps(x);
  const __m256 a = _mm256_and_ps(v, abs_mask);
  __m256i c[7];
  for (int k = 0; k < 7; ++k) c[k] = _mm256_castps_si256(_mm256_cmp_ps(a, t[k], _CMP_GE_OQ));
  // -(the number of thresholds reached), summed as a tree (a shorter dependency chain than a running sum).
  const __m256i neg = _mm256_add_epi32(_mm256_add_epi32(_mm256_add_epi32(c[0], c[1]), _mm256_add_epi32(c[2], c[3])),
                                       _mm256_add_epi32(_mm256_add_epi32(c[4], c[5]), c[6]));
  const __m256i m = _mm256_sub_epi32(_mm256_setzero_si256(), neg);
  return _mm256_or_si256(m, _mm256_slli_epi32(_mm256_srli_epi32(_mm256_castps_si256(v), 31), 3));
}

}  // namespace

PCCL_TARGET_AVX2 size_t fp4EncodeBlocksAvx2(const float* x, size_t blocks, uint8_t* scales, uint8_t* codes) {
  static_assert(kernels::kFp4Block == 64, "eight vectors of eight lanes a block");
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 big = _mm256_set1_ps(std::numeric_limits<float>::max());
  const __m128i weights = _mm_set1_epi16(0x1001);
  // The midpoints of Fp4Thresholds, in its order.
  static constexpr float kMid[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
  for (size_t j = 0; j < blocks; ++j) {
    const float* b = x + j * kernels::kFp4Block;
    __m256 m = _mm256_setzero_ps(), bad = _mm256_setzero_ps();
    for (int k = 0; k < 8; ++k) {
      const __m256 a = _mm256_and_ps(_mm256_loadu_ps(b + 8 * k), abs_mask);
      m = _mm256_max_ps(m, a);
      bad = _mm256_or_ps(bad, _mm256_cmp_ps(a, big, _CMP_NLE_UQ));
    }
    if (_mm256_movemask_ps(bad) != 0) return j;
    // The block's max across lanes (exact in any order), then the scalar code's scale and thresholds.
    m = _mm256_max_ps(m, _mm256_permute2f128_ps(m, m, 1));
    m = _mm256_max_ps(m, _mm256_shuffle_ps(m, m, 0x4e));
    m = _mm256_max_ps(m, _mm256_shuffle_ps(m, m, 0xb1));
    const float scale = _mm256_cvtss_f32(m) / 6.0f;
    std::memcpy(scales + j * sizeof(float), &scale, sizeof(float));
    const __m256 s = _mm256_set1_ps(scale);
    __m256 t[7];
    for (int k = 0; k < 7; ++k) t[k] = _mm256_mul_ps(_mm256_set1_ps(kMid[k]), s);
    uint8_t* out = codes + j * (kernels::kFp4Block / 2);
    for (int k = 0; k < 4; ++k) {
      const __m256i words = _mm256_permute4x64_epi64(
          _mm256_packs_epi32(fp4Codes8(b + 16 * k, t), fp4Codes8(b + 16 * k + 8, t)), 0xd8);
      const __m128i bytes = _mm_packus_epi16(_mm256_castsi256_si128(words), _mm256_extracti128_si256(words, 1));
      const __m128i pairs = _mm_maddubs_epi16(bytes, weights);
      _mm_storel_epi64(reinterpret_cast<__m128i*>(out + 8 * k), _mm_packus_epi16(pairs, pairs));
    }
  }
  return blocks;
}

PCCL_TARGET_AVX2 void fp4CodesAvx2(const float* x, size_t n, const kernels::Fp4Thresholds<float>& th, uint8_t* out) {
  __m256 t[7];
  for (int k = 0; k < 7; ++k) t[k] = _mm256_set1_ps(th.th[k]);
  const __m128i weights = _mm_set1_epi16(0x1001);  // byte 2j once, byte 2j + 1 times 16
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    // 16 codes as 16 bytes in order, then pairs of bytes into one: lo | hi << 4.
    const __m256i words = _mm256_permute4x64_epi64(_mm256_packs_epi32(fp4Codes8(x + i, t), fp4Codes8(x + i + 8, t)), 0xd8);
    const __m128i bytes = _mm_packus_epi16(_mm256_castsi256_si128(words), _mm256_extracti128_si256(words, 1));
    const __m128i pairs = _mm_maddubs_epi16(bytes, weights);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out + i / 2), _mm_packus_epi16(pairs, pairs));
  }
  for (; i < n; i += 2) {
    out[i / 2] = static_cast<uint8_t>(kernels::fp4EncodeNormal(x[i], th) | (kernels::fp4EncodeNormal(x[i + 1], th) << 4));
  }
}

// float32: dst[0..n) := value[code] (+ in), 8 codes (4 bytes) at a time, n a multiple of 8; the table
// lookup is two 8-lane permutes chosen by the code's sign bit; the addition is the scalar one's
// (decoded + in, in that order), so the same bits.
PCCL_TARGET_AVX2 void fp4DecodeAvx2(const uint8_t* codes, size_t n, const float* value, const float* in, float* dst) {
  const __m256 low = _mm256_loadu_ps(value), high = _mm256_loadu_ps(value + 8);
  const __m256i shifts = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
  const __m256i nibble = _mm256_set1_epi32(15);
  for (size_t i = 0; i < n; i += 8) {
    uint32_t four;
    std::memcpy(&four, codes + i / 2, 4);
    const __m256i idx = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(four)), shifts), nibble);
    const __m256 v = _mm256_blendv_ps(_mm256_permutevar8x32_ps(low, idx), _mm256_permutevar8x32_ps(high, idx),
                                      _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28)));
    if (in != nullptr) {
      _mm256_storeu_ps(dst + i, _mm256_add_ps(v, _mm256_loadu_ps(in + i)));
    } else {
      _mm256_storeu_ps(dst + i, v);
    }
  }
}

}  // namespace pccl::codec

#endif  // PCCL_X86
