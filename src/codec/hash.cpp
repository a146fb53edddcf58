#include "codec/hash.hpp"

#include <sodium.h>

#include <algorithm>
#include <thread>
#include <vector>

namespace pccl::codec {

namespace {

// libsodium picks its fastest BLAKE2b for this CPU in sodium_init().
void ensureSodium() {
  static const int rc = sodium_init();
  (void)rc;
}

void putLe64(uint8_t* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(v >> (8 * i));
}

// Leaves [first, last) of the buffer into leaves[first..last).
void hashLeaves(const uint8_t* data, size_t n, size_t first, size_t last, Digest* leaves) {
  for (size_t i = first; i < last; ++i) {
    const size_t at = i * kHashLeafBytes;
    leaves[i] = hashLeaf(data + at, std::min(kHashLeafBytes, n - at));
  }
}

}  // namespace

std::string Digest::hex() const {
  static const char* kDigits = "0123456789abcdef";
  std::string s(64, '0');
  for (size_t i = 0; i < bytes.size(); ++i) {
    s[2 * i] = kDigits[bytes[i] >> 4];
    s[2 * i + 1] = kDigits[bytes[i] & 15];
  }
  return s;
}

Digest hashLeaf(const void* data, size_t n) {
  ensureSodium();
  Digest d;
  crypto_generichash(d.bytes.data(), d.bytes.size(), static_cast<const unsigned char*>(data), n, nullptr, 0);
  return d;
}

Digest hashBuffer(const void* data, size_t n, unsigned threads) {
  ensureSodium();
  const auto* bytes = static_cast<const uint8_t*>(data);
  const size_t count = (n + kHashLeafBytes - 1) / kHashLeafBytes;
  std::vector<Digest> leaves(count);
  const size_t workers = std::max<size_t>(1, std::min<size_t>(threads, count));
  if (workers == 1) {
    hashLeaves(bytes, n, 0, count, leaves.data());
  } else {
    std::vector<std::thread> pool;
    const size_t per = (count + workers - 1) / workers;
    for (size_t w = 1; w < workers; ++w) {
      const size_t first = std::min(count, w * per), last = std::min(count, (w + 1) * per);
      pool.emplace_back([=, &leaves] { hashLeaves(bytes, n, first, last, leaves.data()); });
    }
    hashLeaves(bytes, n, 0, std::min(count, per), leaves.data());
    for (auto& t : pool) t.join();
  }
  return hashFromLeaves(n, leaves.data(), leaves.size());
}

Digest hashFromLeaves(uint64_t n, const Digest* leaves, size_t count) {
  ensureSodium();
  crypto_generichash_state st;
  crypto_generichash_init(&st, nullptr, 0, 32);
  uint8_t header[16];
  putLe64(header, n);
  putLe64(header + 8, kHashLeafBytes);
  crypto_generichash_update(&st, header, sizeof header);
  for (size_t i = 0; i < count; ++i) crypto_generichash_update(&st, leaves[i].bytes.data(), leaves[i].bytes.size());
  Digest d;
  crypto_generichash_final(&st, d.bytes.data(), d.bytes.size());
  return d;
}

}  // namespace pccl::codec
