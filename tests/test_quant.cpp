// The wire formats of the quantized all-reduce (codec/quant, codec/compress) against plain
// references: exact round trips where exact is possible, the documented error bound of each format
// (docs/algorithms.md, "Quantization"), the NaN/Inf/zero policy of int8 blocks, corrupted payloads.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "codec/compress.hpp"
#include "collective/ring_collective.hpp"
#include "kernels/half.hpp"
#include "codec/quant.hpp"
#include "kernels/quant_math.hpp"

using namespace pccl;
using namespace pccl::codec;
using pccl::kernels::bf16ToFloat;
using pccl::kernels::floatToBf16;
using pccl::kernels::floatToHalf;
using pccl::kernels::halfToFloat;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr size_t kBlock = kernels::kInt8Block;

std::vector<float> roundTrip(Quant q, const std::vector<float>& x) {
  std::vector<uint8_t> wire(wireBytes(q, DType::kFloat32, x.size()));
  encode(q, DType::kFloat32, x.data(), x.size(), wire.data());
  REQUIRE(validateWire(q, DType::kFloat32, wire.data(), x.size()).isOk());
  std::vector<float> y(x.size(), -123.0f);
  decode(q, DType::kFloat32, wire.data(), x.size(), y.data());
  return y;
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

std::vector<float> randomFloats(size_t n, float lo, float hi, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// One int8 block's documented bound: half a step, plus the two roundings of lo + q * scale.
double int8Bound(const float* x, size_t n, size_t steps = 255) {
  float lo = kInf, hi = -kInf;
  for (size_t i = 0; i < n; ++i) {
    if (std::isfinite(x[i])) {
      lo = std::min(lo, x[i]);
      hi = std::max(hi, x[i]);
    }
  }
  const double mag = std::max(std::fabs(static_cast<double>(lo)), std::fabs(static_cast<double>(hi)));
  return (static_cast<double>(hi) - lo) / (2.0 * steps) * 1.0001 + 2 * mag * 0x1.0p-23;
}

}  // namespace

TEST_CASE("quant: wire sizes", "[quant]") {
  CHECK(wireBytes(Quant::kNone, DType::kFloat32, 10) == 40);
  CHECK(wireBytes(Quant::kFp16, DType::kFloat32, 10) == 20);
  CHECK(wireBytes(Quant::kBf16, DType::kFloat64, 10) == 20);
  CHECK(wireBytes(Quant::kInt8, DType::kFloat32, 0) == 0);
  CHECK(wireBytes(Quant::kInt8, DType::kFloat32, 1) == 8 + 1);
  CHECK(wireBytes(Quant::kInt8, DType::kFloat32, kBlock) == 8 + kBlock);
  CHECK(wireBytes(Quant::kInt8, DType::kFloat32, kBlock + 1) == 16 + kBlock + 1);
  CHECK(wireBytes(Quant::kInt8, DType::kFloat64, kBlock + 1) == 32 + kBlock + 1);
  CHECK(wireBytes(Quant::kInt8, DType::kBfloat16, 3) == 8 + 3);
}

TEST_CASE("quant: which combinations are allowed", "[quant]") {
  CHECK(checkQuant(Quant::kNone, DType::kInt32, RedOp::kProd).isOk());
  CHECK(checkQuant(Quant::kFp16, DType::kFloat32, RedOp::kSum).isOk());
  CHECK(checkQuant(Quant::kBf16, DType::kFloat64, RedOp::kAvg).isOk());
  CHECK(checkQuant(Quant::kInt8, DType::kFloat16, RedOp::kMax).isOk());
  CHECK(checkQuant(Quant::kInt8, DType::kBfloat16, RedOp::kMin).isOk());
  CHECK(checkQuant(Quant::kFp16, DType::kFloat16, RedOp::kSum).code() == Code::kInvalidArgument);
  CHECK(checkQuant(Quant::kBf16, DType::kBfloat16, RedOp::kSum).code() == Code::kInvalidArgument);
  CHECK(checkQuant(Quant::kInt8, DType::kInt32, RedOp::kSum).code() == Code::kInvalidArgument);
  CHECK(checkQuant(Quant::kInt8, DType::kUint8, RedOp::kSum).code() == Code::kInvalidArgument);
  Status s = checkQuant(Quant::kInt8, DType::kFloat32, RedOp::kProd);
  CHECK(s.code() == Code::kInvalidArgument);
  CHECK_THAT(s.message(), Catch::Contains("prod"));
}

TEST_CASE("quant: fp16 and bf16 are exact for values they can hold, and round to nearest even", "[quant]") {
  std::vector<float> exact;
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = halfToFloat(static_cast<uint16_t>(h));
    if (!std::isnan(f)) exact.push_back(f);
  }
  std::vector<float> y = roundTrip(Quant::kFp16, exact);
  for (size_t i = 0; i < exact.size(); ++i) REQUIRE(bits(y[i]) == bits(exact[i]));  // -0 and subnormals included
  std::vector<float> bexact;
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const float f = bf16ToFloat(static_cast<uint16_t>(b));
    if (!std::isnan(f)) bexact.push_back(f);
  }
  y = roundTrip(Quant::kBf16, bexact);
  for (size_t i = 0; i < bexact.size(); ++i) REQUIRE(bits(y[i]) == bits(bexact[i]));
  // Ties go to even: 1 + 2^-11 lies halfway between 1 and 1 + 2^-10.
  y = roundTrip(Quant::kFp16, {1.0f + 0x1.0p-11f, 1.0f + 3 * 0x1.0p-11f, 65520.0f, -1e9f});
  CHECK(y[0] == 1.0f);
  CHECK(y[1] == 1.0f + 0x1.0p-9f);
  CHECK(y[2] == kInf);  // past the largest half: Inf (documented)
  CHECK(y[3] == -kInf);
  // NaN stays NaN, quieted, as the hardware conversions do it.
  y = roundTrip(Quant::kFp16, {std::numeric_limits<float>::quiet_NaN()});
  CHECK(std::isnan(y[0]));
  CHECK(halfToFloat(0x7c01) != halfToFloat(0x7c01));
  CHECK((bits(halfToFloat(0x7c01)) & 0x00400000u) != 0);  // signalling half NaN reads as a quiet float NaN
}

