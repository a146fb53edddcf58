// The codec layer against scalar references: float16/bfloat16 conversion (round to nearest even,
// specials), and the reduce kernels for every dtype and op, including avg's final division.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/half.hpp"
#include "codec/reduce.hpp"

using namespace pccl::codec;
using pccl::kernels::bitsFloat;
using pccl::kernels::bf16ToFloat;
using pccl::kernels::floatToBf16;
using pccl::kernels::floatToHalf;
using pccl::kernels::halfToFloat;

TEST_CASE("codec: every float16 converts to float32 and back to the same bits") {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = halfToFloat(static_cast<uint16_t>(h));
    const bool nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0;
    if (nan) {
      CHECK(std::isnan(f));
      CHECK((floatToHalf(f) & 0x7c00) == 0x7c00);
      CHECK((floatToHalf(f) & 0x3ff) != 0);  // still NaN
    } else if (floatToHalf(f) != h) {
      FAIL("float16 bits " << h << " do not round-trip");
    }
  }
}

TEST_CASE("codec: float32 -> float16 rounds to nearest even and saturates to infinity") {
  CHECK(floatToHalf(1.0f) == 0x3c00);
  CHECK(floatToHalf(-2.0f) == 0xc000);
  CHECK(floatToHalf(65504.0f) == 0x7bff);
  CHECK(floatToHalf(65519.0f) == 0x7bff);
  CHECK(floatToHalf(65520.0f) == 0x7c00);  // the tie rounds up to infinity
  CHECK(floatToHalf(1e10f) == 0x7c00);
  CHECK(floatToHalf(-std::numeric_limits<float>::infinity()) == 0xfc00);
  CHECK(floatToHalf(-0.0f) == 0x8000);
  CHECK(floatToHalf(5.9604644775390625e-08f) == 0x0001);  // smallest subnormal
  CHECK(floatToHalf(2.98e-08f) == 0x0000);                 // below half of it
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even (1.0); 1 + 3*2^-11 rounds up.
  CHECK(floatToHalf(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);
  CHECK(floatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3c02);
  // Random floats: the result is the nearest half (checked against neighbours in float64).
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> d(-70000.0f, 70000.0f);
  for (int i = 0; i < 100000; ++i) {
    const float f = d(rng) * (i % 2 ? 1.0f : 1e-4f);
    const uint16_t h = floatToHalf(f);
    if ((h & 0x7c00) == 0x7c00) {
      CHECK(std::fabs(f) >= 65520.0f);
      continue;
    }
    const double err = std::fabs(static_cast<double>(halfToFloat(h)) - f);
    const double up = std::fabs(static_cast<double>(halfToFloat(static_cast<uint16_t>(h + 1))) - f);
    const double down = (h & 0x7fff) == 0 ? err : std::fabs(static_cast<double>(halfToFloat(static_cast<uint16_t>(h - 1))) - f);
    CHECK(err <= up);
    CHECK(err <= down);
  }
}

TEST_CASE("codec: bfloat16 keeps the float32 exponent and rounds the mantissa to nearest even") {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const float f = bf16ToFloat(static_cast<uint16_t>(b));
    if (std::isnan(f)) {
      CHECK(std::isnan(bf16ToFloat(floatToBf16(f))));
    } else if (floatToBf16(f) != b) {
      FAIL("bfloat16 bits " << b << " do not round-trip");
    }
  }
  CHECK(floatToBf16(1.0f) == 0x3f80);
  CHECK(floatToBf16(bitsFloat(0x3f808000u)) == 0x3f80);  // tie: even stays
  CHECK(floatToBf16(bitsFloat(0x3f818000u)) == 0x3f82);  // tie: odd rounds up
  CHECK(floatToBf16(bitsFloat(0x3f808001u)) == 0x3f81);
  CHECK(floatToBf16(std::numeric_limits<float>::infinity()) == 0x7f80);
  CHECK(std::isnan(bf16ToFloat(floatToBf16(std::numeric_limits<float>::quiet_NaN()))));
}

namespace {
template <typename T>
std::vector<T> reduced(RedOp op, DType t, std::vector<T> a, const std::vector<T>& b, uint32_t divisor) {
  reduceInto(t, op, a.data(), b.data(), a.size(), divisor);
  return a;
}
}  // namespace

