// CPU loops of the wire formats. Compiled with -O3 -ffp-contract=off (src/CMakeLists.txt): the
// per-element functions come from kernels/ and are the same ones the GPU kernels use.
#include "codec/quant.hpp"

#include <fmt/format.h>

#include <cstring>
#include <limits>
#include <type_traits>

#include "codec/fp4_simd.hpp"
#include "codec/reduce.hpp"
#include "codec/simd.hpp"
#include "kernels/elem.hpp"
#include "kernels/fp4_math.hpp"
#include "kernels/quant_math.hpp"

namespace pccl::codec {

namespace {

using kernels::bf16ToFloat;
using kernels::floatToBf16;
using kernels::floatToHalf;
using kernels::halfToFloat;
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

// ---- vector helpers -------------------------------------------------------------------------------

// Minimum, maximum and "saw a NaN" of a block x[0..n), n >= 1. Infinities reach lo/hi; a NaN may
// too (the caller redoes any block whose lo/hi is not finite element by element).
template <typename E, typename W = typename E::Wide>
void minMaxScalar(const typename E::Stored* x, size_t n, W* lo, W* hi, bool* nan) {
  W l = E::load(x[0]), h = l;
  bool bad = false;
  for (size_t i = 0; i < n; ++i) {
    const W v = E::load(x[i]);
    l = v < l ? v : l;
    h = v > h ? v : h;
    bad |= kernels::isNan(v);
  }
  *lo = l;
  *hi = h;
  *nan = bad;
}

#ifdef PCCL_X86
// float32, n >= 16: four independent SSE accumulators hide the latency of min/max; unordered
// compares catch NaN.
void minMaxSse(const float* x, size_t n, float* lo, float* hi, bool* nan) {
  __m128 l0 = _mm_loadu_ps(x), l1 = l0, l2 = l0, l3 = l0;
  __m128 h0 = l0, h1 = l0, h2 = l0, h3 = l0;
  __m128 bad = _mm_setzero_ps();
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m128 a = _mm_loadu_ps(x + i), b = _mm_loadu_ps(x + i + 4);
    const __m128 c = _mm_loadu_ps(x + i + 8), d = _mm_loadu_ps(x + i + 12);
    l0 = _mm_min_ps(l0, a);
    l1 = _mm_min_ps(l1, b);
    l2 = _mm_min_ps(l2, c);
    l3 = _mm_min_ps(l3, d);
    h0 = _mm_max_ps(h0, a);
    h1 = _mm_max_ps(h1, b);
    h2 = _mm_max_ps(h2, c);
    h3 = _mm_max_ps(h3, d);
    bad = _mm_or_ps(bad, _mm_or_ps(_mm_or_ps(_mm_cmpunord_ps(a, a), _mm_cmpunord_ps(b, b)),
                                   _mm_or_ps(_mm_cmpunord_ps(c, c), _mm_cmpunord_ps(d, d))));
  }
  alignas(16) float ls[4], hs[4];
  _mm_store_ps(ls, _mm_min_ps(_mm_min_ps(l0, l1), _mm_min_ps(l2, l3)));
  _mm_store_ps(hs, _mm_max_ps(_mm_max_ps(h0, h1), _mm_max_ps(h2, h3)));
  float l = ls[0], h = hs[0];
  bool any = _mm_movemask_ps(bad) != 0;
  for (int k = 1; k < 4; ++k) {
    l = ls[k] < l ? ls[k] : l;
    h = hs[k] > h ? hs[k] : h;
  }
  for (; i < n; ++i) {  // the tail
    l = x[i] < l ? x[i] : l;
    h = x[i] > h ? x[i] : h;
    any |= kernels::isNan(x[i]);
  }
  *lo = l;
  *hi = h;
  *nan = any;
}
#endif

template <typename E, typename W = typename E::Wide>
void minMax(const typename E::Stored* x, size_t n, W* lo, W* hi, bool* nan) {
#ifdef PCCL_X86
  if constexpr (std::is_same_v<E, kernels::Plain<float>>) {
    if (n >= 16) return minMaxSse(x, n, lo, hi, nan);
  }
#endif
  minMaxScalar<E>(x, n, lo, hi, nan);
}

#ifdef PCCL_X86
PCCL_TARGET_AVX2 void encodeNormalFloatAvx2(const float* x, size_t n, float lo, float inv, uint8_t* q) {
  for (size_t i = 0; i < n; ++i) q[i] = kernels::int8EncodeNormal(x[i], lo, inv);
}
PCCL_TARGET_AVX2 void floatToBf16Avx2(const float* src, uint16_t* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = floatToBf16(src[i]);
}
const bool kHasAvx2 = simd::hasAvx2();
#endif

// The code bytes of a normal int8 block (the hot loop of quantization). For float32 the AVX2 build of
// the same loop runs where the CPU has it: the same IEEE operations, so the same bytes.
template <typename E, typename W>
void encodeNormal(const typename E::Stored* x, size_t n, W lo, W inv, uint8_t* q) {
#ifdef PCCL_X86
  if constexpr (std::is_same_v<E, kernels::Plain<float>>) {
    if (kHasAvx2) return encodeNormalFloatAvx2(x, n, lo, inv, q);
  }
#endif
  for (size_t i = 0; i < n; ++i) q[i] = kernels::int8EncodeNormal(E::load(x[i]), lo, inv);
}

// float <-> float16 for n elements: F16C when the CPU has it (the same bits as the scalar code,
// NaN payloads included), else the scalar conversion.
#ifdef PCCL_X86
PCCL_TARGET_F16C void floatToHalfF16c(const float* src, uint16_t* dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) simd::HalfX8::store(dst + i, _mm256_loadu_ps(src + i));
  for (; i < n; ++i) dst[i] = floatToHalf(src[i]);
}
PCCL_TARGET_F16C void halfToFloatF16c(const uint16_t* src, float* dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, simd::HalfX8::load(src + i));
  for (; i < n; ++i) dst[i] = halfToFloat(src[i]);
}
const bool kHasF16c = simd::hasF16c();
#endif