TEST_CASE("quant: fp16 and bf16 relative error is at most half an ulp", "[quant]") {
  const std::vector<float> x = randomFloats(100000, -1000.0f, 1000.0f, 7);
  const std::vector<float> h = roundTrip(Quant::kFp16, x);
  const std::vector<float> b = roundTrip(Quant::kBf16, x);
  for (size_t i = 0; i < x.size(); ++i) {
    REQUIRE(std::fabs(h[i] - x[i]) <= std::fabs(x[i]) * 0x1.0p-11 + 0x1.0p-25);
    REQUIRE(std::fabs(b[i] - x[i]) <= std::fabs(x[i]) * 0x1.0p-8);
  }
}

TEST_CASE("quant: int8 stays within half a step of each block's range", "[quant]") {
  for (size_t n : {size_t{1}, size_t{2}, size_t{100}, kBlock - 1, kBlock, kBlock + 1, 3 * kBlock + 17}) {
    INFO("count " << n);
    std::vector<float> x = randomFloats(n, -3.0f, 5.0f, static_cast<unsigned>(n));
    if (n > kBlock) {
      for (size_t i = kBlock; i < 2 * kBlock && i < n; ++i) x[i] *= 1000;  // blocks are scaled on their own
    }
    const std::vector<float> y = roundTrip(Quant::kInt8, x);
    for (size_t first = 0; first < n; first += kBlock) {
      const size_t len = std::min(kBlock, n - first);
      const double bound = int8Bound(x.data() + first, len);
      for (size_t i = first; i < first + len; ++i) REQUIRE(std::fabs(static_cast<double>(y[i]) - x[i]) <= bound);
    }
  }
  // All-negative and tiny-range blocks.
  std::vector<float> neg = randomFloats(5000, -7.0f, -6.5f, 3);
  std::vector<float> y = roundTrip(Quant::kInt8, neg);
  for (size_t i = 0; i < neg.size(); ++i) {
    const size_t first = i / kBlock * kBlock;
    REQUIRE(std::fabs(y[i] - neg[i]) <= int8Bound(neg.data() + first, std::min(kBlock, neg.size() - first)));
    REQUIRE(y[i] < 0);
  }
  // The extremes of a block are met exactly: the minimum always, the maximum up to rounding.
  y = roundTrip(Quant::kInt8, {-2.0f, 0.25f, 3.0f});
  CHECK(y[0] == -2.0f);
  CHECK(std::fabs(y[2] - 3.0f) <= 3.0f * 0x1.0p-22f);
}

