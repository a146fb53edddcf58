// The content hash of shared-state buffers (design.md §6): two-level BLAKE2b-256 (libsodium).
//
//   leaf i  = BLAKE2b-256(bytes [i·L, min((i+1)·L, n)))             L = kHashLeafBytes
//   digest  = BLAKE2b-256(le64(n) ‖ le64(L) ‖ leaf 0 ‖ leaf 1 ‖ …)   (no leaves when n = 0)
//
// The leaves are independent, so a large buffer is hashed on several threads, and a range fetched
// from another peer can be checked leaf by leaf. Equal digests mean equal bytes (256-bit collision
// resistance); the length is part of the digest.
#ifndef PCCL_CODEC_HASH_HPP_
#define PCCL_CODEC_HASH_HPP_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace pccl::codec {

inline constexpr size_t kHashLeafBytes = size_t{1} << 20;

struct Digest {
  std::array<uint8_t, 32> bytes{};
  bool operator==(const Digest& o) const { return bytes == o.bytes; }
  bool operator!=(const Digest& o) const { return !(*this == o); }
  std::string hex() const;  // 64 lowercase hex digits
};

// BLAKE2b-256 of one leaf (at most kHashLeafBytes bytes).
Digest hashLeaf(const void* data, size_t n);
// The digest of n bytes, its leaves spread over `threads` threads (1 = the calling thread only).
Digest hashBuffer(const void* data, size_t n, unsigned threads = 1);
// The digest of n bytes from its leaves' digests (ceil(n / kHashLeafBytes) of them, in order): lets a
// receiver hash leaves as they arrive and finish at once.
Digest hashFromLeaves(uint64_t n, const Digest* leaves, size_t count);

}  // namespace pccl::codec

#endif  // PCCL_CODEC_HASH_HPP_