void floatToHalfN(const float* src, uint16_t* dst, size_t n) {
#ifdef PCCL_X86
  if (kHasF16c) return floatToHalfF16c(src, dst, n);
#endif
  for (size_t i = 0; i < n; ++i) dst[i] = floatToHalf(src[i]);
}

void halfToFloatN(const uint16_t* src, float* dst, size_t n) {
#ifdef PCCL_X86
  if (kHasF16c) return halfToFloatF16c(src, dst, n);
#endif
  for (size_t i = 0; i < n; ++i) dst[i] = halfToFloat(src[i]);
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
    // Min, max and NaN in one fast pass; the rare block that holds an infinity (or a NaN that
    // reached lo/hi) is redone element by element below.
    W lo, hi;
    bool nan = false;
    minMax<E>(x, n, &lo, &hi, &nan);
    kernels::BlockStats<W> st;
    if (kernels::isFinite(lo) && kernels::isFinite(hi) && kernels::isFinite(kernels::pcclAdd(hi, -lo))) {
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
      encodeNormal<E>(x, n, h.lo, inv, q);
    } else {
      for (size_t i = 0; i < n; ++i) q[i] = kernels::int8Encode(E::load(x[i]), h, inv);
    }
  }
}

// fp4 (kernels/fp4_math.hpp): one scale per block of 64, then the codes, two per byte.
size_t fp4Blocks(size_t count) { return (count + kernels::kFp4Block - 1) / kernels::kFp4Block; }

template <typename W>
W readScale(const uint8_t* wire, size_t block) {
  W s;
  std::memcpy(&s, wire + block * sizeof(W), sizeof(W));
  return s;
}


