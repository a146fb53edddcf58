#include "net/secret_key.hpp"

#include <sodium.h>

#include "net/auth.hpp"

namespace pccl::net {

SecretKey& SecretKey::operator=(SecretKey&& o) noexcept {
  if (this != &o) {
    bytes_ = o.bytes_;
    o.wipe();
  }
  return *this;
}

void SecretKey::wipe() { sodium_memzero(bytes_.data(), bytes_.size()); }

LockedBytes::LockedBytes(size_t n) : n_(n) {
  (void)initCrypto();
  p_ = static_cast<uint8_t*>(sodium_malloc(n));
  if (p_ == nullptr) {
    // No memory for the guard pages: plain memory, locked if the limit allows, still wiped at the end.
    fallback_ = std::make_unique<uint8_t[]>(n);
    p_ = fallback_.get();
    (void)sodium_mlock(p_, n);
  }
  sodium_memzero(p_, n);
}

LockedBytes::~LockedBytes() {
  if (fallback_) {
    (void)sodium_munlock(p_, n_);  // wipes, then unlocks
    sodium_memzero(p_, n_);
  } else {
    sodium_free(p_);  // makes the pages writable, wipes them, unmaps
  }
}

void LockedBytes::seal() {
  if (!fallback_) (void)sodium_mprotect_readonly(p_);
}

}  // namespace pccl::net
