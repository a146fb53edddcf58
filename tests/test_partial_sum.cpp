// Integer avg's partial sums (codec/partial_sum.hpp, kernels/partial_sum.hpp): exact at the edges of
// every integer dtype, rounded toward zero, with the wire layout protocol.md §5.4 specifies.
#include <catch2/catch.hpp>

#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "codec/partial_sum.hpp"
#include "kernels/partial_sum.hpp"

using namespace pccl;
using codec::DType;

namespace {

__extension__ typedef __int128 Int128;
__extension__ typedef unsigned __int128 Uint128;

constexpr DType kIntegerTypes[] = {DType::kInt8,  DType::kUint8,  DType::kInt16, DType::kUint16,
                                   DType::kInt32, DType::kUint32, DType::kInt64, DType::kUint64};

bool isSigned(DType t) { return t == DType::kInt8 || t == DType::kInt16 || t == DType::kInt32 || t == DType::kInt64; }

Int128 minOf(DType t) {
  return isSigned(t) ? -(Int128{1} << (8 * codec::dtypeSize(t) - 1)) : 0;
}
Int128 maxOf(DType t) {
  const unsigned bits = static_cast<unsigned>(8 * codec::dtypeSize(t));
  return isSigned(t) ? (Int128{1} << (bits - 1)) - 1 : (Int128{1} << bits) - 1;
}

// Element buffers of dtype `t` from exact values (which must fit).
std::vector<uint8_t> store(DType t, const std::vector<Int128>& v) {
  const size_t size = codec::dtypeSize(t);
  std::vector<uint8_t> out(v.size() * size);
  for (size_t i = 0; i < v.size(); ++i) {
    const auto bits = static_cast<uint64_t>(v[i]);
    std::memcpy(out.data() + i * size, &bits, size);  // little-endian: the low bytes
  }
  return out;
}
Int128 load(DType t, const std::vector<uint8_t>& buf, size_t i) {
  const size_t size = codec::dtypeSize(t);
  uint64_t bits = 0;
  std::memcpy(&bits, buf.data() + i * size, size);
  if (!isSigned(t)) return static_cast<Int128>(bits);
  const unsigned shift = static_cast<unsigned>(64 - 8 * size);
  return static_cast<Int128>(static_cast<int64_t>(bits << shift) >> shift);
}

// The ring's path for one element position: rank 0 widens, ranks 1..N-2 add, rank N-1 finishes.
// inputs[r] holds rank r's elements; returns the averages.
std::vector<uint8_t> ringAverage(DType t, const std::vector<std::vector<uint8_t>>& inputs, size_t count) {
  const auto n = static_cast<uint32_t>(inputs.size());
  std::vector<uint8_t> wire(count * codec::partialSumSize(t, n));
  std::vector<uint8_t> out(count * codec::dtypeSize(t));
  if (n == 1) return inputs[0];
  codec::widenToPartials(t, n, inputs[0].data(), count, wire.data());
  for (size_t r = 1; r + 1 < n; ++r) codec::addToPartials(t, n, wire.data(), inputs[r].data(), count, wire.data());
  codec::finishPartials(t, n, wire.data(), inputs[n - 1].data(), count, out.data());
  return out;
}

// Checks ringAverage against exact arithmetic for per-rank element values.
void checkAverages(DType t, const std::vector<std::vector<Int128>>& values) {
  std::vector<std::vector<uint8_t>> inputs;
  for (const auto& v : values) inputs.push_back(store(t, v));
  const size_t count = values[0].size();
  const auto got = ringAverage(t, inputs, count);
  for (size_t i = 0; i < count; ++i) {
    Int128 sum = 0;
    for (const auto& v : values) sum += v[i];
    const Int128 want = sum / static_cast<Int128>(values.size());  // toward zero
    INFO(codec::dtypeName(t) << " peers=" << values.size() << " element " << i);
    INFO("got " << static_cast<int64_t>(load(t, got, i)) << ", want " << static_cast<int64_t>(want));
    CHECK(load(t, got, i) == want);
  }
}

}  // namespace

