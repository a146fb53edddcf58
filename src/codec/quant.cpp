// CPU loops of the wire formats. Compiled with -O3 -ffp-contract=off (src/CMakeLists.txt): the
// per-element functions come from kernels/ and are the same ones the GPU kernels use.
#include "codec/quant.hpp"

#include <fmt/format.h>

#include <cstring>
#include <type_traits>

#include "codec/reduce.hpp"
#include "kernels/elem.hpp"
#include "kernels/quant_math.hpp"

namespace pccl::codec {

namespace {

using kernels::Int8Header;
using kernels::kInt8Block;

size_t blocksOf(size_t count) { return (count + kInt8Block - 1) / kInt8Block; }

template <typename W>
Int8Header<W> readHeader(const uint8_t* wire, size_t block) {
  Int8Header<W> h;
  std::memcpy(&h.lo, wire + block * 2 * sizeof(W), sizeof(W));
  std::memcpy(&h.scale, wire + block * 2 * sizeof(W) + sizeof(W), sizeof(W));
  return h;
}

// ---- encode ------------------------------------------------------------------------------------

template <typename E>
void encodeInt8(const void* src_v, size_t count, uint8_t* wire) {
  using W = typename E::Wide;
  const auto* src = static_cast<const typename E::Stored*>(src_v);
  const size_t nb = blocksOf(count);
  uint8_t* codes = wire + nb * 2 * sizeof(W);
  for (size_t b = 0; b < nb; ++b) {
    const size_t first = b * kInt8Block;
    const size_t n = count - first < kInt8Block ? count - first : kInt8Block;
    const auto* x = src + first;
    // Min and max in a form the vectoriser takes (NaN never wins a comparison, so it is ignored
    // here); the rare block that holds a non-finite value is redone exactly below.
    W lo = E::load(x[0]), hi = lo;
    for (size_t i = 0; i < n; ++i) {
      const W v = E::load(x[i]);
      lo = v < lo ? v : lo;
      hi = v > hi ? v : hi;
    }
    kernels::BlockStats<W> st;
    if (kernels::isFinite(lo) && kernels::isFinite(hi) && kernels::isFinite(kernels::pcclAdd(hi, -lo))) {
      bool nan = false;
      for (size_t i = 0; i < n; ++i) nan |= kernels::isNan(E::load(x[i]));
      st.lo = lo;
      st.hi = hi;
      st.nan = nan;
    } else {
      for (size_t i = 0; i < n; ++i) st.add(E::load(x[i]));
    }
    const Int8Header<W> h = kernels::int8Header(st);
    std::memcpy(wire + b * 2 * sizeof(W), &h.lo, sizeof(W));
    std::memcpy(wire + b * 2 * sizeof(W) + sizeof(W), &h.scale, sizeof(W));
    const W inv = kernels::int8Inverse(h);
    uint8_t* q = codes + first;
    if (!kernels::isNan(h.lo) && !kernels::signBit(h.scale)) {
      const W lo_b = h.lo;
      for (size_t i = 0; i < n; ++i) q[i] = kernels::int8EncodeNormal(E::load(x[i]), lo_b, inv);
    } else {
      for (size_t i = 0; i < n; ++i) q[i] = kernels::int8Encode(E::load(x[i]), h, inv);
    }
  }
}

template <typename E, typename ToHalf>
void encodeHalf(const void* src_v, size_t count, uint8_t* wire, ToHalf to) {
  const auto* src = static_cast<const typename E::Stored*>(src_v);
  auto* out = reinterpret_cast<uint16_t*>(wire);
  for (size_t i = 0; i < count; ++i) out[i] = to(static_cast<float>(E::load(src[i])));
}

// ---- decode (optionally combined with the input) ------------------------------------------------

// The final step of one element: combine with the input and divide (avg's last hop).
template <typename Op, bool kDivide>
struct Finish {
  static constexpr bool kUsesInput = true;
  template <typename W>
  static W apply(W decoded, W in, W divisor) {
    W r = Op::apply(decoded, in);
    if constexpr (kDivide) r = r / divisor;
    return r;
  }
};
struct Replace {  // plain decode
  static constexpr bool kUsesInput = false;
  template <typename W>
  static W apply(W decoded, W, W) {
    return decoded;
  }
};

template <typename E, typename F>
void decodeInt8(const uint8_t* wire, size_t count, const void* in_v, void* dst_v, uint32_t divisor) {
  using W = typename E::Wide;
  using S = typename E::Stored;
  const S* in = static_cast<const S*>(in_v);
  S* dst = static_cast<S*>(dst_v);
  const W d = static_cast<W>(divisor);
  const size_t nb = blocksOf(count);
  const uint8_t* codes = wire + nb * 2 * sizeof(W);
  for (size_t b = 0; b < nb; ++b) {
    const size_t first = b * kInt8Block;
    const size_t n = count - first < kInt8Block ? count - first : kInt8Block;
    const Int8Header<W> h = readHeader<W>(wire, b);
    const uint8_t* q = codes + first;
    if (kernels::int8IsNormal(h)) {
      const W lo = h.lo, scale = h.scale;
      for (size_t i = 0; i < n; ++i) {
        W in_i = W(0);
        if constexpr (F::kUsesInput) in_i = E::load(in[first + i]);
        dst[first + i] = E::store(F::apply(kernels::int8DecodeNormal(q[i], lo, scale), in_i, d));
      }
    } else {
      for (size_t i = 0; i < n; ++i) {
        W in_i = W(0);
        if constexpr (F::kUsesInput) in_i = E::load(in[first + i]);
        dst[first + i] = E::store(F::apply(kernels::int8Decode(q[i], h), in_i, d));
      }
    }
  }
}

template <typename E, typename F, typename FromHalf>
void decodeHalf(const uint8_t* wire, size_t count, const void* in_v, void* dst_v, uint32_t divisor, FromHalf from) {
  using W = typename E::Wide;
  using S = typename E::Stored;
  const S* in = static_cast<const S*>(in_v);
  S* dst = static_cast<S*>(dst_v);
  const W d = static_cast<W>(divisor);
  const auto* h = reinterpret_cast<const uint16_t*>(wire);
  for (size_t i = 0; i < count; ++i) {
    W in_i = W(0);
    if constexpr (F::kUsesInput) in_i = E::load(in[i]);
    dst[i] = E::store(F::apply(static_cast<W>(from(h[i])), in_i, d));
  }
}

template <typename E, typename F>
void decodeAs(Quant q, const uint8_t* wire, size_t count, const void* in, void* dst, uint32_t divisor) {
  switch (q) {
    case Quant::kInt8: return decodeInt8<E, F>(wire, count, in, dst, divisor);
    case Quant::kFp16: return decodeHalf<E, F>(wire, count, in, dst, divisor, halfToFloat);
    case Quant::kBf16: return decodeHalf<E, F>(wire, count, in, dst, divisor, bf16ToFloat);
    case Quant::kNone: break;
  }
}

template <typename E>
void decodeWithOp(Quant q, RedOp op, const uint8_t* wire, size_t count, const void* in, void* dst,
                  uint32_t divisor) {
  using kernels::Max;
  using kernels::Min;
  using kernels::Sum;
  if (in == nullptr) return decodeAs<E, Replace>(q, wire, count, in, dst, divisor);
  switch (op) {
    case RedOp::kSum: return decodeAs<E, Finish<Sum, false>>(q, wire, count, in, dst, divisor);
    case RedOp::kAvg:
      if (divisor > 1) return decodeAs<E, Finish<Sum, true>>(q, wire, count, in, dst, divisor);
      return decodeAs<E, Finish<Sum, false>>(q, wire, count, in, dst, divisor);
    case RedOp::kMin: return decodeAs<E, Finish<Min, false>>(q, wire, count, in, dst, divisor);
    case RedOp::kMax: return decodeAs<E, Finish<Max, false>>(q, wire, count, in, dst, divisor);
    case RedOp::kProd: break;  // refused by checkQuant
  }
}

// Calls F::run<Element>(args...) for the floating dtypes (the only ones quantized).
template <typename F, typename... Args>
void withFloat(DType t, Args&&... args) {
  switch (t) {
    case DType::kFloat16: return F::template run<kernels::Half>(args...);
    case DType::kBfloat16: return F::template run<kernels::Bf16>(args...);
    case DType::kFloat32: return F::template run<kernels::Plain<float>>(args...);
    case DType::kFloat64: return F::template run<kernels::Plain<double>>(args...);
    default: return;
  }
}

struct EncodeF {
  template <typename E>
  static void run(Quant q, const void* src, size_t count, uint8_t* wire) {
    switch (q) {
      case Quant::kInt8: return encodeInt8<E>(src, count, wire);
      case Quant::kFp16: return encodeHalf<E>(src, count, wire, floatToHalf);
      case Quant::kBf16: return encodeHalf<E>(src, count, wire, floatToBf16);
      case Quant::kNone: return;
    }
  }
};
struct DecodeF {
  template <typename E>
  static void run(Quant q, RedOp op, const uint8_t* wire, size_t count, const void* in, void* dst, uint32_t divisor) {
    decodeWithOp<E>(q, op, wire, count, in, dst, divisor);
  }
};

size_t headerBytes(DType t) { return t == DType::kFloat64 ? 16 : 8; }

}  // namespace

Status checkQuant(Quant q, DType dtype, RedOp op) {
  if (q == Quant::kNone) return Status::ok();
  const bool wide = dtype == DType::kFloat32 || dtype == DType::kFloat64;
  const bool half = dtype == DType::kFloat16 || dtype == DType::kBfloat16;
  if ((q == Quant::kInt8 && !wide && !half) || (q != Quant::kInt8 && !wide)) {
    return Status::invalidArgument(fmt::format("quantization {} does not apply to {} data (fp16/bf16: float32 or "
                                               "float64; int8: any floating type)",
                                               quantName(q), dtypeName(dtype)));
  }
  if (op == RedOp::kProd) {
    return Status::invalidArgument(
        fmt::format("quantization {} supports sum, avg, min and max, not prod", quantName(q)));
  }
  return Status::ok();
}

size_t wireBytes(Quant q, DType dtype, size_t count) {
  switch (q) {
    case Quant::kNone: return count * dtypeSize(dtype);
    case Quant::kFp16:
    case Quant::kBf16: return count * 2;
    case Quant::kInt8: return blocksOf(count) * headerBytes(dtype) + count;
  }
  return 0;
}

void encode(Quant q, DType dtype, const void* src, size_t count, uint8_t* wire) {
  if (count == 0) return;
  if (q == Quant::kNone) {
    std::memcpy(wire, src, count * dtypeSize(dtype));
    return;
  }
  withFloat<EncodeF>(dtype, q, src, count, wire);
}

Status validateWire(Quant q, DType dtype, const uint8_t* wire, size_t count) {
  if (q != Quant::kInt8) return Status::ok();  // every bit pattern of the other formats is a value
  const size_t nb = blocksOf(count);
  for (size_t b = 0; b < nb; ++b) {
    const bool ok = dtype == DType::kFloat64 ? kernels::int8HeaderValid(readHeader<double>(wire, b))
                                             : kernels::int8HeaderValid(readHeader<float>(wire, b));
    if (!ok) {
      return Status::protocol(fmt::format("int8 block {} of {} has a bad scale/offset (lo and scale must both be "
                                          "finite or both NaN)",
                                          b, nb));
    }
  }
  return Status::ok();
}

void decode(Quant q, DType dtype, const uint8_t* wire, size_t count, void* dst) {
  if (count == 0) return;
  if (q == Quant::kNone) {
    std::memcpy(dst, wire, count * dtypeSize(dtype));
    return;
  }
  withFloat<DecodeF>(dtype, q, RedOp::kSum, wire, count, nullptr, dst, 1u);
}

void decodeReduce(Quant q, DType dtype, RedOp op, const uint8_t* wire, size_t count, const void* in, void* dst,
                  uint32_t divisor) {
  if (count == 0) return;
  if (q == Quant::kNone) {
    std::memcpy(dst, wire, count * dtypeSize(dtype));
    reduceInto(dtype, op, dst, in, count, divisor);
    return;
  }
  withFloat<DecodeF>(dtype, q, op, wire, count, in, dst, divisor);
}

}  // namespace pccl::codec
