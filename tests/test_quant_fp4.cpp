// fp4 on the wire (kernels/fp4_math.hpp, codec/quant): e2m1 codes with a scale per block of 64
// elements. Exact where the format can hold a value, the documented bound everywhere else (half the
// widest gap between two levels: one scale, amax / 6; docs/algorithms.md §7, "fp4"), ties away from
// zero, the NaN/Inf/zero policy, every floating dtype, decodeReduce, bad scales refused, and the bytes.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "codec/quant.hpp"
#include "kernels/fp4_math.hpp"
#include "kernels/half.hpp"

using namespace pccl;
using namespace pccl::codec;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr size_t kBlock = kernels::kFp4Block;
constexpr float kLevels[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};

std::vector<float> roundTrip(const std::vector<float>& x) {
  std::vector<uint8_t> wire(wireBytes(Quant::kFp4, DType::kFloat32, x.size()));
  encode(Quant::kFp4, DType::kFloat32, x.data(), x.size(), wire.data());
  REQUIRE(validateWire(Quant::kFp4, DType::kFloat32, wire.data(), x.size()).isOk());
  std::vector<float> y(x.size(), -123.0f);
  decode(Quant::kFp4, DType::kFloat32, wire.data(), x.size(), y.data());
  return y;
}

// Gaussian, Laplace and Student-t(3) data: what gradients look like, heavy tails included.
std::vector<float> heavyTailed(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0, 1);
  std::exponential_distribution<float> e(1);
  std::student_t_distribution<float> t(3);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    switch (i / kBlock % 3) {
      case 0: v[i] = g(rng); break;
      case 1: v[i] = e(rng) * (rng() % 2 ? 1.0f : -1.0f); break;
      default: v[i] = t(rng); break;
    }
  }
  return v;
}

// The bound of each element: half the widest gap (one scale), plus a few roundings of amax.
void checkBound(const std::vector<float>& x, const std::vector<double>& y, double rounding) {
  for (size_t first = 0; first < x.size(); first += kBlock) {
    const size_t n = std::min(kBlock, x.size() - first);
    double amax = 0;
    for (size_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(static_cast<double>(x[first + i])));
    const double bound = amax / 6 + 4 * amax * 0x1.0p-24;
    for (size_t i = 0; i < n; ++i) {
      const double want = x[first + i];
      const double err = std::fabs(y[first + i] - want);
      if (!(err <= bound + rounding * std::fabs(want) + rounding * amax)) {
        FAIL_CHECK("element " << first + i << ": " << want << " came back as " << y[first + i] << ", error " << err
                              << " above " << bound);
      }
    }
  }
}

}  // namespace

TEST_CASE("fp4: wire sizes and bytes against float32", "[quant][fp4]") {
  CHECK(wireBytes(Quant::kFp4, DType::kFloat32, 0) == 0);
  CHECK(wireBytes(Quant::kFp4, DType::kFloat32, 1) == 4 + 1);
  CHECK(wireBytes(Quant::kFp4, DType::kFloat32, kBlock) == 4 + kBlock / 2);
  CHECK(wireBytes(Quant::kFp4, DType::kFloat32, kBlock + 1) == 8 + kBlock / 2 + 1);
  CHECK(wireBytes(Quant::kFp4, DType::kFloat64, kBlock + 1) == 16 + kBlock / 2 + 1);
  CHECK(wireBytes(Quant::kFp4, DType::kFloat16, 3) == 4 + 2);
  const size_t n = size_t{1} << 20;  // 7.1x fewer bytes than float32
  CHECK(wireBytes(Quant::kFp4, DType::kFloat32, n) * 7 < n * 4);
  CHECK(checkQuant(Quant::kFp4, DType::kFloat16, RedOp::kAvg).isOk());
  CHECK(checkQuant(Quant::kFp4, DType::kBfloat16, RedOp::kMin).isOk());
  CHECK(checkQuant(Quant::kFp4, DType::kFloat64, RedOp::kMax).isOk());
  CHECK(checkQuant(Quant::kFp4, DType::kInt32, RedOp::kSum).code() == Code::kInvalidArgument);
  CHECK(checkQuant(Quant::kFp4, DType::kFloat32, RedOp::kProd).code() == Code::kInvalidArgument);
  CHECK(std::string(quantName(Quant::kFp4)) == "fp4");
}

