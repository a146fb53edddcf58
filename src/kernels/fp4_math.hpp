// fp4 (e2m1 with a scale per block): the element math, for host loops and GPU kernels alike.
//
// A block of up to kFp4Block elements travels as one scale in the block's arithmetic type W (float for
// float16/bfloat16/float32 data, double for float64) and one 4-bit code per element: bit 3 the sign,
// bits 0..2 the magnitude m, an e2m1 number (2 exponent bits, 1 mantissa bit, no infinities):
//
//   m        0    1    2    3    4    5    6    7
//   level    0    0.5  1    1.5  2    3    4    6
//
//   normal block     scale = amax / 6 >= 0 (amax: the largest |x| of the block); x' = ±level(m) * scale.
//                    An all-zero block has scale 0 and decodes to zeros of the elements' signs.
//   infinite block   some elements are ±Inf (none NaN): scale = -(finite amax / 4), stored negated
//                    (sign bit set, -0.0 included); m = 7 is ±Inf, the finite elements use m = 0..6.
//   NaN block        some element is NaN: scale = NaN and every element decodes to NaN.
//
// Encoding compares |x| with the midpoints between levels times the scale (computed once per block,
// each one IEEE multiplication): m = how many midpoints |x| reaches, so a tie rounds away from zero and
// no division or reciprocal is taken (a tiny scale cannot overflow anything). Decoding is one IEEE
// multiplication (levels are exact in every W). Codes of element i are the low nibble of byte i/2 for
// even i, the high nibble for odd i; on the wire all block scales come first, then the codes.
// Why e2m1 and not a 4-bit integer per block: at the same bytes (36 per 64 float32 elements) its error
// on heavy-tailed data (gradients) is lower (docs/algorithms.md §4, "fp4").
#ifndef PCCL_KERNELS_FP4_MATH_HPP_
#define PCCL_KERNELS_FP4_MATH_HPP_

#include <cstddef>
#include <cstdint>
#include <limits>

#include "kernels/portable.hpp"
#include "kernels/quant_math.hpp"  // signBit

namespace pccl::kernels {

inline constexpr size_t kFp4Block = 64;

// e2m1 magnitude m (0..7) as a number: 0, 0.5 (subnormal), then 2^(e-1) * (1 + mantissa / 2).
template <typename W>
PCCL_HD W fp4Level(uint32_t m) {
  const uint32_t e = m >> 1;
  const W mantissa = (m & 1u) != 0 ? W(0.5) : W(0);
  if (e == 0) return mantissa;
  return static_cast<W>(1u << (e - 1)) * (W(1) + mantissa);
}

// |v| by its bits (no branch on the sign; a NaN stays a NaN).
template <typename W>
PCCL_HD W fp4Abs(W v) {
  if constexpr (sizeof(W) == 4) {
    return bitsFloat(floatBits(v) & 0x7fffffffu);
  } else {
    const uint64_t u = doubleBits(v) & 0x7fffffffffffffffull;
#ifdef PCCL_DEVICE_PASS
    return __longlong_as_double(static_cast<long long>(u));
#else
    double d;
    std::memcpy(&d, &u, sizeof d);
    return d;
#endif
  }
}

// What a block's elements make of its scale: the largest finite |x|, and whether Inf or NaN was seen.
template <typename W>
struct Fp4Stats {
  W amax = W(0);
  bool inf = false;
  bool nan = false;
  PCCL_HD void add(W x) {
    if (isNan(x)) {
      nan = true;
    } else if (!isFinite(x)) {
      inf = true;
    } else {
      const W a = fp4Abs(x);
      amax = a > amax ? a : amax;
    }
  }
};

template <typename W>
PCCL_HD W fp4Scale(const Fp4Stats<W>& s) {
  if (s.nan) return std::numeric_limits<W>::quiet_NaN();
  if (s.inf) return -(s.amax / W(4));
  return s.amax / W(6);
}

// The per-block thresholds: th[k] = midpoint(k) * |scale|.
template <typename W>
struct Fp4Thresholds {
  W th[7];
  PCCL_HD explicit Fp4Thresholds(W scale) {
    const W s = fp4Abs(scale);
    th[0] = pcclMul(W(0.25), s);  // the midpoints between levels k and k + 1, once per block
    th[1] = pcclMul(W(0.75), s);
    th[2] = pcclMul(W(1.25), s);
    th[3] = pcclMul(W(1.75), s);
    th[4] = pcclMul(W(2.5), s);
    th[5] = pcclMul(W(3.5), s);
    th[6] = pcclMul(W(5), s);
  }
  // The magnitude code of a = |x| (finite) among the first `levels` midpoints.
  PCCL_HD uint32_t magnitude(W a, uint32_t levels = 7) const {
    uint32_t m = 0;
    for (uint32_t k = 0; k < levels; ++k) m += a >= th[k] ? 1u : 0u;
    return m;
  }
};

// A normal block's code of x (finite).
template <typename W>
PCCL_HD uint8_t fp4EncodeNormal(W x, const Fp4Thresholds<W>& t) {
  const uint32_t sign = signBit(x) ? 8u : 0u;
  return static_cast<uint8_t>(sign | t.magnitude(fp4Abs(x)));
}

// Any block's code of x.
template <typename W>
PCCL_HD uint8_t fp4Encode(W x, W scale, const Fp4Thresholds<W>& t) {
  if (isNan(scale)) return 0;
  if (!signBit(scale)) return fp4EncodeNormal(x, t);
  const uint32_t sign = signBit(x) ? 8u : 0u;
  if (!isFinite(x)) return static_cast<uint8_t>(sign | 7u);
  return static_cast<uint8_t>(sign | t.magnitude(fp4Abs(x), 6));
}

// The value of code q (0..15) in a block of scale `scale`.
template <typename W>
PCCL_HD W fp4Decode(uint8_t q, W scale) {
  if (isNan(scale)) return scale;
  const bool negative = (q & 8u) != 0;
  const uint32_t m = q & 7u;
  W v;
  if (signBit(scale)) {
    v = m == 7 ? std::numeric_limits<W>::infinity() : pcclMul(fp4Level<W>(m), -scale);
  } else {
    v = pcclMul(fp4Level<W>(m), scale);
  }
  return negative ? -v : v;
}

// A scale from the wire is usable unless it is infinite (NaN marks a NaN block, a negative one an
// infinite block).
template <typename W>
PCCL_HD bool fp4ScaleValid(W scale) {
  return isNan(scale) || isFinite(scale);
}

// Code i of a code array (two per byte, low nibble first).
PCCL_HD uint8_t fp4Code(const uint8_t* codes, size_t i) {
  const uint8_t b = codes[i >> 1];
  return (i & 1u) != 0 ? static_cast<uint8_t>(b >> 4) : static_cast<uint8_t>(b & 0x0fu);
}

}  // namespace pccl::kernels

#endif  // PCCL_KERNELS_FP4_MATH_HPP_
