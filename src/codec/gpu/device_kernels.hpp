// The GPU kernels of the codec: the same element math as the CPU loops (kernels/*.hpp,
// kernels/half.hpp, device_math.hpp), laid out for a GPU.
//   elementwise   grid-stride loop over one functor: reduce, uncompressed decode_reduce, the
//                 fp16/bf16 conversions, and integer avg's partial sums
//   elementwiseGroups  the same over groups of consecutive elements moved in 16-byte loads and
//                 stores (reduce, uncompressed decode_reduce, fp16/bf16 decode), when every pointer
//                 is 16-byte aligned
//   int8Encode    one thread block per int8 block of kInt8Block elements: each thread loads 16
//                 elements (four runs of four), a shared-memory reduction finds min/max/Inf/NaN,
//                 thread 0 writes the header, every thread writes its codes
//   int8Decode    one thread block per int8 block, four codes per thread and step (their elements
//                 read and written in one access where aligned)
// Element pointers must be aligned to their element size; the int8 wire may sit at any byte.
#ifndef PCCL_CODEC_GPU_DEVICE_KERNELS_HPP_
#define PCCL_CODEC_GPU_DEVICE_KERNELS_HPP_

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "codec/gpu/device_math.hpp"
#include "kernels/fp4_math.hpp"
#include "kernels/half.hpp"
#include "kernels/partial_sum.hpp"
#include "kernels/quant_math.hpp"

namespace pccl::gpu {

using kernels::BlockStats;
using kernels::Int8Header;
using kernels::kInt8Block;

inline constexpr int kThreads = 256;
inline constexpr int kRunsPerThread = static_cast<int>(kInt8Block) / 4 / kThreads;  // runs of 4 elements
static_assert(kRunsPerThread * 4 * kThreads == static_cast<int>(kInt8Block), "block shape");

// ---- wide accesses ----------------------------------------------------------------------------------

// G consecutive elements in registers, moved in one to four 16-byte accesses (8 or 4 bytes when the
// whole pack is that small). The address must be aligned to packAlign<T, G>().
template <typename T, int G>
struct Pack {
  T v[G];
};
template <typename T, int G>
__host__ __device__ constexpr size_t packAlign() {
  return sizeof(T) * G >= 16 ? 16 : sizeof(T) * G;
}
struct alignas(16) Bytes16 {
  uint32_t w[4];
};
struct alignas(8) Bytes8 {
  uint32_t w[2];
};
template <size_t A>
using Piece = std::conditional_t<A == 16, Bytes16, std::conditional_t<A == 8, Bytes8, uint32_t>>;

template <typename T, int G>
__device__ inline Pack<T, G> loadPack(const T* p) {
  using P = Piece<packAlign<T, G>()>;
  constexpr size_t kPieces = sizeof(T) * G / sizeof(P);
  static_assert(kPieces * sizeof(P) == sizeof(T) * G, "a pack is whole pieces");
  P raw[kPieces];
  for (size_t k = 0; k < kPieces; ++k) raw[k] = reinterpret_cast<const P*>(p)[k];
  Pack<T, G> r;
  memcpy(r.v, raw, sizeof r.v);
  return r;
}
template <typename T, int G>
__device__ inline void storePack(T* p, const Pack<T, G>& x) {
  using P = Piece<packAlign<T, G>()>;
  constexpr size_t kPieces = sizeof(T) * G / sizeof(P);
  P raw[kPieces];
  memcpy(raw, x.v, sizeof raw);
  for (size_t k = 0; k < kPieces; ++k) reinterpret_cast<P*>(p)[k] = raw[k];
}

// ---- elementwise ------------------------------------------------------------------------------------

template <typename Fn>
__global__ void __launch_bounds__(kThreads) elementwise(Fn fn, size_t n) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) fn(i);
}

// fn.group(g) for the n / Fn::kGroup whole groups, then fn(i) for the few elements left. The element
// math is fn(i)'s, so the bits are the same as elementwise's.
template <typename Fn>
__global__ void __launch_bounds__(kThreads) elementwiseGroups(Fn fn, size_t n) {
  const size_t groups = n / Fn::kGroup;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t first = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (size_t g = first; g < groups; g += stride) fn.group(g);
  const size_t tail = groups * Fn::kGroup + first;
  if (tail < n) fn(tail);
}