TEST_CASE("fp4: every level of a block is exact, ties round away from zero", "[quant][fp4]") {
  const float s = 0.375f;  // amax = 6 s: the scale comes out exactly s
  std::vector<float> x;
  for (float l : kLevels) {
    x.push_back(l * s);
    x.push_back(-l * s);
  }
  std::vector<float> y = roundTrip(x);
  for (size_t i = 0; i < x.size(); ++i) CHECK(y[i] == x[i]);
  CHECK(std::signbit(y[1]));  // -0 stays -0
  // Midpoints between levels go up (away from zero), just below them down.
  for (uint32_t k = 0; k < 7; ++k) {
    const float mid = (kLevels[k] + kLevels[k + 1]) / 2 * s;
    std::vector<float> z = roundTrip({6 * s, mid, -mid, std::nextafter(mid, 0.0f)});
    CHECK(z[1] == kLevels[k + 1] * s);
    CHECK(z[2] == -kLevels[k + 1] * s);
    CHECK(z[3] == kLevels[k] * s);
  }
}

TEST_CASE("fp4: within half the widest gap of each block's scale, for heavy-tailed data", "[quant][fp4]") {
  for (size_t n : {size_t{1}, size_t{63}, size_t{64}, size_t{65}, size_t{10007}}) {
    INFO("count " << n);
    const std::vector<float> x = heavyTailed(n, static_cast<unsigned>(n));
    const std::vector<float> y = roundTrip(x);
    checkBound(x, std::vector<double>(y.begin(), y.end()), 0);
  }
  // The error is what the format promises on average too: about 11-13 % of the RMS for these tails.
  const std::vector<float> x = heavyTailed(size_t{1} << 16, 7);
  const std::vector<float> y = roundTrip(x);
  double e = 0, p = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    e += (y[i] - x[i]) * static_cast<double>(y[i] - x[i]);
    p += x[i] * static_cast<double>(x[i]);
  }
  CHECK(std::sqrt(e / p) < 0.14);
}

TEST_CASE("fp4: zero blocks, NaN and Inf follow the documented policy", "[quant][fp4]") {
  std::vector<float> x(3 * kBlock, 0.0f);
  x[1] = -0.0f;
  // Block 1: +Inf, -Inf and finite values; block 2: a NaN among them.
  x[kBlock] = kInf;
  x[kBlock + 1] = -kInf;
  x[kBlock + 2] = 4.0f;
  x[kBlock + 3] = -1.0f;
  x[kBlock + 4] = 2.5f;
  x[2 * kBlock] = std::numeric_limits<float>::quiet_NaN();
  x[2 * kBlock + 1] = 1.0f;
  const std::vector<float> y = roundTrip(x);
  CHECK(y[0] == 0.0f);
  CHECK(std::signbit(y[1]));
  CHECK(y[kBlock] == kInf);
  CHECK(y[kBlock + 1] == -kInf);
  CHECK(y[kBlock + 2] == 4.0f);   // the finite amax: level 4 of scale 1
  CHECK(y[kBlock + 3] == -1.0f);
  CHECK(y[kBlock + 4] == 3.0f);   // 2.5 is the midpoint of 2 and 3: away from zero
  CHECK(y[kBlock + 5] == 0.0f);
  for (size_t i = 2 * kBlock; i < 3 * kBlock; ++i) CHECK(std::isnan(y[i]));
}

TEST_CASE("fp4: float32's encode (SIMD where the CPU has it) is the scalar definition, byte for byte", "[quant][fp4]") {
  // Whole blocks, non-finite blocks between them, a zero block, and tails of every parity: the fused
  // whole-block loop, the per-block path and the element-by-element one must all give the same bytes.
  for (size_t count : {size_t{64}, size_t{640}, size_t{641}, size_t{702}, size_t{64 * 37 + 63}}) {
    std::vector<float> x = heavyTailed(count, static_cast<unsigned>(count));
    if (count > 3 * kBlock) {
      x[2 * kBlock + 5] = kInf;
      x[4 * kBlock + 63] = std::numeric_limits<float>::quiet_NaN();
      for (size_t i = 6 * kBlock; i < 7 * kBlock && i < count; ++i) x[i] = 0.0f;
    }
    std::vector<uint8_t> wire(wireBytes(Quant::kFp4, DType::kFloat32, count));
    encode(Quant::kFp4, DType::kFloat32, x.data(), count, wire.data());
    const size_t nb = (count + kBlock - 1) / kBlock;
    std::vector<uint8_t> want(wire.size(), 0);
    for (size_t b = 0; b < nb; ++b) {
      const size_t first = b * kBlock, n = std::min(kBlock, count - first);
      kernels::Fp4Stats<float> st;
      for (size_t i = 0; i < n; ++i) st.add(x[first + i]);
      const float scale = kernels::fp4Scale(st);
      std::memcpy(want.data() + b * sizeof(float), &scale, sizeof(float));
      const kernels::Fp4Thresholds<float> th(scale);
      for (size_t i = 0; i < n; ++i) {
        const uint8_t q = kernels::fp4Encode(x[first + i], scale, th);
        want[nb * sizeof(float) + (first + i) / 2] |= static_cast<uint8_t>(i % 2 ? q << 4 : q);
      }
    }
    INFO("count " << count);
    CHECK(wire == want);
  }
}