template <typename E>
void encodeFp4(const void* src_v, size_t count, uint8_t* wire) {
  using W = typename E::Wide;
  const auto* src = static_cast<const typename E::Stored*>(src_v);
  const size_t nb = fp4Blocks(count);
  uint8_t* codes = wire + nb * sizeof(W);
  uint8_t q[kernels::kFp4Block];
  for (size_t b = 0; b < nb; ++b) {
#ifdef PCCL_X86
    if constexpr (std::is_same_v<E, kernels::Plain<float>>) {
      // Whole normal blocks fused (the same bits as below); a block that is not all finite comes here.
      const size_t whole = count / kernels::kFp4Block;
      if (kHasAvx2 && b < whole) {
        b += fp4EncodeBlocksAvx2(src + b * kernels::kFp4Block, whole - b, wire + b * sizeof(W),
                                 codes + b * (kernels::kFp4Block / 2));
        if (b == nb) break;
      }
    }
#endif
    const size_t first = b * kernels::kFp4Block;
    const size_t n = count - first < kernels::kFp4Block ? count - first : kernels::kFp4Block;
    const auto* x = src + first;
    // The largest |x| and "not finite" in one branch-free pass; a block that is not all finite is redone
    // element by element.
    W amax = W(0);
    bool odd = false;
#ifdef PCCL_X86
    constexpr bool kFloat = std::is_same_v<E, kernels::Plain<float>>;
    if constexpr (kFloat) {
      if (kHasAvx2) amax = fp4AmaxAvx2(x, n, &odd);
    }
    if (!kFloat || !kHasAvx2)
#endif
    for (size_t i = 0; i < n; ++i) {
      const W a = kernels::fp4Abs(static_cast<W>(E::load(x[i])));
      amax = a > amax ? a : amax;
      odd |= !(a <= std::numeric_limits<W>::max());  // NaN or infinite
    }
    W scale;
    if (!odd) {
      scale = amax / W(6);
    } else {
      kernels::Fp4Stats<W> st;
      for (size_t i = 0; i < n; ++i) st.add(E::load(x[i]));
      scale = kernels::fp4Scale(st);
    }
    std::memcpy(wire + b * sizeof(W), &scale, sizeof(W));
    const kernels::Fp4Thresholds<W> th(scale);
#ifdef PCCL_X86
    if constexpr (kFloat) {
      if (kHasAvx2 && !odd && n % 2 == 0) {
        fp4CodesAvx2(x, n, th, codes + first / 2);
        continue;
      }
    }
#endif
    if (!odd) {
      for (size_t i = 0; i < n; ++i) q[i] = kernels::fp4EncodeNormal(E::load(x[i]), th);
    } else {
      for (size_t i = 0; i < n; ++i) q[i] = kernels::fp4Encode(E::load(x[i]), scale, th);
    }
    if (n % 2 != 0) q[n] = 0;
    uint8_t* out = codes + first / 2;
    for (size_t i = 0; i < n; i += 2) out[i / 2] = static_cast<uint8_t>(q[i] | (q[i + 1] << 4));
  }
}

// kFp16: IEEE binary16, else bfloat16.
template <typename E, bool kFp16>
void encodeHalf(const void* src_v, size_t count, uint8_t* wire) {
  const auto* src = static_cast<const typename E::Stored*>(src_v);
  auto* out = reinterpret_cast<uint16_t*>(wire);
  if constexpr (std::is_same_v<E, kernels::Plain<float>>) {  // vector conversions where the CPU has them
    if constexpr (kFp16) return floatToHalfN(src, out, count);
#ifdef PCCL_X86
    if (kHasAvx2) return floatToBf16Avx2(src, out, count);
#endif
  }
  for (size_t i = 0; i < count; ++i) {
    const float v = static_cast<float>(E::load(src[i]));
    out[i] = kFp16 ? floatToHalf(v) : floatToBf16(v);
  }
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

// dst[k] := F(decoded, in[k]), stored as the element type.
template <typename E, typename F, typename W>
inline void put(typename E::Stored* dst, const typename E::Stored* in, size_t k, W decoded, W divisor) {
  W in_k = W(0);
  if constexpr (F::kUsesInput) in_k = E::load(in[k]);
  dst[k] = E::store(F::apply(decoded, in_k, divisor));
}

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
      for (size_t i = 0; i < n; ++i) put<E, F>(dst, in, first + i, kernels::int8DecodeNormal(q[i], lo, scale), d);
    } else {
      for (size_t i = 0; i < n; ++i) put<E, F>(dst, in, first + i, kernels::int8Decode(q[i], h), d);
    }
  }
}