// Every rank's values at the extremes of `t` (and the cases where rounding matters).
std::vector<std::vector<Int128>> extremes(DType t, size_t n) {
  const Int128 lo = minOf(t), hi = maxOf(t);
  std::vector<std::vector<Int128>> values(n);
  for (size_t r = 0; r < n; ++r) {
    const bool even = r % 2 == 0;
    const auto shift = static_cast<Int128>(r % 100);
    values[r] = {hi, lo, even ? hi : lo, r == 0 ? lo : hi, r == 0 ? hi : lo, hi - shift, lo + shift,
                 r == 0 ? (isSigned(t) ? Int128{-1} : Int128{1}) : 0, Int128{0}};
  }
  return values;
}

TEST_CASE("partial sums: avg of the extremes of every integer dtype is exact, for 1, 2, 3 and 7 peers",
          "[partial_sum]") {
  for (DType t : kIntegerTypes) {
    for (size_t n : {1u, 2u, 3u, 7u}) checkAverages(t, extremes(t, n));
  }
}

TEST_CASE("partial sums: exact where the sum widens, 256 and 257, 65536 and 65537 peers", "[partial_sum]") {
  for (DType t : kIntegerTypes) {
    for (size_t n : {256u, 257u}) checkAverages(t, extremes(t, n));
  }
  for (DType t : {DType::kInt8, DType::kUint8, DType::kInt16, DType::kUint16}) {
    for (size_t n : {65536u, 65537u}) checkAverages(t, extremes(t, n));
  }
}

TEST_CASE("partial sums: int8 avg of 100 and 100 is 100, and rounding is toward zero", "[partial_sum]") {
  checkAverages(DType::kInt8, {{100, 127, -128, -1, 1, -3}, {100, 127, -128, -2, 2, 0}});
  const std::vector<uint8_t> a = store(DType::kInt8, {100, -1, 1, -3});
  const std::vector<uint8_t> b = store(DType::kInt8, {100, -2, 2, 0});
  const auto got = ringAverage(DType::kInt8, {a, b}, 4);
  CHECK(load(DType::kInt8, got, 0) == 100);  // not (100 + 100) wrapped to -56, halved to -28
  CHECK(load(DType::kInt8, got, 1) == -1);   // -1.5 toward zero (floor would give -2)
  CHECK(load(DType::kInt8, got, 2) == 1);    // 1.5 toward zero
  CHECK(load(DType::kInt8, got, 3) == -1);   // -1.5
  const auto big = ringAverage(DType::kInt64, {store(DType::kInt64, {std::numeric_limits<int64_t>::max()}),
                                               store(DType::kInt64, {std::numeric_limits<int64_t>::max()})},
                               1);
  CHECK(load(DType::kInt64, big, 0) == std::numeric_limits<int64_t>::max());
}

TEST_CASE("partial sums: the wire layout is a little-endian two's complement sum twice the element's width",
          "[partial_sum]") {
  CHECK(codec::partialSumSize(DType::kInt8, 2) == 2);
  CHECK(codec::partialSumSize(DType::kUint8, 256) == 2);
  CHECK(codec::partialSumSize(DType::kInt8, 257) == 4);
  CHECK(codec::partialSumSize(DType::kUint8, 1u << 24) == 4);
  CHECK(codec::partialSumSize(DType::kInt8, (1u << 24) + 1) == 8);
  CHECK(codec::partialSumSize(DType::kInt16, 65536) == 4);
  CHECK(codec::partialSumSize(DType::kUint16, 65537) == 8);
  CHECK(codec::partialSumSize(DType::kUint32, 2) == 8);
  CHECK(codec::partialSumSize(DType::kInt32, 0xffffffffu) == 8);
  CHECK(codec::partialSumSize(DType::kInt64, 2) == 16);
  CHECK(codec::partialSumSize(DType::kUint64, 0xffffffffu) == 16);
  CHECK(codec::hasPartialSums(DType::kInt8, codec::RedOp::kAvg));
  CHECK_FALSE(codec::hasPartialSums(DType::kInt8, codec::RedOp::kSum));
  CHECK_FALSE(codec::hasPartialSums(DType::kFloat32, codec::RedOp::kAvg));
  std::vector<uint8_t> wire(16);
  const int8_t minus_one = -1;
  codec::widenToPartials(DType::kInt8, 2, &minus_one, 1, wire.data());
  CHECK(std::vector<uint8_t>(wire.begin(), wire.begin() + 2) == std::vector<uint8_t>{0xff, 0xff});
  codec::widenToPartials(DType::kInt8, 300, &minus_one, 1, wire.data());
  CHECK(std::vector<uint8_t>(wire.begin(), wire.begin() + 4) == std::vector<uint8_t>(4, 0xff));
  const uint8_t u = 0xff;
  codec::widenToPartials(DType::kUint8, 2, &u, 1, wire.data());
  CHECK(std::vector<uint8_t>(wire.begin(), wire.begin() + 2) == std::vector<uint8_t>{0xff, 0});
  const int64_t m = -2;
  codec::widenToPartials(DType::kInt64, 2, &m, 1, wire.data());
  std::vector<uint8_t> want(16, 0xff);
  want[0] = 0xfe;
  CHECK(wire == want);
  const uint64_t top = ~uint64_t{0};
  codec::addToPartials(DType::kUint64, 2, wire.data(), &top, 1, wire.data());  // (2^128 - 2) + (2^64 - 1) wraps
  want.assign(16, 0);
  want[0] = 0xfd;
  for (size_t i = 1; i < 8; ++i) want[i] = 0xff;
  CHECK(wire == want);  // 2^64 - 3: the carry out of the low word cancelled the high word
}

