// Compiled with -O3 -ffp-contract=off (see src/CMakeLists.txt): the loops below are simple enough for
// the compiler to vectorise, except float16/bfloat16, whose conversions it cannot: those run sixteen
// elements at a time through codec/simd.hpp where the CPU has AVX2 and F16C, with the same bits as the
// scalar loop (which CPUs without take), NaN + NaN aside (see reduceVector).
#include "codec/reduce.hpp"

#include <cstring>
#include <type_traits>

#include "codec/simd.hpp"
#include "kernels/elem.hpp"

namespace pccl::codec {

namespace {

using kernels::Bf16;
using kernels::Half;
using kernels::Max;
using kernels::Min;
using kernels::Plain;
using kernels::Prod;
using kernels::Sum;

#ifdef PCCL_X86
// The operators of kernels/elem.hpp on eight floats: the same IEEE operation with the operands in the
// same order. x86 min/max return their second operand when either is NaN or both are zero, so
// min(b, a) is `b < a ? b : a` (kernels::Min) and max(b, a) is `a < b ? b : a` (kernels::Max).
template <typename Op>
struct Vec;
template <>
struct Vec<Sum> {
  PCCL_TARGET_AVX2 static __m256 apply(__m256 a, __m256 b) { return _mm256_add_ps(a, b); }
};
template <>
struct Vec<Prod> {
  PCCL_TARGET_AVX2 static __m256 apply(__m256 a, __m256 b) { return _mm256_mul_ps(a, b); }
};
template <>
struct Vec<Min> {
  PCCL_TARGET_AVX2 static __m256 apply(__m256 a, __m256 b) { return _mm256_min_ps(b, a); }
};
template <>
struct Vec<Max> {
  PCCL_TARGET_AVX2 static __m256 apply(__m256 a, __m256 b) { return _mm256_max_ps(b, a); }
};

// acc[i] = narrow(widen(acc[i]) (op) widen(in[i]) [/ divisor]) for i < n, n a multiple of 16.
template <typename Lanes, typename Op, bool kDivide>
PCCL_TARGET_AVX2_F16C void combineLanes(uint16_t* __restrict acc, const uint16_t* __restrict in, size_t n,
                                        float divisor) {
  const __m256 d = _mm256_set1_ps(divisor);
  for (size_t i = 0; i < n; i += 16) {
    const simd::F32x16 x = Lanes::load(acc + i), y = Lanes::load(in + i);
    simd::F32x16 r = {Vec<Op>::apply(x.a, y.a), Vec<Op>::apply(x.b, y.b)};
    if constexpr (kDivide) r = {_mm256_div_ps(r.a, d), _mm256_div_ps(r.b, d)};
    Lanes::store(acc + i, r);
  }
}
#endif

// float16/bfloat16 where the CPU has AVX2 and F16C: every element through combineLanes, the tail of
// fewer than 16 through a zero-padded copy. Returns false (nothing done) elsewhere.
// Where both operands are NaN, sum/prod keep acc's payload (x86 returns the first operand) for every
// element; the scalar loop keeps whichever operand the compiler put first, which may differ from one
// loop (and one element position) to the next.
template <typename E, typename Op, bool kDivide>
bool reduceVector([[maybe_unused]] typename E::Stored* acc, [[maybe_unused]] const typename E::Stored* in,
                  [[maybe_unused]] size_t n, [[maybe_unused]] float divisor) {
#ifdef PCCL_X86
  if constexpr (std::is_same_v<E, Half> || std::is_same_v<E, Bf16>) {
    if (!simd::hasAvx2() || !simd::hasF16c()) return false;
    using Lanes = std::conditional_t<std::is_same_v<E, Half>, simd::HalfX16, simd::Bf16X16>;
    const size_t whole = n - n % 16;
    combineLanes<Lanes, Op, kDivide>(acc, in, whole, divisor);
    if (whole < n) {
      uint16_t a[16] = {}, b[16] = {};
      std::memcpy(a, acc + whole, (n - whole) * sizeof(uint16_t));
      std::memcpy(b, in + whole, (n - whole) * sizeof(uint16_t));
      combineLanes<Lanes, Op, kDivide>(a, b, 16, divisor);
      std::memcpy(acc + whole, a, (n - whole) * sizeof(uint16_t));
    }
    return true;
  }
#endif
  return false;
}

template <typename E, typename Op>
void combine(void* acc_v, const void* in_v, size_t n) {
  using S = typename E::Stored;
  S* __restrict acc = static_cast<S*>(acc_v);
  const S* __restrict in = static_cast<const S*>(in_v);
  if (reduceVector<E, Op, false>(acc, in, n, 1.0f)) return;
  for (size_t i = 0; i < n; ++i) acc[i] = E::store(Op::apply(E::load(acc[i]), E::load(in[i])));
}

// The last hop of avg: sum, then divide, then narrow once.
template <typename E, typename Signed>
void sumDivide(void* acc_v, const void* in_v, size_t n, uint32_t divisor) {
  using S = typename E::Stored;
  using W = typename E::Wide;
  S* __restrict acc = static_cast<S*>(acc_v);
  const S* __restrict in = static_cast<const S*>(in_v);
  if constexpr (std::is_floating_point_v<W>) {
    const W d = static_cast<W>(divisor);
    if (reduceVector<E, Sum, true>(acc, in, n, static_cast<float>(d))) return;
    for (size_t i = 0; i < n; ++i) acc[i] = E::store((E::load(acc[i]) + E::load(in[i])) / d);
  } else {
    const Signed d = static_cast<Signed>(divisor);
    for (size_t i = 0; i < n; ++i) {
      const W sum = Sum::apply(E::load(acc[i]), E::load(in[i]));
      acc[i] = E::store(static_cast<W>(static_cast<Signed>(sum) / d));
    }
  }
}

template <typename E, typename Signed>
void divide(void* acc_v, size_t n, uint32_t divisor) {
  using S = typename E::Stored;
  using W = typename E::Wide;
  S* acc = static_cast<S*>(acc_v);
  if constexpr (std::is_floating_point_v<W>) {
    const W d = static_cast<W>(divisor);
    for (size_t i = 0; i < n; ++i) acc[i] = E::store(E::load(acc[i]) / d);
  } else {
    const Signed d = static_cast<Signed>(divisor);
    for (size_t i = 0; i < n; ++i) acc[i] = E::store(static_cast<W>(static_cast<Signed>(E::load(acc[i])) / d));
  }
}

template <typename E, typename Signed>
void dispatchOp(RedOp op, void* acc, const void* in, size_t n, uint32_t divisor) {
  switch (op) {
    case RedOp::kSum: return combine<E, Sum>(acc, in, n);
    case RedOp::kAvg:
      if (divisor > 1) return sumDivide<E, Signed>(acc, in, n, divisor);
      return combine<E, Sum>(acc, in, n);
    case RedOp::kProd: return combine<E, Prod>(acc, in, n);
    case RedOp::kMin: return combine<E, Min>(acc, in, n);
    case RedOp::kMax: return combine<E, Max>(acc, in, n);
  }
}

// Calls F::template run<Element, Div>(args...) for the dtype. Div is the type avg divides in: 64-bit
// of the element's signedness for integers (so any world size fits), the arithmetic type for floats.
template <typename F, typename... Args>
void withDType(DType t, Args&&... args) {
  switch (t) {
    case DType::kInt8: return F::template run<Plain<int8_t>, int64_t>(args...);
    case DType::kUint8: return F::template run<Plain<uint8_t>, uint64_t>(args...);
    case DType::kInt16: return F::template run<Plain<int16_t>, int64_t>(args...);
    case DType::kUint16: return F::template run<Plain<uint16_t>, uint64_t>(args...);
    case DType::kInt32: return F::template run<Plain<int32_t>, int64_t>(args...);
    case DType::kUint32: return F::template run<Plain<uint32_t>, uint64_t>(args...);
    case DType::kInt64: return F::template run<Plain<int64_t>, int64_t>(args...);
    case DType::kUint64: return F::template run<Plain<uint64_t>, uint64_t>(args...);
    case DType::kFloat16: return F::template run<Half, float>(args...);
    case DType::kBfloat16: return F::template run<Bf16, float>(args...);
    case DType::kFloat32: return F::template run<Plain<float>, float>(args...);
    case DType::kFloat64: return F::template run<Plain<double>, double>(args...);
  }
}

struct ReduceF {
  template <typename E, typename Signed>
  static void run(RedOp op, void* acc, const void* in, size_t n, uint32_t divisor) {
    dispatchOp<E, Signed>(op, acc, in, n, divisor);
  }
};
struct DivideF {
  template <typename E, typename Signed>
  static void run(void* acc, size_t n, uint32_t divisor) {
    divide<E, Signed>(acc, n, divisor);
  }
};

}  // namespace

void reduceInto(DType dtype, RedOp op, void* acc, const void* in, size_t count, uint32_t divisor) {
  if (count == 0) return;
  withDType<ReduceF>(dtype, op, acc, in, count, divisor);
}

void divideInPlace(DType dtype, void* acc, size_t count, uint32_t divisor) {
  if (count == 0 || divisor <= 1) return;
  withDType<DivideF>(dtype, acc, count, divisor);
}

}  // namespace pccl::codec