template <typename E, typename F>
void decodeFp4(const uint8_t* wire, size_t count, const void* in_v, void* dst_v, uint32_t divisor) {
  using W = typename E::Wide;
  using S = typename E::Stored;
  const S* in = static_cast<const S*>(in_v);
  S* dst = static_cast<S*>(dst_v);
  const W d = static_cast<W>(divisor);
  const size_t nb = fp4Blocks(count);
  const uint8_t* codes = wire + nb * sizeof(W);
  W value[16];
  for (size_t b = 0; b < nb; ++b) {
    const size_t first = b * kernels::kFp4Block;
    const size_t n = count - first < kernels::kFp4Block ? count - first : kernels::kFp4Block;
    const W scale = readScale<W>(wire, b);
    // The block's 16 values, each as fp4Decode gives it; then a table lookup per element.
    for (uint8_t q = 0; q < 16; ++q) value[q] = kernels::fp4Decode(q, scale);
    const uint8_t* c = codes + first / 2;
    size_t done = 0;
#ifdef PCCL_X86
    if constexpr (std::is_same_v<E, kernels::Plain<float>> &&
                  (std::is_same_v<F, Replace> || std::is_same_v<F, Finish<kernels::Sum, false>>)) {
      if (kHasAvx2) {
        done = n / 8 * 8;
        fp4DecodeAvx2(c, done, value, F::kUsesInput ? in + first : nullptr, dst + first);
      }
    }
#endif
    for (size_t i = done; i + 1 < n; i += 2) {
      const uint8_t pair = c[i / 2];
      put<E, F>(dst, in, first + i, value[pair & 0x0f], d);
      put<E, F>(dst, in, first + i + 1, value[pair >> 4], d);
    }
    if (n % 2 != 0) put<E, F>(dst, in, first + n - 1, value[c[(n - 1) / 2] & 0x0f], d);
  }
}

// kFp16: IEEE binary16, else bfloat16. A tile at a time is widened to float (fp16: with the vector
// conversion), then combined in a loop the compiler vectorises.
template <typename E, typename F, bool kFp16>
void decodeHalf(const uint8_t* wire, size_t count, const void* in_v, void* dst_v, uint32_t divisor) {
  using W = typename E::Wide;
  using S = typename E::Stored;
  const S* in = static_cast<const S*>(in_v);
  S* dst = static_cast<S*>(dst_v);
  const W d = static_cast<W>(divisor);
  const auto* h = reinterpret_cast<const uint16_t*>(wire);
  constexpr size_t kTile = 1024;
  float wide[kTile];
  for (size_t first = 0; first < count; first += kTile) {
    const size_t n = count - first < kTile ? count - first : kTile;
    if constexpr (kFp16) {
      halfToFloatN(h + first, wide, n);
    } else {
      for (size_t i = 0; i < n; ++i) wide[i] = bf16ToFloat(h[first + i]);
    }
    for (size_t i = 0; i < n; ++i) put<E, F>(dst, in, first + i, static_cast<W>(wide[i]), d);
  }
}

template <typename E, typename F>
void decodeAs(Quant q, const uint8_t* wire, size_t count, const void* in, void* dst, uint32_t divisor) {
  switch (q) {
    case Quant::kInt8: return decodeInt8<E, F>(wire, count, in, dst, divisor);
    case Quant::kFp4: return decodeFp4<E, F>(wire, count, in, dst, divisor);
    case Quant::kFp16: return decodeHalf<E, F, true>(wire, count, in, dst, divisor);
    case Quant::kBf16: return decodeHalf<E, F, false>(wire, count, in, dst, divisor);
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
      case Quant::kFp4: return encodeFp4<E>(src, count, wire);
      case Quant::kFp16: return encodeHalf<E, true>(src, count, wire);
      case Quant::kBf16: return encodeHalf<E, false>(src, count, wire);
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
  const bool blocks = q == Quant::kInt8 || q == Quant::kFp4;  // any floating type
  if ((blocks && !wide && !half) || (!blocks && !wide)) {
    return Status::invalidArgument(fmt::format("quantization {} does not apply to {} data (fp16/bf16: float32 or "
                                               "float64; int8/fp4: any floating type)",
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
    case Quant::kFp4: return fp4Blocks(count) * (dtype == DType::kFloat64 ? 8 : 4) + (count + 1) / 2;
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
  if (q == Quant::kFp4) {
    const size_t nb = fp4Blocks(count);
    for (size_t b = 0; b < nb; ++b) {
      const bool ok = dtype == DType::kFloat64 ? kernels::fp4ScaleValid(readScale<double>(wire, b))
                                               : kernels::fp4ScaleValid(readScale<float>(wire, b));
      if (!ok) return Status::protocol(fmt::format("fp4 block {} of {} has an infinite scale", b, nb));
    }
    return Status::ok();
  }
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