TEST_CASE("quant: int8 constant blocks and zeros are exact", "[quant]") {
  for (float c : {0.0f, -0.0f, 1.5f, -3.25e-30f, 3.0e38f}) {
    INFO("constant " << c);
    const std::vector<float> y = roundTrip(Quant::kInt8, std::vector<float>(kBlock + 5, c));
    for (float v : y) REQUIRE(bits(v) == bits(c));  // sign of zero included
  }
  const std::vector<float> y = roundTrip(Quant::kInt8, {0.0f, -0.0f, 1.0f, 0.0f});
  CHECK(y[0] == 0.0f);
  CHECK(y[1] == 0.0f);  // equal to zero; the sign of a zero survives in constant blocks only
  CHECK(y[2] == 1.0f);
}

TEST_CASE("quant: int8 NaN and Inf follow the documented policy", "[quant]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // A NaN poisons its block only.
  std::vector<float> x(kBlock + 3, 1.0f);
  x[10] = nan;
  x[kBlock + 1] = 2.0f;
  std::vector<float> y = roundTrip(Quant::kInt8, x);
  for (size_t i = 0; i < kBlock; ++i) REQUIRE(std::isnan(y[i]));
  CHECK(y[kBlock] == 1.0f);
  CHECK(y[kBlock + 1] == 2.0f);
  // Infinities are kept exactly; the finite values of the block use 253 steps over their own range.
  x = randomFloats(1000, -1.0f, 1.0f, 11);
  std::vector<float> finite = x;
  x[5] = kInf;
  x[6] = -kInf;
  x[999] = kInf;
  y = roundTrip(Quant::kInt8, x);
  CHECK(y[5] == kInf);
  CHECK(y[6] == -kInf);
  CHECK(y[999] == kInf);
  finite.erase(finite.begin() + 999);
  finite.erase(finite.begin() + 5, finite.begin() + 7);
  const double bound = int8Bound(finite.data(), finite.size(), 253);
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isfinite(x[i])) REQUIRE(std::fabs(static_cast<double>(y[i]) - x[i]) <= bound);
  }
  // Only infinities.
  y = roundTrip(Quant::kInt8, {kInf, -kInf, kInf});
  CHECK(y == std::vector<float>{kInf, -kInf, kInf});
  // A finite range wider than the largest float: the block is sent as NaN (documented).
  y = roundTrip(Quant::kInt8, {-3e38f, 3e38f});
  CHECK(std::isnan(y[0]));
  CHECK(std::isnan(y[1]));
}

