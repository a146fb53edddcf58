// float16 (IEEE binary16) and bfloat16 <-> float32, round to nearest even. Branch-light scalar code
// that compilers vectorise; host and device (kernels/portable.hpp).
//   - +-Inf stays +-Inf, +-0 keeps its sign.
//   - NaN stays NaN, quieted, with as much of its payload as fits: the same bits as the x86 F16C
//     instructions and GPU conversions, so every implementation decodes a byte the same way.
//   - float16: values of magnitude >= 65520 become Inf; subnormals are produced and read exactly.
#ifndef PCCL_KERNELS_HALF_HPP_
#define PCCL_KERNELS_HALF_HPP_

#include <cstdint>

#include "kernels/portable.hpp"

namespace pccl::kernels {

PCCL_HD uint16_t floatToHalf(float f) {
  uint32_t x = floatBits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u) return static_cast<uint16_t>(sign | (x > 0x7f800000u ? 0x7e00u | ((x >> 13) & 0x3ffu) : 0x7c00u));
  if (x >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds past 65504: Inf
  if (x < 0x38800000u) {
    // Below 2^-14 the result is subnormal: adding 0.5 puts the binary point where the half's
    // ulp (2^-24) is the float's, and the FPU rounds to nearest even for us.
    const uint32_t t = floatBits(bitsFloat(x) + 0.5f) - 0x3f000000u;
    return static_cast<uint16_t>(sign | t);
  }
  // Rebias the exponent (127 -> 15) and round the 13 dropped mantissa bits to nearest even.
  x += 0xc8000fffu + ((x >> 13) & 1u);
  return static_cast<uint16_t>(sign | (x >> 13));
}

PCCL_HD float halfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t em = h & 0x7fffu;
  if (em > 0x7c00u) return bitsFloat(sign | 0x7fc00000u | ((em & 0x3ffu) << 13));  // NaN, quieted
  if (em == 0x7c00u) return bitsFloat(sign | 0x7f800000u);
  if (em >= 0x0400u) return bitsFloat(sign | ((em << 13) + 0x38000000u));
  return bitsFloat(sign | floatBits(static_cast<float>(em) * 5.9604644775390625e-08f));  // em * 2^-24
}

PCCL_HD uint16_t floatToBf16(float f) {
  const uint32_t x = floatBits(f);
  const uint32_t nan = (x >> 16) | 0x40u;  // quiet NaN, payload truncated
  const uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  return static_cast<uint16_t>((x & 0x7fffffffu) > 0x7f800000u ? nan : rounded);  // a select, no branch
}

PCCL_HD float bf16ToFloat(uint16_t b) { return bitsFloat(static_cast<uint32_t>(b) << 16); }

}  // namespace pccl::kernels

#endif  // PCCL_KERNELS_HALF_HPP_
