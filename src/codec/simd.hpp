// x86 vector building blocks of the CPU loops (codec/quant.cpp, codec/reduce.cpp): eight float16 or
// bfloat16 elements <-> one __m256 of float32, bit for bit the scalar conversions of kernels/half.hpp
// (round to nearest even, subnormals exact, NaN quieted with its payload), and the run-time CPU checks
// that choose them. The library is built for baseline x86-64, so each function carries its own
// target attribute and is called only from code of the same target, behind the check.
#ifndef PCCL_CODEC_SIMD_HPP_
#define PCCL_CODEC_SIMD_HPP_

#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <cpuid.h>
#define PCCL_X86 1
#endif

#ifdef PCCL_X86
#define PCCL_TARGET_F16C __attribute__((target("avx,f16c")))
#define PCCL_TARGET_AVX2 __attribute__((target("avx2")))
#define PCCL_TARGET_AVX2_F16C __attribute__((target("avx2,f16c")))

namespace pccl::codec::simd {

inline bool hasAvx2() {
  static const bool k = __builtin_cpu_supports("avx2");
  return k;
}
// F16C from CPUID leaf 1 (ECX bit 29): clang's __builtin_cpu_supports does not know "f16c". AVX (the
// OS saves the YMM state) is asked of the builtin, which checks OSXSAVE/XGETBV as well.
inline bool hasF16c() {
  static const bool k = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __get_cpuid(1, &a, &b, &c, &d) != 0 && (c & (1u << 29)) != 0 && __builtin_cpu_supports("avx");
  }();
  return k;
}

// Sixteen float32 values in two registers. Which element sits in which lane is the format's business
// (see each loader): elementwise arithmetic between two loads of the same format, then a store of
// that format, keeps every element in place.
struct F32x16 {
  __m256 a, b;
};

// float16 by F16C: vcvtph2ps/vcvtps2ph round and treat NaN exactly as kernels::halfToFloat/floatToHalf.
// Eight elements in order.
struct HalfX8 {
  PCCL_TARGET_F16C static __m256 load(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  PCCL_TARGET_F16C static void store(uint16_t* p, __m256 v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
};
struct HalfX16 {  // a = elements 0..7, b = 8..15
  PCCL_TARGET_F16C static F32x16 load(const uint16_t* p) { return {HalfX8::load(p), HalfX8::load(p + 8)}; }
  PCCL_TARGET_F16C static void store(uint16_t* p, F32x16 v) {
    HalfX8::store(p, v.a);
    HalfX8::store(p + 8, v.b);
  }
};

// bfloat16: kernels::bf16ToFloat/floatToBf16 on 32-bit integer lanes. Unpacking against zero puts each
// element in the top half of a 32-bit lane, per 128-bit half of the register: a = elements 0..3 and
// 8..11, b = 4..7 and 12..15, the order in which the saturating pack of the store puts them back.
struct Bf16X16 {
  PCCL_TARGET_AVX2 static F32x16 load(const uint16_t* p) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    const __m256i zero = _mm256_setzero_si256();
    return {_mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, v)), _mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, v))};
  }
  PCCL_TARGET_AVX2 static void store(uint16_t* p, F32x16 v) {
    const __m256i packed = _mm256_packus_epi32(narrowed(v.a), narrowed(v.b));  // every lane <= 0xffff: exact
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), packed);
  }
  // floatToBf16 per 32-bit lane: NaN -> (x | quiet bit) >> 16, else (x + 0x7fff + lsb) >> 16.
  PCCL_TARGET_AVX2 static __m256i narrowed(__m256 f) {
    const __m256i x = _mm256_castps_si256(f);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
    const __m256i rounded = _mm256_add_epi32(x, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff)));
    const __m256i quiet = _mm256_or_si256(x, _mm256_set1_epi32(0x00400000));
    const __m256i is_nan = _mm256_castps_si256(_mm256_cmp_ps(f, f, _CMP_UNORD_Q));
    return _mm256_srli_epi32(_mm256_blendv_epi8(rounded, quiet, is_nan), 16);
  }
};

}  // namespace pccl::codec::simd

#endif  // PCCL_X86

#endif  // PCCL_CODEC_SIMD_HPP_