TEST_CASE("fp4: float64, float16 and bfloat16 data", "[quant][fp4]") {
  const std::vector<float> x = heavyTailed(1000, 11);
  SECTION("float64") {
    std::vector<double> xd(x.begin(), x.end()), yd(x.size());
    std::vector<uint8_t> wire(wireBytes(Quant::kFp4, DType::kFloat64, x.size()));
    encode(Quant::kFp4, DType::kFloat64, xd.data(), xd.size(), wire.data());
    decode(Quant::kFp4, DType::kFloat64, wire.data(), xd.size(), yd.data());
    checkBound(x, yd, 0);
  }
  for (bool fp16 : {true, false}) {
    DYNAMIC_SECTION((fp16 ? "float16" : "bfloat16")) {
      const DType t = fp16 ? DType::kFloat16 : DType::kBfloat16;
      std::vector<uint16_t> xh(x.size()), yh(x.size());
      std::vector<float> xs(x.size());
      for (size_t i = 0; i < x.size(); ++i) {
        xh[i] = fp16 ? kernels::floatToHalf(x[i]) : kernels::floatToBf16(x[i]);
        xs[i] = fp16 ? kernels::halfToFloat(xh[i]) : kernels::bf16ToFloat(xh[i]);
      }
      std::vector<uint8_t> wire(wireBytes(Quant::kFp4, t, x.size()));
      encode(Quant::kFp4, t, xh.data(), xh.size(), wire.data());
      REQUIRE(validateWire(Quant::kFp4, t, wire.data(), x.size()).isOk());
      decode(Quant::kFp4, t, wire.data(), x.size(), yh.data());
      std::vector<double> y(x.size());
      for (size_t i = 0; i < x.size(); ++i) y[i] = fp16 ? kernels::halfToFloat(yh[i]) : kernels::bf16ToFloat(yh[i]);
      checkBound(xs, y, fp16 ? 0x1.0p-11 : 0x1.0p-8);  // + rounding the result to the data's type
    }
  }
}

TEST_CASE("fp4: decodeReduce combines with the input, and divides for avg", "[quant][fp4]") {
  const std::vector<float> x = heavyTailed(200, 3), in = heavyTailed(200, 4);
  std::vector<uint8_t> wire(wireBytes(Quant::kFp4, DType::kFloat32, x.size()));
  encode(Quant::kFp4, DType::kFloat32, x.data(), x.size(), wire.data());
  std::vector<float> plain(x.size()), sum(x.size()), avg(x.size()), mx(x.size());
  decode(Quant::kFp4, DType::kFloat32, wire.data(), x.size(), plain.data());
  decodeReduce(Quant::kFp4, DType::kFloat32, RedOp::kSum, wire.data(), x.size(), in.data(), sum.data(), 1);
  decodeReduce(Quant::kFp4, DType::kFloat32, RedOp::kAvg, wire.data(), x.size(), in.data(), avg.data(), 2);
  decodeReduce(Quant::kFp4, DType::kFloat32, RedOp::kMax, wire.data(), x.size(), in.data(), mx.data(), 1);
  for (size_t i = 0; i < x.size(); ++i) {
    CHECK(sum[i] == plain[i] + in[i]);
    CHECK(avg[i] == (plain[i] + in[i]) / 2);
    CHECK(mx[i] == std::max(plain[i], in[i]));
  }
}

TEST_CASE("fp4: an infinite scale from a peer is refused with a clear error", "[quant][fp4]") {
  std::vector<float> x(2 * kBlock, 1.0f);
  std::vector<uint8_t> wire(wireBytes(Quant::kFp4, DType::kFloat32, x.size()));
  encode(Quant::kFp4, DType::kFloat32, x.data(), x.size(), wire.data());
  std::memcpy(wire.data() + 4, &kInf, 4);  // block 1's scale
  const Status s = validateWire(Quant::kFp4, DType::kFloat32, wire.data(), x.size());
  CHECK(s.code() == Code::kProtocolError);
  CHECK_THAT(s.message(), Catch::Contains("fp4 block 1 of 2"));
  // A NaN scale (a NaN block) and a negative one (a block with infinities) are values.
  const float nan = std::numeric_limits<float>::quiet_NaN(), negative = -0.5f;
  std::memcpy(wire.data() + 4, &nan, 4);
  CHECK(validateWire(Quant::kFp4, DType::kFloat32, wire.data(), x.size()).isOk());
  std::memcpy(wire.data() + 4, &negative, 4);
  CHECK(validateWire(Quant::kFp4, DType::kFloat32, wire.data(), x.size()).isOk());
}
