// Integer avg's exact partial sums, shared by the CPU loops (codec/partial_sum.cpp) and the GPU
// kernels: on the ring's reduce-scatter an integer element of b bits travels as a sum of W bits that no
// run can overflow, each hop adds its input to it, and the chunk's owner divides once by the number of
// peers N, rounding toward zero (C's integer division), into the element type (docs/algorithms.md §4).
// W is the smallest of 16, 32, 64 and 128 with W >= 2b and N <= 2^(W - b) (partialSumBytes()): twice the
// element for every realistic N (int8 up to 256 peers, int16 up to 65536), wider only beyond. Sums are
// two's complement for signed elements; a 128-bit sum is held as two 64-bit words (low, high). The
// arithmetic is unsigned (it wraps), so a corrupted sum received from a peer gives a wrong value, never
// undefined behaviour.
#ifndef PCCL_KERNELS_PARTIAL_SUM_HPP_
#define PCCL_KERNELS_PARTIAL_SUM_HPP_

#include <cstdint>
#include <type_traits>

#include "kernels/portable.hpp"

namespace pccl::kernels {

struct U128 {
  uint64_t lo = 0;
  uint64_t hi = 0;
};

PCCL_HD U128 add128(U128 a, U128 b) {
  U128 r;
  r.lo = a.lo + b.lo;
  r.hi = a.hi + b.hi + (r.lo < a.lo ? 1u : 0u);
  return r;
}

PCCL_HD U128 negate128(U128 a) {  // two's complement
  U128 r;
  r.lo = ~a.lo + 1u;
  r.hi = ~a.hi + (r.lo == 0 ? 1u : 0u);
  return r;
}

// a / d (unsigned, d >= 1) in 32-bit limbs, so every step divides a 64-bit value by 32 bits.
PCCL_HD U128 divide128(U128 a, uint32_t d) {
  const uint64_t limbs[4] = {a.hi >> 32, a.hi & 0xffffffffu, a.lo >> 32, a.lo & 0xffffffffu};
  uint64_t q[4] = {0, 0, 0, 0};
  uint64_t rem = 0;
  for (int i = 0; i < 4; ++i) {
    const uint64_t cur = (rem << 32) | limbs[i];  // rem < d < 2^32: no bit is lost
    q[i] = cur / d;
    rem = cur % d;
  }
  U128 r;
  r.hi = (q[0] << 32) | q[1];
  r.lo = (q[2] << 32) | q[3];
  return r;
}

// Bytes of one partial sum of an integer element of `elem_bytes` bytes over `peers` peers.
PCCL_HD constexpr uint32_t partialSumBytes(uint32_t elem_bytes, uint32_t peers) {
  if (elem_bytes >= 8) return 16;
  if (elem_bytes == 4) return 8;                                          // N <= 2^32
  if (elem_bytes == 2) return peers <= (1u << 16) ? 4 : 8;                // N <= 2^16, else 2^48
  return peers <= (1u << 8) ? 2 : (peers <= (1u << 24) ? 4 : 8);           // N <= 2^8, 2^24, 2^56
}

// Partial<T, S>: the partial sums of element type T held in the unsigned type S (uint16_t, uint32_t,
// uint64_t or U128). widen() starts one, add() is one hop, finish() is the owner's last hop:
// (sum + x) / n, toward zero, in T.
template <typename T, typename S>
struct Partial {
  static_assert(std::is_integral_v<T> && std::is_unsigned_v<S> && sizeof(S) >= 2 * sizeof(T) && sizeof(S) <= 8,
                "an integer element in an unsigned sum at least twice as wide");
  using Sum = S;
  static PCCL_HD Sum widen(T x) {
    if constexpr (std::is_signed_v<T>) {
      return static_cast<S>(static_cast<std::make_signed_t<S>>(x));  // sign-extended
    } else {
      return static_cast<S>(x);
    }
  }
  static PCCL_HD Sum add(Sum s, T x) { return static_cast<S>(s + widen(x)); }
  static PCCL_HD T finish(Sum s, T x, uint32_t n) {
    const S total = add(s, x);
    if constexpr (std::is_signed_v<T>) {
      const auto v = static_cast<int64_t>(static_cast<std::make_signed_t<S>>(total));  // sign-extended
      return static_cast<T>(v / static_cast<int64_t>(n));
    } else {
      return static_cast<T>(static_cast<uint64_t>(total) / n);
    }
  }
};

template <typename T>
struct Partial<T, U128> {  // 64-bit T
  static_assert(std::is_integral_v<T> && sizeof(T) == 8, "64-bit elements in a 128-bit sum");
  using Sum = U128;
  static PCCL_HD Sum widen(T x) {
    U128 r;
    r.lo = static_cast<uint64_t>(x);
    if constexpr (std::is_signed_v<T>) r.hi = x < 0 ? ~uint64_t{0} : 0;
    return r;
  }
  static PCCL_HD Sum add(Sum s, T x) { return add128(s, widen(x)); }
  static PCCL_HD T finish(Sum s, T x, uint32_t n) {
    const U128 total = add(s, x);
    if constexpr (std::is_signed_v<T>) {
      const bool negative = (total.hi >> 63) != 0;
      const U128 q = divide128(negative ? negate128(total) : total, n);  // |total| / n, then the sign
      return static_cast<T>((negative ? negate128(q) : q).lo);
    } else {
      return static_cast<T>(divide128(total, n).lo);
    }
  }
};

// Calls fn(T{}, S{}) with the sum type S of element type T over `peers` peers (host code).
template <typename T, typename Fn>
auto withSumType(uint32_t peers, Fn&& fn) {
  if constexpr (sizeof(T) == 8) {
    return fn(T{}, U128{});
  } else if constexpr (sizeof(T) == 4) {
    return fn(T{}, uint64_t{});
  } else if constexpr (sizeof(T) == 2) {
    if (partialSumBytes(2, peers) == 4) return fn(T{}, uint32_t{});
    return fn(T{}, uint64_t{});
  } else {
    const uint32_t bytes = partialSumBytes(1, peers);
    if (bytes == 2) return fn(T{}, uint16_t{});
    if (bytes == 4) return fn(T{}, uint32_t{});
    return fn(T{}, uint64_t{});
  }
}

}  // namespace pccl::kernels

#endif  // PCCL_KERNELS_PARTIAL_SUM_HPP_
