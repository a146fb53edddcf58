// The project's portability layer for code that runs on the CPU and inside GPU kernels alike.
// The same element functions compile with g++/clang++ (host), hipcc/clang -x hip (AMD) and nvcc
// (NVIDIA) without HIP's or CUDA's headers being needed on the host side.
//
//   PCCL_HD            qualifies a function for host and device (inline on a plain host build)
//   PCCL_DEVICE_PASS   defined while compiling device code
//   pcclMul/pcclAdd    one correctly rounded IEEE operation each, never fused into an FMA: the CPU
//                      and every GPU must round alike, or peers would not end bit-identical
#ifndef PCCL_KERNELS_PORTABLE_HPP_
#define PCCL_KERNELS_PORTABLE_HPP_

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__) || defined(__HIPCC__) || defined(__HIP__)
#define PCCL_GPU_COMPILER 1
#define PCCL_HD __host__ __device__ inline
#else
#define PCCL_HD inline
#endif

#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
#define PCCL_DEVICE_PASS 1
#endif

namespace pccl::kernels {

PCCL_HD uint32_t floatBits(float f) {
#ifdef PCCL_DEVICE_PASS
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

PCCL_HD float bitsFloat(uint32_t u) {
#ifdef PCCL_DEVICE_PASS
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

PCCL_HD uint64_t doubleBits(double d) {
#ifdef PCCL_DEVICE_PASS
  return static_cast<uint64_t>(__double_as_longlong(d));
#else
  uint64_t u;
  std::memcpy(&u, &d, sizeof u);
  return u;
#endif
}

// Unfused arithmetic. Host files that include this are compiled with -ffp-contract=off as well.
PCCL_HD float pcclMul(float a, float b) {
#ifdef PCCL_DEVICE_PASS
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
PCCL_HD float pcclAdd(float a, float b) {
#ifdef PCCL_DEVICE_PASS
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
PCCL_HD double pcclMul(double a, double b) {
#ifdef PCCL_DEVICE_PASS
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
PCCL_HD double pcclAdd(double a, double b) {
#ifdef PCCL_DEVICE_PASS
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}

// NaN and infinity tests by bit pattern: immune to -ffast-math style assumptions and identical everywhere.
PCCL_HD bool isNan(float f) { return (floatBits(f) & 0x7fffffffu) > 0x7f800000u; }
PCCL_HD bool isFinite(float f) { return (floatBits(f) & 0x7f800000u) != 0x7f800000u; }
PCCL_HD bool isNan(double d) { return (doubleBits(d) & 0x7fffffffffffffffull) > 0x7ff0000000000000ull; }
PCCL_HD bool isFinite(double d) { return (doubleBits(d) & 0x7ff0000000000000ull) != 0x7ff0000000000000ull; }

}  // namespace pccl::kernels

#endif  // PCCL_KERNELS_PORTABLE_HPP_
