// Compiled with -O3 (see src/CMakeLists.txt): the loops below are simple enough for the compiler to
// vectorise; no intrinsics are needed for the lossless kernels.
#include "codec/reduce.hpp"

#include <type_traits>

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

template <typename E, typename Op>
void combine(void* acc_v, const void* in_v, size_t n) {
  using S = typename E::Stored;
  S* __restrict acc = static_cast<S*>(acc_v);
  const S* __restrict in = static_cast<const S*>(in_v);
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
