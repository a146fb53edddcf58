// The CPU loops of integer avg's partial sums. Compiled with -O3 (src/CMakeLists.txt); the wire is
// read and written through memcpy, so it may sit at any byte.
#include "codec/partial_sum.hpp"

#include <cstring>

#include "kernels/partial_sum.hpp"

namespace pccl::codec {

namespace {

using kernels::Partial;

template <typename S>
S loadSum(const uint8_t* p) {
  S s;
  std::memcpy(&s, p, sizeof s);  // U128 is {lo, hi}: the wire's order on a little-endian host
  return s;
}
template <typename S>
void storeSum(uint8_t* p, S s) {
  std::memcpy(p, &s, sizeof s);
}

template <typename T, typename S>
struct Loops {
  using P = Partial<T, S>;

  static void widen(const void* in_v, size_t n, uint8_t* wire) {
    const T* in = static_cast<const T*>(in_v);
    for (size_t i = 0; i < n; ++i) storeSum(wire + i * sizeof(S), P::widen(in[i]));
  }
  static void add(const uint8_t* wire, const void* in_v, size_t n, uint8_t* dst) {
    const T* in = static_cast<const T*>(in_v);
    for (size_t i = 0; i < n; ++i) storeSum(dst + i * sizeof(S), P::add(loadSum<S>(wire + i * sizeof(S)), in[i]));
  }
  static void finish(const uint8_t* wire, const void* in_v, size_t n, uint32_t peers, void* out_v) {
    const T* in = static_cast<const T*>(in_v);
    T* out = static_cast<T*>(out_v);
    for (size_t i = 0; i < n; ++i) out[i] = P::finish(loadSum<S>(wire + i * sizeof(S)), in[i], peers);
  }
};

// Calls fn(Loops<T, S>{}) for integer `dtype` and its sum type over `peers` (nothing for the others).
template <typename Fn>
void withLoops(DType t, uint32_t peers, Fn&& fn) {
  const auto go = [&](auto elem) {
    kernels::withSumType<decltype(elem)>(peers, [&](auto, auto sum) { fn(Loops<decltype(elem), decltype(sum)>{}); });
  };
  switch (t) {
    case DType::kInt8: return go(int8_t{});
    case DType::kUint8: return go(uint8_t{});
    case DType::kInt16: return go(int16_t{});
    case DType::kUint16: return go(uint16_t{});
    case DType::kInt32: return go(int32_t{});
    case DType::kUint32: return go(uint32_t{});
    case DType::kInt64: return go(int64_t{});
    case DType::kUint64: return go(uint64_t{});
    default: return;
  }
}

}  // namespace

size_t partialSumSize(DType dtype, uint32_t peers) {
  return kernels::partialSumBytes(static_cast<uint32_t>(dtypeSize(dtype)), peers);
}

void widenToPartials(DType dtype, uint32_t peers, const void* in, size_t count, uint8_t* wire) {
  if (count > 0) withLoops(dtype, peers, [&](auto loops) { loops.widen(in, count, wire); });
}

void addToPartials(DType dtype, uint32_t peers, const uint8_t* wire, const void* in, size_t count, uint8_t* dst) {
  if (count > 0) withLoops(dtype, peers, [&](auto loops) { loops.add(wire, in, count, dst); });
}

void finishPartials(DType dtype, uint32_t peers, const uint8_t* wire, const void* in, size_t count, void* out) {
  if (count > 0 && peers >= 1) withLoops(dtype, peers, [&](auto loops) { loops.finish(wire, in, count, peers, out); });
}

}  // namespace pccl::codec