// out[i] := F(a[i], b[i]): reduce (out == a) and decode_reduce of uncompressed wire (a = wire).
template <typename E, typename F, typename D>
struct Combine {
  using S = typename E::Stored;
  S* out;
  const S* a;
  const S* b;
  D divisor;
  static constexpr int kGroup = static_cast<int>(16 / sizeof(S));
  __device__ void operator()(size_t i) const { out[i] = E::store(F::apply(E::load(a[i]), E::load(b[i]), divisor)); }
  __device__ void group(size_t g) const {
    const size_t i = g * kGroup;
    const Pack<S, kGroup> x = loadPack<S, kGroup>(a + i);
    const Pack<S, kGroup> y = loadPack<S, kGroup>(b + i);
    Pack<S, kGroup> r;
    for (int j = 0; j < kGroup; ++j) r.v[j] = E::store(F::apply(E::load(x.v[j]), E::load(y.v[j]), divisor));
    storePack(out + i, r);
  }
};

// wire[i] := fp16 or bf16 of src[i] (float32 data, or float64 rounded to float32 first).
template <typename E, bool kFp16>
struct EncodeHalf {
  using S = typename E::Stored;
  const S* src;
  uint16_t* wire;
  __device__ void operator()(size_t i) const {
    const float v = toFloat(E::load(src[i]));
    wire[i] = kFp16 ? kernels::floatToHalf(v) : kernels::floatToBf16(v);
  }
};

// dst[i] := F(decode(wire[i]), in[i]).
template <typename E, bool kFp16, typename F, typename D>
struct DecodeHalf {
  using S = typename E::Stored;
  using W = typename E::Wide;
  const uint16_t* wire;
  const S* in;
  S* dst;
  D divisor;
  static constexpr int kGroup = 8;  // 16 bytes of wire
  __device__ W element(uint16_t h, S input) const {
    const W decoded = widen<W>(kFp16 ? kernels::halfToFloat(h) : kernels::bf16ToFloat(h));
    W other = W(0);
    if constexpr (F::kUsesInput) other = E::load(input);
    return F::apply(decoded, other, divisor);
  }
  __device__ void operator()(size_t i) const {
    S input{};
    if constexpr (F::kUsesInput) input = in[i];
    dst[i] = E::store(element(wire[i], input));
  }
  __device__ void group(size_t g) const {
    const size_t i = g * kGroup;
    const Pack<uint16_t, kGroup> w = loadPack<uint16_t, kGroup>(wire + i);
    Pack<S, kGroup> x{};
    if constexpr (F::kUsesInput) x = loadPack<S, kGroup>(in + i);
    Pack<S, kGroup> r;
    for (int j = 0; j < kGroup; ++j) r.v[j] = E::store(element(w.v[j], x.v[j]));
    storePack(dst + i, r);
  }
};

// ---- integer avg's partial sums (kernels/partial_sum.hpp) ---------------------------------------------

// wire[i] := in[i] as a partial sum of type S.
template <typename T, typename S>
struct WidenPartials {
  using P = kernels::Partial<T, S>;
  const T* in;
  S* wire;
  __device__ void operator()(size_t i) const { wire[i] = P::widen(in[i]); }
};

// dst[i] := wire[i] + in[i] (dst may be wire).
template <typename T, typename S>
struct AddPartials {
  using P = kernels::Partial<T, S>;
  const S* wire;
  const T* in;
  S* dst;
  __device__ void operator()(size_t i) const { dst[i] = P::add(wire[i], in[i]); }
};

// out[i] := (wire[i] + in[i]) / peers, toward zero.
template <typename T, typename S>
struct FinishPartials {
  using P = kernels::Partial<T, S>;
  const S* wire;
  const T* in;
  T* out;
  uint32_t peers;
  __device__ void operator()(size_t i) const { out[i] = P::finish(wire[i], in[i], peers); }
};

// ---- int8 helpers -----------------------------------------------------------------------------------

// Header fields at any byte address (the wire is a byte stream).
template <typename W>
__device__ inline void storeField(uint8_t* p, W v) {
  if (reinterpret_cast<uintptr_t>(p) % sizeof(W) == 0) {
    *reinterpret_cast<W*>(p) = v;
    return;
  }
  uint64_t bits;
  if constexpr (sizeof(W) == 4) {
    bits = floatBits(v);
  } else {
    bits = doubleBits(v);
  }
  for (size_t k = 0; k < sizeof(W); ++k) p[k] = static_cast<uint8_t>(bits >> (8 * k));
}
template <typename W>
__device__ inline W loadField(const uint8_t* p) {
  if (reinterpret_cast<uintptr_t>(p) % sizeof(W) == 0) return *reinterpret_cast<const W*>(p);
  uint64_t bits = 0;
  for (size_t k = 0; k < sizeof(W); ++k) bits |= static_cast<uint64_t>(p[k]) << (8 * k);
  if constexpr (sizeof(W) == 4) {
    return bitsFloat(static_cast<uint32_t>(bits));
  } else {
    return bitsDouble(bits);
  }
}

