// The float16/bfloat16 reductions of codec/reduce.cpp against the scalar definition of kernels/elem.hpp,
// bit for bit. Where the CPU has AVX2 and F16C, reduceInto runs vectors of 16 elements (the tail
// through a padded copy); they must round, and treat NaN payloads, infinities, subnormals and signed
// zeros, exactly as one element at a time. The one freedom: NaN (sum/avg/prod) NaN may keep either
// operand's payload, since C++ lets the compiler commute a + b and x86 keeps the first operand's (the
// scalar loop itself differs there between its vectorised body and its remainder). (Without
// AVX2/F16C both sides are the scalar loop and the test still holds.)
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "codec/reduce.hpp"
#include "kernels/elem.hpp"

using namespace pccl;
using namespace pccl::codec;

namespace {

constexpr RedOp kOps[] = {RedOp::kSum, RedOp::kAvg, RedOp::kProd, RedOp::kMin, RedOp::kMax};
constexpr uint32_t kDivisors[] = {1, 3};

// The scalar definition: widen, combine in float, divide on avg's last hop, round once.
template <typename E>
uint16_t reference(RedOp op, uint16_t acc, uint16_t in, uint32_t divisor) {
  const float a = E::load(acc), b = E::load(in);
  switch (op) {
    case RedOp::kSum: return E::store(kernels::Sum::apply(a, b));
    case RedOp::kAvg:
      if (divisor > 1) return E::store(kernels::Sum::apply(a, b) / static_cast<float>(divisor));
      return E::store(kernels::Sum::apply(a, b));
    case RedOp::kProd: return E::store(kernels::Prod::apply(a, b));
    case RedOp::kMin: return E::store(kernels::Min::apply(a, b));
    case RedOp::kMax: return E::store(kernels::Max::apply(a, b));
  }
  return 0;
}

struct Format {
  DType dtype;
  const char* name;
  std::vector<uint16_t> specials;  // zeros, subnormals, normals, ties, extremes, infinities, NaNs
};

std::vector<Format> formats() {
  return {
      {DType::kFloat16, "float16",
       {0x0000, 0x8000, 0x0001, 0x8001, 0x0200, 0x03ff, 0x83ff, 0x0400, 0x1400, 0x3c00, 0xbc00, 0x3c01, 0x3e00,
        0x4000, 0x6800, 0x7bff, 0xfbff, 0x7c00, 0xfc00, 0x7e00, 0xfe00, 0x7d55, 0xfc01, 0x7fff}},
      {DType::kBfloat16, "bfloat16",
       {0x0000, 0x8000, 0x0001, 0x8001, 0x0040, 0x007f, 0x807f, 0x0080, 0x3b80, 0x3f80, 0xbf80, 0x3f81, 0x3fc0,
        0x4000, 0x4b00, 0x7f7f, 0xff7f, 0x7f80, 0xff80, 0x7fc0, 0xffc0, 0x7f95, 0xff81, 0x7fff}},
  };
}

// Specials plus random patterns: the values every bit pattern is combined with.
std::vector<uint16_t> partners(const Format& f) {
  std::vector<uint16_t> v = f.specials;
  std::mt19937 rng(7);
  for (int i = 0; i < 12; ++i) v.push_back(static_cast<uint16_t>(rng()));
  return v;
}

std::string hex(uint16_t x) {
  char s[8];
  std::snprintf(s, sizeof s, "0x%04x", x);
  return s;
}

// Is `got` right for acc (op) in? The reference's bits, or, where both are NaN under an arithmetic
// operator, either operand's NaN as the element type stores it (quieted, payload kept).
template <typename E>
bool matches(RedOp op, uint16_t acc, uint16_t in, uint16_t got, uint16_t want) {
  if (got == want) return true;
  const bool arithmetic = op == RedOp::kSum || op == RedOp::kAvg || op == RedOp::kProd;
  const float a = E::load(acc), b = E::load(in);
  if (!arithmetic || !kernels::isNan(a) || !kernels::isNan(b)) return false;
  return got == E::store(a) || got == E::store(b);
}

// Runs reduceInto on acc[0..n) and in[0..n) and names the first element the reference does not
// allow ("" if none).
template <typename E>
std::string firstMismatch(DType t, RedOp op, uint32_t divisor, uint16_t* acc, const uint16_t* in, size_t n) {
  const std::vector<uint16_t> before(acc, acc + n);
  reduceInto(t, op, acc, in, n, divisor);
  for (size_t i = 0; i < n; ++i) {
    const uint16_t want = reference<E>(op, before[i], in[i], divisor);
    if (!matches<E>(op, before[i], in[i], acc[i], want)) {
      return "element " + std::to_string(i) + " of " + std::to_string(n) + ": " + hex(before[i]) + " op " + hex(in[i]) +
             " gave " + hex(acc[i]) + ", want " + hex(want);
    }
  }
  return "";
}

template <typename E>
void allPatterns(const Format& f) {
  const std::vector<uint16_t> others = partners(f);
  const size_t k_count = others.size();
  std::vector<uint16_t> patterns(65536), mixed(65536), acc(65536);
  for (size_t i = 0; i < patterns.size(); ++i) patterns[i] = static_cast<uint16_t>(i);
  for (const RedOp op : kOps) {
    for (const uint32_t divisor : kDivisors) {
      // Shift k: pattern i meets others[(i + k) % k_count], so every pattern meets every partner.
      for (size_t k = 0; k < k_count; ++k) {
        for (size_t i = 0; i < mixed.size(); ++i) mixed[i] = others[(i + k) % k_count];
        INFO(f.name << " op " << static_cast<int>(op) << " divisor " << divisor << " shift " << k);
        acc = patterns;
        REQUIRE(firstMismatch<E>(f.dtype, op, divisor, acc.data(), mixed.data(), acc.size()) == "");
        acc = mixed;  // and the other way round: every pattern as the input
        REQUIRE(firstMismatch<E>(f.dtype, op, divisor, acc.data(), patterns.data(), acc.size()) == "");
      }
    }
  }
}

template <typename E>
void oddLengths(const Format& f) {
  std::mt19937 rng(11);
  for (const size_t n : {size_t{1}, size_t{7}, size_t{255}, size_t{1000}, size_t{4099}}) {
    for (const size_t acc_off : {size_t{0}, size_t{1}, size_t{3}}) {
      for (const size_t in_off : {size_t{0}, size_t{5}}) {
        std::vector<uint16_t> acc(n + acc_off + 1), in(n + in_off);
        for (auto& x : acc) x = static_cast<uint16_t>(rng());
        for (auto& x : in) x = static_cast<uint16_t>(rng());
        const uint16_t guard = acc.back();
        for (const RedOp op : kOps) {
          for (const uint32_t divisor : kDivisors) {
            INFO(f.name << " n " << n << " offsets " << acc_off << "/" << in_off << " op " << static_cast<int>(op)
                        << " divisor " << divisor);
            REQUIRE(firstMismatch<E>(f.dtype, op, divisor, acc.data() + acc_off, in.data() + in_off, n) == "");
            REQUIRE(acc.back() == guard);  // nothing written past the end
          }
        }
      }
    }
  }
}

}  // namespace

TEST_CASE("reduce simd: every float16/bfloat16 pattern as acc and as input, every op, bit-identical to scalar",
          "[reduce]") {
  const std::vector<Format> fs = formats();
  allPatterns<kernels::Half>(fs[0]);
  allPatterns<kernels::Bf16>(fs[1]);
}

TEST_CASE("reduce simd: lengths 1/7/255/1000/4099 at unaligned offsets match scalar and stop at the end",
          "[reduce]") {
  const std::vector<Format> fs = formats();
  oddLengths<kernels::Half>(fs[0]);
  oddLengths<kernels::Bf16>(fs[1]);
}
