// Element operators for the GPU kernels that give the exact bits of the CPU codec, NaNs included.
//
// The arithmetic itself is kernels/elem.hpp's (pcclAdd/pcclMul: one IEEE operation each, never
// fused); what differs between a CPU and a GPU is the NaN an operation returns. NVIDIA GPUs return
// one canonical NaN; the CPU returns an operand's NaN (quieted, payload kept) or its own "default
// NaN" for Inf - Inf and 0 * Inf. cpuNan() rewrites a NaN result into what the host CPU returns:
//   x86-64    one NaN operand: that operand, quieted; two: the first; none: 0xffc00000 (negative)
//   AArch64   a signalling NaN operand first, then as x86; none: 0x7fc00000 (FPCR.DN = 0, Linux)
// Where both operands are NaN, the CPU's scalar loops keep whichever operand the compiler happened to
// put first, so only "the result is NaN" is guaranteed there (docs/gpu.md).
// float <-> double conversions of a NaN are spelled out for the same reason.
#ifndef PCCL_CODEC_GPU_DEVICE_MATH_HPP_
#define PCCL_CODEC_GPU_DEVICE_MATH_HPP_

#include <cstdint>
#include <type_traits>

#include "codec/gpu/gpu_runtime.hpp"  // first: __host__ / __device__ for kernels/portable.hpp
#include "kernels/elem.hpp"

namespace pccl::gpu {

using kernels::bitsFloat;
using kernels::doubleBits;
using kernels::floatBits;
using kernels::isNan;

__device__ inline double bitsDouble(uint64_t u) { return __longlong_as_double(static_cast<long long>(u)); }

template <typename W>
__device__ inline W quietNan(W v) {
  if constexpr (sizeof(W) == 4) {
    return bitsFloat(floatBits(v) | 0x00400000u);
  } else {
    return bitsDouble(doubleBits(v) | 0x0008000000000000ull);
  }
}

template <typename W>
__device__ inline bool isSignalingNan(W v) {
  if constexpr (sizeof(W) == 4) {
    return isNan(v) && (floatBits(v) & 0x00400000u) == 0;
  } else {
    return isNan(v) && (doubleBits(v) & 0x0008000000000000ull) == 0;
  }
}

template <typename W>
__device__ inline W defaultNan() {
#if defined(__aarch64__)
  constexpr bool kNegative = false;
#else
  constexpr bool kNegative = true;
#endif
  if constexpr (sizeof(W) == 4) {
    return bitsFloat(0x7fc00000u | (kNegative ? 0x80000000u : 0u));
  } else {
    return bitsDouble(0x7ff8000000000000ull | (kNegative ? 0x8000000000000000ull : 0ull));
  }
}

// r = a (op) b as the host CPU would have returned it.
template <typename W>
__device__ inline W cpuNan(W r, W a, W b) {
  if (!isNan(r)) return r;
#if defined(__aarch64__)
  if (isSignalingNan(a)) return quietNan(a);
  if (isSignalingNan(b)) return quietNan(b);
#endif
  if (isNan(a)) return quietNan(a);
  if (isNan(b)) return quietNan(b);
  return defaultNan<W>();
}

// double -> float (round to nearest); a NaN keeps its sign and the top of its payload, quieted.
__device__ inline float toFloat(float f) { return f; }
__device__ inline float toFloat(double d) {
  if (!isNan(d)) return static_cast<float>(d);
  const uint64_t u = doubleBits(d);
  const uint32_t sign = static_cast<uint32_t>(u >> 32) & 0x80000000u;
  return bitsFloat(sign | 0x7fc00000u | static_cast<uint32_t>((u >> 29) & 0x003fffffu));
}

// float -> W (exact); a NaN keeps its sign and payload, quieted.
template <typename W>
__device__ inline W widen(float f) {
  if constexpr (sizeof(W) == 4) {
    return f;
  } else {
    if (!isNan(f)) return static_cast<double>(f);
    const uint32_t u = floatBits(f);
    const uint64_t sign = static_cast<uint64_t>(u & 0x80000000u) << 32;
    return bitsDouble(sign | 0x7ff8000000000000ull | (static_cast<uint64_t>(u & 0x003fffffu) << 29));
  }
}

// The reduction operators of kernels/elem.hpp with the CPU's NaNs. Min and Max are selects (no
// arithmetic), so they are used as they are.
struct DevSum {
  template <typename W>
  __device__ static W apply(W a, W b) {
    if constexpr (std::is_integral_v<W>) {
      return kernels::Sum::apply(a, b);
    } else {
      return cpuNan(kernels::Sum::apply(a, b), a, b);
    }
  }
};
struct DevProd {
  template <typename W>
  __device__ static W apply(W a, W b) {
    if constexpr (std::is_integral_v<W>) {
      return kernels::Prod::apply(a, b);
    } else {
      return cpuNan(kernels::Prod::apply(a, b), a, b);
    }
  }
};

// avg's division, as codec/reduce.cpp does it: floats divide in their arithmetic type (correctly
// rounded: the build asks for IEEE division); integers divide the wrapped sum in 64 bits of their
// own signedness (D), truncating toward zero.
template <typename W, typename D>
__device__ inline W divideBy(W v, D d) {
  if constexpr (std::is_integral_v<W>) {
    return static_cast<W>(static_cast<D>(v) / d);
  } else {
    return cpuNan(v / d, v, d);
  }
}

// The last step of one element (F in the kernels): `a` is the decoded or accumulated value, `b` the
// other input; D is avg's divisor type.
template <typename Op>
struct Apply {
  static constexpr bool kUsesInput = true;
  template <typename W, typename D>
  __device__ static W apply(W a, W b, D) {
    return Op::apply(a, b);
  }
};
struct SumDivide {  // avg's last hop
  static constexpr bool kUsesInput = true;
  template <typename W, typename D>
  __device__ static W apply(W a, W b, D d) {
    return divideBy(DevSum::apply(a, b), d);
  }
};
struct Replace {  // plain decode: no input
  static constexpr bool kUsesInput = false;
  template <typename W, typename D>
  __device__ static W apply(W a, W, D) {
    return a;
  }
};

}  // namespace pccl::gpu

#endif  // PCCL_CODEC_GPU_DEVICE_MATH_HPP_