// Four consecutive elements; one vector load when aligned.
template <typename S>
struct alignas(4 * sizeof(S)) Run4 {
  S v[4];
};
template <typename S>
__device__ inline Run4<S> loadRun(const S* p, int valid, bool aligned) {
  if (aligned && valid == 4) return *reinterpret_cast<const Run4<S>*>(p);
  Run4<S> r{};
  for (int j = 0; j < 4; ++j) {
    if (j < valid) r.v[j] = p[j];
  }
  return r;
}
__device__ inline void storeCodes(uint8_t* q, const uint8_t (&c)[4], int valid) {
  if (valid == 4 && reinterpret_cast<uintptr_t>(q) % 4 == 0) {
    *reinterpret_cast<uint32_t*>(q) = static_cast<uint32_t>(c[0]) | static_cast<uint32_t>(c[1]) << 8 |
                                      static_cast<uint32_t>(c[2]) << 16 | static_cast<uint32_t>(c[3]) << 24;
    return;
  }
  for (int j = 0; j < valid; ++j) q[j] = c[j];
}

// Which zero the CPU's min/max pass keeps when a block's minimum is 0 and both +0 and -0 occur (the
// header's lo carries that sign). Larger key wins; the element's sign is the key's low bit.
//   first-occurrence rule: the scalar loops (float16, bfloat16, float64, short blocks, blocks
//                          with an infinity): the first zero.
//   lane rule (x86 float32, n >= 16): codec/quant.cpp's SSE pass, four accumulators of four lanes
//                          over runs of 16, the last zero of a lane winning, accumulator 3 over 0,
//                          then lane 0 over 3, and the tail (first zero) only when no lane holds one.
__device__ inline uint32_t zeroKey(int i, int n, bool lane_rule) {
  const int main = lane_rule ? n - n % 16 : 0;
  if (i >= main) return static_cast<uint32_t>(n - i);  // first occurrence wins
  const uint32_t k = static_cast<uint32_t>(i & 3), j = static_cast<uint32_t>((i >> 2) & 3);
  const uint32_t t = static_cast<uint32_t>(i >> 4);
  // x[k] (i < 4) also seeds accumulators 1..3 of lane k, ahead of every element of those lanes.
  if (i < 4) return (1u << 29) | ((3u - k) << 26) | (3u << 24);
  return (1u << 29) | ((3u - k) << 26) | (j << 24) | (t + 1);
}

// ---- int8 encode ------------------------------------------------------------------------------------

