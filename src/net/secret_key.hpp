// Key material in memory (docs/security.md §"What stays in memory").
//   SecretKey:   32 bytes wiped (sodium_memzero) when destroyed or moved from; for the short-lived keys
//                of one handshake (an X25519 shared secret, the session keys before they are installed).
//   LockedBytes: long-lived keys (the run key, a peer's signing key) in memory from sodium_malloc:
//                locked into RAM (never swapped out), left out of core dumps, fenced by inaccessible
//                guard pages, wiped when freed. Read-only once sealed.
#ifndef PCCL_NET_SECRET_KEY_HPP_
#define PCCL_NET_SECRET_KEY_HPP_

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace pccl::net {

class SecretKey {
 public:
  static constexpr size_t kSize = 32;
  SecretKey() = default;
  ~SecretKey() { wipe(); }
  SecretKey(const SecretKey&) = delete;
  SecretKey& operator=(const SecretKey&) = delete;
  SecretKey(SecretKey&& o) noexcept : bytes_(o.bytes_) { o.wipe(); }
  SecretKey& operator=(SecretKey&& o) noexcept;

  uint8_t* data() { return bytes_.data(); }
  const uint8_t* data() const { return bytes_.data(); }
  static constexpr size_t size() { return kSize; }
  const std::array<uint8_t, kSize>& array() const { return bytes_; }
  void wipe();

 private:
  std::array<uint8_t, kSize> bytes_{};
};

class LockedBytes {
 public:
  explicit LockedBytes(size_t n);  // zero-filled, writable until seal()
  ~LockedBytes();
  LockedBytes(const LockedBytes&) = delete;
  LockedBytes& operator=(const LockedBytes&) = delete;

  uint8_t* data() { return p_; }
  const uint8_t* data() const { return p_; }
  size_t size() const { return n_; }
  void seal();  // read-only from now on (a stray write faults instead of altering the key)

 private:
  uint8_t* p_ = nullptr;
  size_t n_ = 0;
  std::unique_ptr<uint8_t[]> fallback_;  // only if sodium_malloc failed (no memory for its guard pages)
};

}  // namespace pccl::net

#endif  // PCCL_NET_SECRET_KEY_HPP_
