// The shared-state content hash (codec/hash.hpp): its two-level construction rebuilt by hand from
// libsodium's BLAKE2b, independence from the thread count, and sensitivity to every byte and to the length.
#include <catch2/catch.hpp>
#include <sodium.h>

#include <vector>

#include "codec/hash.hpp"
#include "test_support.hpp"

using pccl::codec::Digest;
using pccl::codec::hashBuffer;
using pccl::codec::hashFromLeaves;
using pccl::codec::hashLeaf;
using pccl::codec::kHashLeafBytes;

namespace {

// The documented construction, written out independently of hash.cpp.
Digest reference(const std::vector<uint8_t>& data) {
  std::vector<uint8_t> root;
  for (int i = 0; i < 8; ++i) root.push_back(static_cast<uint8_t>(static_cast<uint64_t>(data.size()) >> (8 * i)));
  for (int i = 0; i < 8; ++i) root.push_back(static_cast<uint8_t>(static_cast<uint64_t>(kHashLeafBytes) >> (8 * i)));
  for (size_t at = 0; at < data.size(); at += kHashLeafBytes) {
    uint8_t leaf[32];
    crypto_generichash(leaf, 32, data.data() + at, std::min(kHashLeafBytes, data.size() - at), nullptr, 0);
    root.insert(root.end(), leaf, leaf + 32);
  }
  Digest d;
  crypto_generichash(d.bytes.data(), 32, root.data(), root.size(), nullptr, 0);
  return d;
}

std::vector<uint8_t> bytesOf(size_t n, size_t seed) {
  std::vector<float> f = pccl::test::randomFloats(seed, (n + 3) / 4);
  std::vector<uint8_t> b(n);
  if (n > 0) std::memcpy(b.data(), f.data(), n);
  return b;
}

}  // namespace

TEST_CASE("hash: the documented two-level BLAKE2b-256, any thread count", "[hash]") {
  REQUIRE(sodium_init() >= 0);
  for (size_t n : {size_t{0}, size_t{1}, kHashLeafBytes - 1, kHashLeafBytes, kHashLeafBytes + 1,
                   5 * kHashLeafBytes / 2}) {
    INFO("n = " << n);
    const auto data = bytesOf(n, n + 1);
    const Digest want = reference(data);
    for (unsigned threads : {1u, 2u, 3u, 8u}) CHECK(hashBuffer(data.data(), n, threads) == want);
    CHECK(want.hex().size() == 64);
  }
}

TEST_CASE("hash: one flipped bit anywhere, or one more byte, changes the digest", "[hash]") {
  auto data = bytesOf(3 * kHashLeafBytes + 17, 9);
  const Digest base = hashBuffer(data.data(), data.size(), 2);
  for (size_t at : {size_t{0}, kHashLeafBytes - 1, kHashLeafBytes, 2 * kHashLeafBytes + 5, data.size() - 1}) {
    data[at] ^= 0x10;
    CHECK(hashBuffer(data.data(), data.size(), 2) != base);
    data[at] ^= 0x10;
  }
  CHECK(hashBuffer(data.data(), data.size(), 1) == base);
  data.push_back(0);
  CHECK(hashBuffer(data.data(), data.size(), 1) != base);
  // The same bytes split differently are different buffers only through their length.
  CHECK(hashBuffer(data.data(), 0, 1) != hashBuffer(data.data(), 1, 1));
}

TEST_CASE("hash: leaves hashed one by one (as fetched chunks arrive) give the buffer's digest", "[hash]") {
  for (size_t n : {size_t{0}, size_t{5}, kHashLeafBytes, 2 * kHashLeafBytes + 3}) {
    INFO("n = " << n);
    auto data = bytesOf(n, 4);
    std::vector<Digest> leaves;
    for (size_t at = 0; at < n; at += kHashLeafBytes) {
      leaves.push_back(hashLeaf(data.data() + at, std::min(kHashLeafBytes, n - at)));
    }
    CHECK(hashFromLeaves(n, leaves.data(), leaves.size()) == hashBuffer(data.data(), n, 2));
  }
}