TEST_CASE("quant: int8 of float64, float16 and bfloat16 data", "[quant]") {
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> d(-10, 10);
  std::vector<double> x(3 * kBlock);
  for (auto& v : x) v = d(rng);
  std::vector<uint8_t> wire(wireBytes(Quant::kInt8, DType::kFloat64, x.size()));
  encode(Quant::kInt8, DType::kFloat64, x.data(), x.size(), wire.data());
  std::vector<double> y(x.size());
  decode(Quant::kInt8, DType::kFloat64, wire.data(), x.size(), y.data());
  for (size_t i = 0; i < x.size(); ++i) REQUIRE(std::fabs(y[i] - x[i]) <= 20.0 / 510 * 1.0001);

  for (DType t : {DType::kFloat16, DType::kBfloat16}) {
    std::vector<uint16_t> h(2000);
    std::vector<float> f(h.size());
    for (size_t i = 0; i < h.size(); ++i) {
      const float v = static_cast<float>(d(rng));
      h[i] = t == DType::kFloat16 ? floatToHalf(v) : floatToBf16(v);
      f[i] = t == DType::kFloat16 ? halfToFloat(h[i]) : bf16ToFloat(h[i]);
    }
    std::vector<uint8_t> w(wireBytes(Quant::kInt8, t, h.size()));
    encode(Quant::kInt8, t, h.data(), h.size(), w.data());
    std::vector<uint16_t> back(h.size());
    decode(Quant::kInt8, t, w.data(), h.size(), back.data());
    const double rel = t == DType::kFloat16 ? 0x1.0p-11 : 0x1.0p-8;  // storing back rounds once more
    for (size_t i = 0; i < h.size(); ++i) {
      const float g = t == DType::kFloat16 ? halfToFloat(back[i]) : bf16ToFloat(back[i]);
      REQUIRE(std::fabs(static_cast<double>(g) - f[i]) <= int8Bound(f.data(), f.size()) + 10.0 * rel);
    }
  }
}

TEST_CASE("quant: decodeReduce combines with the input in full precision", "[quant]") {
  const std::vector<float> a = randomFloats(9000, -1, 1, 1);
  const std::vector<float> in = randomFloats(9000, -1, 1, 2);
  for (Quant q : {Quant::kNone, Quant::kFp16, Quant::kBf16, Quant::kInt8}) {
    std::vector<uint8_t> wire(wireBytes(q, DType::kFloat32, a.size()));
    encode(q, DType::kFloat32, a.data(), a.size(), wire.data());
    std::vector<float> dec(a.size());
    decode(q, DType::kFloat32, wire.data(), a.size(), dec.data());
    for (RedOp op : {RedOp::kSum, RedOp::kAvg, RedOp::kMin, RedOp::kMax}) {
      for (uint32_t divisor : {1u, 3u}) {
        std::vector<float> out(a.size());
        decodeReduce(q, DType::kFloat32, op, wire.data(), a.size(), in.data(), out.data(), divisor);
        for (size_t i = 0; i < a.size(); ++i) {
          float want = op == RedOp::kMin ? std::min(dec[i], in[i])
                       : op == RedOp::kMax ? std::max(dec[i], in[i])
                                           : dec[i] + in[i];
          if (op == RedOp::kAvg && divisor > 1) want /= static_cast<float>(divisor);
          INFO("quant " << static_cast<int>(q) << " op " << static_cast<int>(op) << " i " << i);
          REQUIRE(bits(out[i]) == bits(want));
        }
      }
    }
  }
}

TEST_CASE("quant: bad int8 headers are refused with a clear error", "[quant]") {
  const std::vector<float> x = randomFloats(kBlock + 10, -1, 1, 4);
  std::vector<uint8_t> wire(wireBytes(Quant::kInt8, DType::kFloat32, x.size()));
  encode(Quant::kInt8, DType::kFloat32, x.data(), x.size(), wire.data());
  const float nan = std::numeric_limits<float>::quiet_NaN();
  struct Bad {
    float lo, scale;
  };
  for (Bad b : {Bad{0.0f, kInf}, Bad{0.0f, nan}, Bad{kInf, 1.0f}, Bad{nan, 1.0f}, Bad{-kInf, -kInf}}) {
    std::vector<uint8_t> w = wire;
    std::memcpy(w.data() + 8, &b.lo, 4);  // the second block's header
    std::memcpy(w.data() + 12, &b.scale, 4);
    Status s = validateWire(Quant::kInt8, DType::kFloat32, w.data(), x.size());
    CHECK(s.code() == Code::kProtocolError);
    CHECK_THAT(s.message(), Catch::Contains("block 1") && Catch::Contains("scale"));
  }
}