TEST_CASE("partial sums: the 128-bit division is exact for every sum N peers can produce", "[partial_sum]") {
  std::mt19937_64 rng(17);
  for (int i = 0; i < 20000; ++i) {
    const uint32_t d = i % 4 == 0 ? 0xffffffffu : static_cast<uint32_t>(rng() % 1000 + 1);
    const kernels::U128 a{rng(), rng()};
    const Uint128 ref = ((static_cast<Uint128>(a.hi) << 64) | a.lo) / d;
    const kernels::U128 q = kernels::divide128(a, d);
    REQUIRE(q.lo == static_cast<uint64_t>(ref));
    REQUIRE(q.hi == static_cast<uint64_t>(ref >> 64));
  }
  // The largest sums: 2^32 - 1 peers all at the extreme of a 64-bit type, on the wire as one sum.
  const uint32_t peers = 0xffffffffu;
  const Int128 extremes[] = {static_cast<Int128>(std::numeric_limits<int64_t>::min()),
                             static_cast<Int128>(std::numeric_limits<int64_t>::max())};
  for (Int128 x : extremes) {
    const Int128 partial = x * (peers - 1);  // what N - 1 peers' hops carry to the owner
    std::vector<uint8_t> wire(16);
    const auto bits = static_cast<Uint128>(partial);
    const uint64_t words[2] = {static_cast<uint64_t>(bits), static_cast<uint64_t>(bits >> 64)};
    std::memcpy(wire.data(), words, 16);
    const auto own = static_cast<int64_t>(x);
    int64_t out = 0;
    codec::finishPartials(DType::kInt64, peers, wire.data(), &own, 1, &out);
    CHECK(out == own);
  }
  // int8 over 2^24 + 1 peers (8-byte sums) and int16 over 2^32 - 1 peers, all at the minimum.
  for (const auto& [t, n] : {std::pair<DType, uint32_t>{DType::kInt8, (1u << 24) + 1}, {DType::kInt16, peers}}) {
    REQUIRE(codec::partialSumSize(t, n) == 8);
    const Int128 lo = minOf(t);
    const auto sum = static_cast<int64_t>(lo * (n - 1));
    std::vector<uint8_t> wire(8);
    std::memcpy(wire.data(), &sum, 8);
    const std::vector<uint8_t> own = store(t, {lo});
    std::vector<uint8_t> out(codec::dtypeSize(t));
    codec::finishPartials(t, n, wire.data(), own.data(), 1, out.data());
    CHECK(load(t, out, 0) == lo);
  }
}

TEST_CASE("partial sums: random inputs over random peer counts match exact arithmetic", "[partial_sum]") {
  std::mt19937_64 rng(5);
  for (DType t : kIntegerTypes) {
    for (int round = 0; round < 20; ++round) {
      const size_t n = round % 5 == 4 ? 250 + rng() % 20 : 1 + rng() % 12;  // across int8's 2-byte limit too
      std::vector<std::vector<Int128>> values(n, std::vector<Int128>(64));
      const Uint128 span = static_cast<Uint128>(maxOf(t) - minOf(t)) + 1;
      for (auto& v : values) {
        for (auto& x : v) {
          const Uint128 r = (static_cast<Uint128>(rng()) << 64 | rng()) % span;
          x = minOf(t) + static_cast<Int128>(r);
        }
      }
      checkAverages(t, values);
    }
  }
}