template <typename E>
__global__ void __launch_bounds__(kThreads)
    int8Encode(const typename E::Stored* src, size_t count, uint8_t* wire, bool lane_rule) {
  using S = typename E::Stored;
  using W = typename E::Wide;
  __shared__ W s_lo[kThreads];
  __shared__ W s_hi[kThreads];
  __shared__ uint32_t s_bits[kThreads];
  __shared__ Int8Header<W> s_header;

  const int tid = static_cast<int>(threadIdx.x);
  const size_t block = blockIdx.x;
  const size_t first = block * kInt8Block;
  const int n = static_cast<int>(count - first < kInt8Block ? count - first : kInt8Block);
  const S* x = src + first;
  const bool aligned = reinterpret_cast<uintptr_t>(x) % sizeof(Run4<S>) == 0;

  // 1. Load this thread's elements (run r covers elements 4 * (tid + r * kThreads) + 0..3).
  W v[kRunsPerThread][4];
  BlockStats<W> st;
  for (int r = 0; r < kRunsPerThread; ++r) {
    const int base = 4 * (tid + r * kThreads);
    const int valid = n - base < 4 ? (n - base > 0 ? n - base : 0) : 4;
    const Run4<S> run = loadRun(x + base, valid, aligned);
    for (int j = 0; j < 4; ++j) {
      v[r][j] = E::load(run.v[j]);
      if (j < valid) st.add(v[r][j]);
    }
  }

  // 2. Block-wide min / max / Inf / NaN.
  s_lo[tid] = st.lo;
  s_hi[tid] = st.hi;
  s_bits[tid] = (st.inf ? 1u : 0u) | (st.nan ? 2u : 0u);
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (tid < half) {
      s_lo[tid] = s_lo[tid + half] < s_lo[tid] ? s_lo[tid + half] : s_lo[tid];
      s_hi[tid] = s_hi[tid + half] > s_hi[tid] ? s_hi[tid + half] : s_hi[tid];
      s_bits[tid] |= s_bits[tid + half];
    }
    __syncthreads();
  }
  BlockStats<W> all;
  all.lo = s_lo[0];
  all.hi = s_hi[0];
  all.inf = (s_bits[0] & 1u) != 0;
  all.nan = (s_bits[0] & 2u) != 0;
  __syncthreads();

  // 3. A zero minimum: pick the sign the CPU would have kept (rare; one more pass over registers).
  if (!all.nan && all.lo == W(0)) {
    const bool lanes = lane_rule && n >= 16 && !all.inf;
    uint32_t best = 0;
    for (int r = 0; r < kRunsPerThread; ++r) {
      for (int j = 0; j < 4; ++j) {
        const int i = 4 * (tid + r * kThreads) + j;
        if (i < n && v[r][j] == W(0)) {
          const uint32_t key = zeroKey(i, n, lanes) * 2u + (kernels::signBit(v[r][j]) ? 1u : 0u);
          best = key > best ? key : best;
        }
      }
    }
    s_bits[tid] = best;
    __syncthreads();
    for (int half = kThreads / 2; half > 0; half /= 2) {
      if (tid < half) s_bits[tid] = s_bits[tid + half] > s_bits[tid] ? s_bits[tid + half] : s_bits[tid];
      __syncthreads();
    }
    all.lo = (s_bits[0] & 1u) != 0 ? -W(0) : W(0);
    if (all.hi == W(0)) all.hi = all.lo;  // a constant zero block: the same element
  }

  // 4. Header, then codes.
  if (tid == 0) {
    s_header = kernels::int8Header(all);
    uint8_t* h = wire + block * 2 * sizeof(W);
    storeField(h, s_header.lo);
    storeField(h + sizeof(W), s_header.scale);
  }
  __syncthreads();
  const Int8Header<W> header = s_header;
  const W inv = kernels::int8Inverse(header);
  const bool normal = !isNan(header.lo) && !kernels::signBit(header.scale);
  const size_t blocks = (count + kInt8Block - 1) / kInt8Block;
  uint8_t* codes = wire + blocks * 2 * sizeof(W) + first;
  for (int r = 0; r < kRunsPerThread; ++r) {
    const int base = 4 * (tid + r * kThreads);
    if (base >= n) break;
    uint8_t c[4];
    for (int j = 0; j < 4; ++j) {
      c[j] = normal ? kernels::int8EncodeNormal(v[r][j], header.lo, inv) : kernels::int8Encode(v[r][j], header, inv);
    }
    storeCodes(codes + base, c, n - base < 4 ? n - base : 4);
  }
}

// ---- int8 decode (optionally combined with an input) ------------------------------------------------