TEST_CASE("quant: zstd round trip, incompressible data, corrupted frames", "[quant]") {
  Compressor z;
  std::vector<uint8_t> data(100000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>((i / 100) % 7);
  std::vector<uint8_t> packed(Compressor::bound(data.size()));
  for (int level : {1, 3, 19}) {
    auto n = z.compress(data.data(), data.size(), packed.data(), packed.size(), level);
    REQUIRE(n.isOk());
    REQUIRE(*n > 0);
    CHECK(*n < data.size() / 10);
    std::vector<uint8_t> back(data.size());
    REQUIRE(z.decompress(packed.data(), *n, back.data(), back.size()).isOk());
    CHECK(back == data);
  }
  // Random bytes do not shrink: compress() says so with 0.
  std::mt19937 rng(9);
  std::vector<uint8_t> noise(5000);
  for (auto& b : noise) b = static_cast<uint8_t>(rng());
  auto n = z.compress(noise.data(), noise.size(), packed.data(), packed.size(), 1);
  REQUIRE(n.isOk());
  CHECK(*n == 0);

  auto good = z.compress(data.data(), data.size(), packed.data(), packed.size(), 1);
  REQUIRE(good.isOk());
  std::vector<uint8_t> out(data.size());
  // Wrong expected size, truncated frame, flipped bytes, garbage: ProtocolError, never a crash.
  CHECK(z.decompress(packed.data(), *good, out.data(), data.size() - 1).code() == Code::kProtocolError);
  CHECK(z.decompress(packed.data(), *good / 2, out.data(), data.size()).code() == Code::kProtocolError);
  std::vector<uint8_t> flipped(packed.begin(), packed.begin() + static_cast<std::ptrdiff_t>(*good));
  for (size_t i = 20; i < flipped.size(); i += 7) flipped[i] ^= 0x5a;
  CHECK(z.decompress(flipped.data(), flipped.size(), out.data(), data.size()).code() == Code::kProtocolError);
  CHECK(z.decompress(noise.data(), 100, out.data(), data.size()).code() == Code::kProtocolError);
  Status s = z.decompress(noise.data(), 0, out.data(), data.size());
  CHECK(s.code() == Code::kProtocolError);
  CHECK_THAT(s.message(), Catch::Contains("corrupted compressed segment"));
}

// ---- corrupted coded payloads as the ring receives them ------------------------------------------

namespace {

// Rank 0 of a 2-peer ring whose successor is a real loopback TCP connection; the test plays the
// predecessor by handing frames to placement()/delivered(), exactly as the data channel does.
struct CodedRing {
  asio::io_context io;
  std::shared_ptr<net::DataChannel> out;
  std::vector<float> input = std::vector<float>(100, 0.5f), output = std::vector<float>(100, 0.0f);
  std::vector<uint8_t> wire;
  Compressor zstd;
  std::shared_ptr<collective::Striper> striper;
  std::shared_ptr<collective::RingCollective> ring;
  Status finished = Status::internal("not finished");

  CodedRing(Quant q, int compress) {
    net::Tcp::acceptor acc(io, net::Tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    net::Tcp::socket client(io), server(io);
    client.connect(acc.local_endpoint());
    acc.accept(server);
    out = std::make_shared<net::DataChannel>(net::Link{std::move(client), {}, {}}, 1, "test-successor");
    collective::RingOpSpec spec;
    spec.op_id = 9;
    spec.input = reinterpret_cast<const uint8_t*>(input.data());
    spec.output = reinterpret_cast<uint8_t*>(output.data());
    spec.count = input.size();
    spec.rank = 0;
    spec.world = 2;
    spec.segment_elems = 50;
    spec.quant = q;
    spec.compress = compress;
    spec.compressor = &zstd;
    wire.resize(collective::wireRegionBytes(spec));
    spec.wire = wire.data();
    striper = std::make_shared<collective::Striper>(collective::Striper::Channels{out});
    striper->attach();
    ring = std::make_shared<collective::RingCollective>(spec, striper, [this](const Status& s) { finished = s; });
    ring->start();
    peer_ = std::move(server);
  }
  // The predecessor's phase-0 segment (chunk 1, 50 elements) as it would encode it.
  std::vector<uint8_t> segment(Quant q) {
    std::vector<float> v(50, 0.25f);
    v[3] = 1.0f;
    std::vector<uint8_t> w(wireBytes(q, DType::kFloat32, 50));
    encode(q, DType::kFloat32, v.data(), 50, w.data());
    return w;
  }
  // placement + copy + delivered, as the channel would; returns the first error.
  Status feed(const std::vector<uint8_t>& bytes, uint32_t flags = 0) {
    wire::DataHeader h = wire::dataHeader(9, 0, flags, 0);
    auto dst = ring->placement(h, static_cast<uint32_t>(bytes.size()));
    if (!dst.isOk()) return dst.status();
    std::memcpy(*dst, bytes.data(), bytes.size());
    return ring->delivered(h, static_cast<uint32_t>(bytes.size()));
  }

 private:
  net::Tcp::socket peer_{io};
};

}  // namespace

TEST_CASE("quant: corrupted coded segments from the predecessor fail the operation with a clear error",
          "[quant]") {
  {
    CodedRing r(Quant::kInt8, 0);
    std::vector<uint8_t> seg = r.segment(Quant::kInt8);
    seg.pop_back();  // truncated
    Status s = r.feed(seg);
    CHECK(s.code() == Code::kProtocolError);
    CHECK_THAT(s.message(), Catch::Contains("carries 57 bytes, expected 58"));
  }
  {
    CodedRing r(Quant::kInt8, 0);
    std::vector<uint8_t> seg = r.segment(Quant::kInt8);
    seg.push_back(0);  // too long
    CHECK(r.feed(seg).code() == Code::kProtocolError);
  }
  {
    CodedRing r(Quant::kInt8, 0);
    std::vector<uint8_t> seg = r.segment(Quant::kInt8);
    const float inf = kInf;
    std::memcpy(seg.data() + 4, &inf, 4);  // scale = Inf
    Status s = r.feed(seg);
    CHECK(s.code() == Code::kProtocolError);
    CHECK_THAT(s.message(), Catch::Contains("bad scale") && Catch::Contains("op 9 phase 0"));
    CHECK(r.finished.code() == Code::kProtocolError);  // the operation failed, nothing was reduced
    CHECK(r.output[60] == 0.0f);
  }
  {
    CodedRing r(Quant::kInt8, 0);  // a compressed frame in an operation without compression
    Status s = r.feed(r.segment(Quant::kInt8), wire::kDataCompressed);
    CHECK(s.code() == Code::kProtocolError);
    CHECK_THAT(s.message(), Catch::Contains("without compression"));
  }
  {
    CodedRing r(Quant::kFp16, 3);  // garbage that claims to be a zstd frame
    std::vector<uint8_t> junk(40, 0xAB);
    Status s = r.feed(junk, wire::kDataCompressed);
    CHECK(s.code() == Code::kProtocolError);
    CHECK_THAT(s.message(), Catch::Contains("corrupted compressed segment"));
  }
  {
    CodedRing r(Quant::kInt8, 0);  // and a good segment goes through: rank 0 owns chunk 1 and adopts
    CHECK(r.feed(r.segment(Quant::kInt8)).isOk());
    CHECK(std::fabs(r.output[50] - 0.75f) <= 0.75f / 255);
  }
}
