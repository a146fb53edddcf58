// int8 min-max block quantization: the element math, for host loops and GPU kernels alike.
//
// A block of up to kInt8Block elements travels as a header (lo, scale) in the block's arithmetic
// type W (float for float16/bfloat16/float32 data, double for float64) and one byte per element.
//
//   normal block     lo = min, scale = (max - min) / 255 >= 0; code q = round((x - lo) / scale);
//                    x' = lo + q * scale. A constant block has scale 0 and decodes to lo exactly.
//   infinite block   some elements are +-Inf (none NaN): scale is stored negated (sign bit set,
//                    -0.0 included); codes 0 and 255 are -Inf and +Inf, the finite elements use
//                    1..254 over their own range: x' = lo + (q - 1) * |scale|.
//   NaN block        some element is NaN, or the finite range overflows W: lo = scale = NaN and
//                    every element decodes to NaN.
//
// Rounding is to nearest (halves away from zero; codes are never negative). Every operation is a
// single IEEE operation (pcclMul/pcclAdd, never fused), so every implementation decodes alike.
#ifndef PCCL_KERNELS_QUANT_MATH_HPP_
#define PCCL_KERNELS_QUANT_MATH_HPP_

#include <cstddef>
#include <cstdint>
#include <limits>

#include "kernels/portable.hpp"

namespace pccl::kernels {

inline constexpr size_t kInt8Block = 4096;

template <typename W>
struct Int8Header {
  W lo;
  W scale;
};

template <typename W>
PCCL_HD bool signBit(W v) {
  if constexpr (sizeof(W) == 4) {
    return (floatBits(v) >> 31) != 0;
  } else {
    return (doubleBits(v) >> 63) != 0;
  }
}

// Running statistics of a block: the finite minimum and maximum, and whether Inf or NaN was seen.
template <typename W>
struct BlockStats {
  W lo = std::numeric_limits<W>::infinity();
  W hi = -std::numeric_limits<W>::infinity();
  bool inf = false;
  bool nan = false;
  PCCL_HD void add(W x) {
    if (isFinite(x)) {
      lo = x < lo ? x : lo;
      hi = x > hi ? x : hi;
    } else if (isNan(x)) {
      nan = true;
    } else {
      inf = true;
    }
  }
  PCCL_HD void merge(const BlockStats& o) {
    lo = o.lo < lo ? o.lo : lo;
    hi = o.hi > hi ? o.hi : hi;
    inf = inf || o.inf;
    nan = nan || o.nan;
  }
};

template <typename W>
PCCL_HD Int8Header<W> int8Header(const BlockStats<W>& s) {
  const W nan = std::numeric_limits<W>::quiet_NaN();
  if (s.nan) return {nan, nan};
  if (!(s.lo <= s.hi)) return {W(0), s.inf ? -W(0) : W(0)};  // no finite element
  const W range = pcclAdd(s.hi, -s.lo);
  if (!isFinite(range)) return {nan, nan};
  const W steps = s.inf ? W(253) : W(255);
  const W scale = range / steps;
  return {s.lo, s.inf ? -scale : scale};
}

// 1 / |scale|, or 0 for a constant block.
template <typename W>
PCCL_HD W int8Inverse(const Int8Header<W>& h) {
  const W step = signBit(h.scale) ? -h.scale : h.scale;
  return step > W(0) ? W(1) / step : W(0);
}

// Normal block: x is finite and within [lo, lo + 255 * scale].
template <typename W>
PCCL_HD uint8_t int8EncodeNormal(W x, W lo, W inv) {
  W t = pcclAdd(pcclMul(pcclAdd(x, -lo), inv), W(0.5));
  t = t < W(255) ? t : W(255);
  return static_cast<uint8_t>(static_cast<int32_t>(t));
}

template <typename W>
PCCL_HD uint8_t int8Encode(W x, const Int8Header<W>& h, W inv) {
  if (isNan(h.lo)) return 0;
  if (!signBit(h.scale)) return int8EncodeNormal(x, h.lo, inv);
  if (!isFinite(x)) return x < W(0) ? uint8_t{0} : uint8_t{255};
  W t = pcclAdd(pcclMul(pcclAdd(x, -h.lo), inv), W(0.5));
  t = t < W(253) ? t : W(253);
  return static_cast<uint8_t>(1 + static_cast<int32_t>(t));
}

template <typename W>
PCCL_HD W int8DecodeNormal(uint8_t q, W lo, W scale) {
  return pcclAdd(lo, pcclMul(static_cast<W>(q), scale));
}

template <typename W>
PCCL_HD W int8Decode(uint8_t q, const Int8Header<W>& h) {
  if (isNan(h.lo)) return h.lo;
  if (signBit(h.scale)) {
    if (q == 0) return -std::numeric_limits<W>::infinity();
    if (q == 255) return std::numeric_limits<W>::infinity();
    return pcclAdd(h.lo, pcclMul(static_cast<W>(q - 1), -h.scale));
  }
  if (h.scale == W(0)) return h.lo;  // constant block: exact, sign of zero included
  return int8DecodeNormal(q, h.lo, h.scale);
}

// The block's decoding is the plain `lo + q * scale` (its loop can be vectorised).
template <typename W>
PCCL_HD bool int8IsNormal(const Int8Header<W>& h) {
  return !isNan(h.lo) && !signBit(h.scale) && h.scale != W(0);
}

// A header from the wire is usable when lo and scale are both NaN, or both finite.
template <typename W>
PCCL_HD bool int8HeaderValid(const Int8Header<W>& h) {
  return (isNan(h.lo) && isNan(h.scale)) || (isFinite(h.lo) && isFinite(h.scale));
}

}  // namespace pccl::kernels

#endif  // PCCL_KERNELS_QUANT_MATH_HPP_