template <typename E, typename F, typename D>
__global__ void __launch_bounds__(kThreads)
    int8Decode(const uint8_t* wire, size_t count, const typename E::Stored* in, typename E::Stored* dst, D divisor) {
  using W = typename E::Wide;
  const size_t block = blockIdx.x;
  const size_t first = block * kInt8Block;
  const int n = static_cast<int>(count - first < kInt8Block ? count - first : kInt8Block);
  const size_t blocks = (count + kInt8Block - 1) / kInt8Block;
  const uint8_t* h = wire + block * 2 * sizeof(W);
  const Int8Header<W> header{loadField<W>(h), loadField<W>(h + sizeof(W))};
  const bool normal = kernels::int8IsNormal(header);
  const uint8_t* codes = wire + blocks * 2 * sizeof(W) + first;
  const bool aligned = reinterpret_cast<uintptr_t>(codes) % 4 == 0;
  // Four elements in one access each way (the block's first element is a multiple of 4).
  using S = typename E::Stored;
  constexpr size_t kWide = packAlign<S, 4>();
  const bool wide = reinterpret_cast<uintptr_t>(dst) % kWide == 0 &&
                    (!F::kUsesInput || reinterpret_cast<uintptr_t>(in) % kWide == 0);
  for (int base = 4 * static_cast<int>(threadIdx.x); base < n; base += 4 * kThreads) {
    const int valid = n - base < 4 ? n - base : 4;
    uint8_t c[4] = {0, 0, 0, 0};
    if (aligned && valid == 4) {
      const uint32_t packed = *reinterpret_cast<const uint32_t*>(codes + base);
      for (int j = 0; j < 4; ++j) c[j] = static_cast<uint8_t>(packed >> (8 * j));
    } else {
      for (int j = 0; j < valid; ++j) c[j] = codes[base + j];
    }
    if (wide && valid == 4) {
      const size_t i0 = first + static_cast<size_t>(base);
      Pack<S, 4> x{};
      if constexpr (F::kUsesInput) x = loadPack<S, 4>(in + i0);
      Pack<S, 4> r;
      for (int j = 0; j < 4; ++j) {
        const W decoded =
            normal ? kernels::int8DecodeNormal(c[j], header.lo, header.scale) : kernels::int8Decode(c[j], header);
        W other = W(0);
        if constexpr (F::kUsesInput) other = E::load(x.v[j]);
        r.v[j] = E::store(F::apply(decoded, other, divisor));
      }
      storePack(dst + i0, r);
      continue;
    }
    for (int j = 0; j < valid; ++j) {
      const size_t i = first + static_cast<size_t>(base + j);
      const W decoded =
          normal ? kernels::int8DecodeNormal(c[j], header.lo, header.scale) : kernels::int8Decode(c[j], header);
      W other = W(0);
      if constexpr (F::kUsesInput) other = E::load(in[i]);
      dst[i] = E::store(F::apply(decoded, other, divisor));
    }
  }
}

// ---- fp4 (kernels/fp4_math.hpp) ------------------------------------------------------------------------

// One thread per block of kernels::kFp4Block elements: its scale (the same IEEE operations as the CPU
// codec's, so the same bytes), then its codes, two per byte.
template <typename E>
struct Fp4EncodeBlocks {
  using S = typename E::Stored;
  using W = typename E::Wide;
  const S* src;
  size_t count;
  uint8_t* wire;
  __device__ void operator()(size_t b) const {
    const size_t blocks = (count + kernels::kFp4Block - 1) / kernels::kFp4Block;
    const size_t first = b * kernels::kFp4Block;
    const size_t n = count - first < kernels::kFp4Block ? count - first : kernels::kFp4Block;
    kernels::Fp4Stats<W> st;
    for (size_t i = 0; i < n; ++i) st.add(E::load(src[first + i]));
    const W scale = kernels::fp4Scale(st);
    uint64_t bits;
    if constexpr (sizeof(W) == 4) {
      bits = kernels::floatBits(scale);
    } else {
      bits = kernels::doubleBits(scale);
    }
    for (size_t k = 0; k < sizeof(W); ++k) wire[b * sizeof(W) + k] = static_cast<uint8_t>(bits >> (8 * k));
    const kernels::Fp4Thresholds<W> th(scale);
    uint8_t* codes = wire + blocks * sizeof(W) + first / 2;
    for (size_t i = 0; i < n; i += 2) {
      const uint8_t lo = kernels::fp4Encode(E::load(src[first + i]), scale, th);
      const uint8_t hi = i + 1 < n ? kernels::fp4Encode(E::load(src[first + i + 1]), scale, th) : uint8_t{0};
      codes[i / 2] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
};

// dst[i] := F(decode(code i), in[i]).
template <typename E, typename F, typename D>
struct Fp4Decode {
  using S = typename E::Stored;
  using W = typename E::Wide;
  const uint8_t* wire;
  size_t count;
  const S* in;
  S* dst;
  D divisor;
  __device__ void operator()(size_t i) const {
    const size_t blocks = (count + kernels::kFp4Block - 1) / kernels::kFp4Block;
    const W scale = loadField<W>(wire + (i / kernels::kFp4Block) * sizeof(W));
    const W decoded = kernels::fp4Decode(kernels::fp4Code(wire + blocks * sizeof(W), i), scale);
    W other = W(0);
    if constexpr (F::kUsesInput) other = E::load(in[i]);
    dst[i] = E::store(F::apply(decoded, other, divisor));
  }
};

}  // namespace pccl::gpu

#endif  // PCCL_CODEC_GPU_DEVICE_KERNELS_HPP_