TEST_CASE("codec: integer kernels wrap like two's complement and avg truncates toward zero") {
  std::vector<int8_t> a = {100, -100, 7, -7, 127, -128};
  std::vector<int8_t> b = {100, -100, 2, 2, 1, -1};
  CHECK(reduced(RedOp::kSum, DType::kInt8, a, b, 1) == std::vector<int8_t>{-56, 56, 9, -5, -128, 127});
  CHECK(reduced(RedOp::kProd, DType::kInt8, a, b, 1) == std::vector<int8_t>{16, 16, 14, -14, 127, -128});
  CHECK(reduced(RedOp::kMin, DType::kInt8, a, b, 1) == std::vector<int8_t>{100, -100, 2, -7, 1, -128});
  CHECK(reduced(RedOp::kMax, DType::kInt8, a, b, 1) == std::vector<int8_t>{100, -100, 7, 2, 127, -1});
  // avg over 2 peers: the wrapped int8 sum, divided in 64 bits.
  CHECK(reduced(RedOp::kAvg, DType::kInt8, a, b, 2) == std::vector<int8_t>{-28, 28, 4, -2, -64, 63});
  std::vector<uint16_t> ua = {65535, 3, 40000};
  std::vector<uint16_t> ub = {65535, 5, 40000};
  CHECK(reduced(RedOp::kProd, DType::kUint16, ua, ub, 1) == std::vector<uint16_t>{1, 15, 4096});  // 40000² mod 2^16
  CHECK(reduced(RedOp::kAvg, DType::kUint16, ua, ub, 3) == std::vector<uint16_t>{21844, 2, 4821});  // (80000 mod 2^16) / 3
  std::vector<int64_t> la = {std::numeric_limits<int64_t>::max(), -9};
  std::vector<int64_t> lb = {1, 2};
  CHECK(reduced(RedOp::kSum, DType::kInt64, la, lb, 1) ==
        std::vector<int64_t>{std::numeric_limits<int64_t>::min(), -7});
  CHECK(reduced(RedOp::kAvg, DType::kInt64, la, lb, 1024) == std::vector<int64_t>{-9007199254740992, 0});
}

TEST_CASE("codec: float16 and bfloat16 kernels combine in float32 and round once") {
  // 2048 + 1 is not representable in float16: the sum rounds to even (2048).
  std::vector<uint16_t> a = {floatToHalf(2048.0f), floatToHalf(1.5f), floatToHalf(-3.0f)};
  std::vector<uint16_t> b = {floatToHalf(1.0f), floatToHalf(0.25f), floatToHalf(1.0f)};
  auto s = reduced(RedOp::kSum, DType::kFloat16, a, b, 1);
  CHECK(halfToFloat(s[0]) == 2048.0f);
  CHECK(halfToFloat(s[1]) == 1.75f);
  CHECK(halfToFloat(s[2]) == -2.0f);
  auto avg = reduced(RedOp::kAvg, DType::kFloat16, a, b, 3);
  CHECK(avg[1] == floatToHalf(1.75f / 3));
  auto m = reduced(RedOp::kMax, DType::kBfloat16, std::vector<uint16_t>{floatToBf16(-1.0f)},
                   std::vector<uint16_t>{floatToBf16(-0.5f)}, 1);
  CHECK(bf16ToFloat(m[0]) == -0.5f);
}

TEST_CASE("codec: float32/float64 kernels match scalar arithmetic exactly") {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> d(-10, 10);
  std::vector<float> a(1031), b(1031);
  std::vector<double> x(1031), y(1031);
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<float>(d(rng));
    b[i] = static_cast<float>(d(rng));
    x[i] = d(rng);
    y[i] = d(rng);
  }
  auto s = reduced(RedOp::kSum, DType::kFloat32, a, b, 1);
  auto p = reduced(RedOp::kProd, DType::kFloat64, x, y, 1);
  auto v = reduced(RedOp::kAvg, DType::kFloat32, a, b, 7);
  for (size_t i = 0; i < a.size(); ++i) {
    CHECK(s[i] == a[i] + b[i]);
    CHECK(p[i] == x[i] * y[i]);
    CHECK(v[i] == (a[i] + b[i]) / 7.0f);
  }
  std::vector<float> one = {3.0f, 6.0f};
  divideInPlace(DType::kFloat32, one.data(), one.size(), 3);
  CHECK(one == std::vector<float>{1.0f, 2.0f});
}
