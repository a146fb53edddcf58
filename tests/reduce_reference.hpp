// Test-side model of an all-reduce: typed element access for every dtype, deterministic inputs, and a
// float64 / modular-integer reference with the tolerance the ring's rounding allows.
#ifndef PCCL_TESTS_REDUCE_REFERENCE_HPP_
#define PCCL_TESTS_REDUCE_REFERENCE_HPP_

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/half.hpp"
#include "pccl/types.hpp"

namespace pccl::test {

inline size_t sizeOf(DataType t) {
  static constexpr size_t kSizes[] = {1, 1, 2, 2, 4, 4, 8, 8, 2, 2, 4, 8};
  return kSizes[static_cast<int>(t)];
}
inline bool isFloat(DataType t) { return t >= DataType::kFloat16; }
inline bool isSigned(DataType t) {
  return t == DataType::kInt8 || t == DataType::kInt16 || t == DataType::kInt32 || t == DataType::kInt64;
}
// Unit round-off of the float types.
inline double roundoff(DataType t) {
  switch (t) {
    case DataType::kFloat16: return std::ldexp(1.0, -11);
    case DataType::kBfloat16: return std::ldexp(1.0, -8);
    case DataType::kFloat32: return std::ldexp(1.0, -24);
    default: return std::ldexp(1.0, -53);
  }
}
inline const char* typeName(DataType t) {
  static constexpr const char* kNames[] = {"int8",   "uint8",  "int16",   "uint16",   "int32",   "uint32",
                                           "int64",  "uint64", "float16", "bfloat16", "float32", "float64"};
  return kNames[static_cast<int>(t)];
}
inline const char* opName(RedOp op) {
  static constexpr const char* kNames[] = {"sum", "avg", "prod", "min", "max"};
  return kNames[static_cast<int>(op)];
}

// Raw bits of element k, sign-extended for signed integers.
inline uint64_t loadBits(DataType t, const void* buf, size_t k) {
  const auto* p = static_cast<const uint8_t*>(buf) + k * sizeOf(t);
  uint64_t u = 0;
  std::memcpy(&u, p, sizeOf(t));
  if (isSigned(t) && sizeOf(t) < 8) {
    const unsigned shift = static_cast<unsigned>(64 - 8 * sizeOf(t));
    u = static_cast<uint64_t>(static_cast<int64_t>(u << shift) >> shift);
  }
  return u;
}
inline void storeBits(DataType t, void* buf, size_t k, uint64_t u) {
  std::memcpy(static_cast<uint8_t*>(buf) + k * sizeOf(t), &u, sizeOf(t));
}
inline double loadFloat(DataType t, const void* buf, size_t k) {
  const auto* p = static_cast<const uint8_t*>(buf) + k * sizeOf(t);
  uint16_t h;
  float f;
  double d;
  switch (t) {
    case DataType::kFloat16: std::memcpy(&h, p, 2); return kernels::halfToFloat(h);
    case DataType::kBfloat16: std::memcpy(&h, p, 2); return kernels::bf16ToFloat(h);
    case DataType::kFloat32: std::memcpy(&f, p, 4); return f;
    default: std::memcpy(&d, p, 8); return d;
  }
}
inline void storeFloat(DataType t, void* buf, size_t k, double v) {
  auto* p = static_cast<uint8_t*>(buf) + k * sizeOf(t);
  uint16_t h;
  float f = static_cast<float>(v);
  switch (t) {
    case DataType::kFloat16: h = kernels::floatToHalf(f); std::memcpy(p, &h, 2); return;
    case DataType::kBfloat16: h = kernels::floatToBf16(f); std::memcpy(p, &h, 2); return;
    case DataType::kFloat32: std::memcpy(p, &f, 4); return;
    default: std::memcpy(p, &v, 8); return;
  }
}

// Every dtype and every operator of the C API, for the sweeps.
inline constexpr DataType kAllTypes[] = {DataType::kInt8,    DataType::kUint8,    DataType::kInt16,   DataType::kUint16,
                                         DataType::kInt32,   DataType::kUint32,   DataType::kInt64,   DataType::kUint64,
                                         DataType::kFloat16, DataType::kBfloat16, DataType::kFloat32, DataType::kFloat64};
inline constexpr RedOp kAllOps[] = {RedOp::kSum, RedOp::kAvg, RedOp::kProd, RedOp::kMin, RedOp::kMax};

// Deterministic input of `rank` for (dtype, op): small integers, floats in [-1, 1] (prod: [0.5, 1.5]).
inline std::vector<uint8_t> makeInput(DataType t, RedOp op, size_t count, uint32_t rank, uint64_t seed) {
  std::vector<uint8_t> buf(count * sizeOf(t));
  std::mt19937_64 rng(seed * 7919 + rank * 104729 + static_cast<uint64_t>(t) * 31 + static_cast<uint64_t>(op));
  for (size_t k = 0; k < count; ++k) {
    if (isFloat(t)) {
      std::uniform_real_distribution<double> d(op == RedOp::kProd ? 0.5 : -1.0, op == RedOp::kProd ? 1.5 : 1.0);
      storeFloat(t, buf.data(), k, d(rng));
    } else {
      std::uniform_int_distribution<int> d(isSigned(t) ? -100 : 0, 100);
      storeBits(t, buf.data(), k, static_cast<uint64_t>(static_cast<int64_t>(d(rng))));
    }
  }
  return buf;
}

__extension__ typedef __int128 Int128;  // the test's exact arithmetic (every sum of 64-bit values fits)

// Element k of the inputs as an exact integer.
inline Int128 exactValue(DataType t, const std::vector<uint8_t>& buf, size_t k) {
  const uint64_t bits = loadBits(t, buf.data(), k);
  return isSigned(t) ? static_cast<Int128>(static_cast<int64_t>(bits)) : static_cast<Int128>(bits);
}

// Integer avg: the exact sum over the peers divided by their number, rounded toward zero (the ring's
// partial sums never wrap), as the element's bits.
inline uint64_t exactAverage(DataType t, const std::vector<std::vector<uint8_t>>& inputs, size_t k) {
  Int128 sum = 0;
  for (const auto& in : inputs) sum += exactValue(t, in, k);
  return static_cast<uint64_t>(sum / static_cast<Int128>(inputs.size()));  // C++ division truncates toward zero
}

// Rank `rank`'s input for integer avg at the edges: element k follows pattern k % 8, so that every
// element is an extreme of the dtype, a mix of extremes, or a case where rounding matters.
inline std::vector<uint8_t> integerEdgeInput(DataType t, uint32_t rank, size_t count) {
  const unsigned bits = static_cast<unsigned>(8 * sizeOf(t));
  const Int128 lo = isSigned(t) ? -(Int128{1} << (bits - 1)) : 0;
  const Int128 hi = isSigned(t) ? (Int128{1} << (bits - 1)) - 1 : (Int128{1} << bits) - 1;
  const Int128 r = rank;
  std::vector<uint8_t> buf(count * sizeOf(t));
  for (size_t k = 0; k < count; ++k) {
    const Int128 patterns[8] = {hi, lo, rank % 2 == 0 ? hi : lo, rank == 0 ? lo : hi, rank == 0 ? hi : lo,
                                hi - r, lo + r, rank == 0 ? (isSigned(t) ? Int128{-1} : Int128{1}) : Int128{0}};
    storeBits(t, buf.data(), k, static_cast<uint64_t>(patterns[k % 8]));
  }
  return buf;
}

// Number of elements of `got` that are not what the ring must produce from `inputs`.
inline size_t countWrong(DataType t, RedOp op, const std::vector<std::vector<uint8_t>>& inputs,
                         const std::vector<uint8_t>& got, size_t count, std::string* first_error) {
  const size_t n = inputs.size();
  size_t wrong = 0;
  for (size_t k = 0; k < count; ++k) {
    bool ok = true;
    std::string detail;
    if (isFloat(t)) {
      double ref = loadFloat(t, inputs[0].data(), k), mag = std::fabs(ref);
      for (size_t r = 1; r < n; ++r) {
        const double v = loadFloat(t, inputs[r].data(), k);
        mag += std::fabs(v);
        switch (op) {
          case RedOp::kSum: case RedOp::kAvg: ref += v; break;
          case RedOp::kProd: ref *= v; break;
          case RedOp::kMin: ref = std::min(ref, v); break;
          case RedOp::kMax: ref = std::max(ref, v); break;
        }
      }
      if (op == RedOp::kAvg) {
        ref /= static_cast<double>(n);
        mag /= static_cast<double>(n);
      }
      if (op == RedOp::kProd) mag = std::fabs(ref) * 4;
      const double tol = (op == RedOp::kMin || op == RedOp::kMax) ? 0 : (n + 2) * roundoff(t) * mag + 1e-300;
      const double v = loadFloat(t, got.data(), k);
      ok = std::fabs(v - ref) <= tol;
      if (!ok) detail = "element " + std::to_string(k) + ": got " + std::to_string(v) + ", want " + std::to_string(ref);
    } else {
      const unsigned bits = static_cast<unsigned>(8 * sizeOf(t));
      const uint64_t mask = bits == 64 ? ~0ull : ((1ull << bits) - 1);
      uint64_t acc = loadBits(t, inputs[0].data(), k);
      for (size_t r = 1; r < n; ++r) {
        const uint64_t v = loadBits(t, inputs[r].data(), k);
        switch (op) {
          case RedOp::kSum: case RedOp::kAvg: acc += v; break;
          case RedOp::kProd: acc *= v; break;
          case RedOp::kMin:
            acc = isSigned(t) ? (static_cast<int64_t>(v) < static_cast<int64_t>(acc) ? v : acc) : std::min(acc, v);
            break;
          case RedOp::kMax:
            acc = isSigned(t) ? (static_cast<int64_t>(v) > static_cast<int64_t>(acc) ? v : acc) : std::max(acc, v);
            break;
        }
      }
      acc &= mask;
      if (op == RedOp::kAvg) acc = exactAverage(t, inputs, k) & mask;
      const uint64_t v = loadBits(t, got.data(), k) & mask;
      ok = v == acc;
      if (!ok) detail = "element " + std::to_string(k) + ": got " + std::to_string(v) + ", want " + std::to_string(acc);
    }
    if (!ok && wrong++ == 0 && first_error != nullptr) *first_error = detail;
  }
  return wrong;
}

}  // namespace pccl::test

#endif  // PCCL_TESTS_REDUCE_REFERENCE_HPP_
