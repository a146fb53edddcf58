#include "net/aead.hpp"

#include <sodium.h>

#include <cstdlib>
#include <cstring>
#include <new>

#include "net/auth.hpp"

namespace pccl::net {

struct AeadStream::AesState {
  alignas(16) crypto_aead_aes256gcm_state state;
};

const char* cipherName(Cipher c) {
  return c == Cipher::kAes256Gcm ? "AES-256-GCM" : "ChaCha20-Poly1305";
}

bool aesGcmAvailable() {
  (void)initCrypto();
  return crypto_aead_aes256gcm_is_available() != 0;
}

Cipher preferredCipher() {
  const char* env = std::getenv("PCCL_CIPHER");
  const bool chacha_only = env != nullptr && std::strcmp(env, "chacha20poly1305") == 0;
  return aesGcmAvailable() && !chacha_only ? Cipher::kAes256Gcm : Cipher::kChaCha20Poly1305;
}

AeadStream::AeadStream(Cipher cipher, const AeadKey& key) : cipher_(cipher), key_(key) {
  (void)initCrypto();
  if (cipher_ == Cipher::kAes256Gcm && aesGcmAvailable()) {
    aes_ = std::make_unique<AesState>();
    crypto_aead_aes256gcm_beforenm(&aes_->state, key_.data());
  } else {
    cipher_ = Cipher::kChaCha20Poly1305;
  }
}

AeadStream::~AeadStream() {
  sodium_memzero(key_.data(), key_.size());
  if (aes_) sodium_memzero(&aes_->state, sizeof aes_->state);
}

std::array<uint8_t, 12> AeadStream::nextNonce() {
  std::array<uint8_t, 12> n{};
  for (int i = 0; i < 8; ++i) n[static_cast<size_t>(i)] = static_cast<uint8_t>(counter_ >> (8 * i));
  ++counter_;
  return n;
}

Status AeadStream::seal(const uint8_t* ad, size_t ad_len, uint8_t* data, size_t n, AeadTag* tag) {
  return sealTo(ad, ad_len, data, n, data, tag);
}

Status AeadStream::sealTo(const uint8_t* ad, size_t ad_len, const uint8_t* src, size_t n, uint8_t* dst,
                          AeadTag* tag) {
  if (counter_ == UINT64_MAX) return Status::internal("AEAD nonce space exhausted on this connection");
  uint8_t empty = 0;  // libsodium wants non-null buffers even for an empty message
  if (n == 0) src = dst = &empty;
  const auto nonce = nextNonce();
  unsigned long long tag_len = 0;
  const int rc = aes_ ? crypto_aead_aes256gcm_encrypt_detached_afternm(dst, tag->data(), &tag_len, src, n, ad, ad_len,
                                                                       nullptr, nonce.data(), &aes_->state)
                      : crypto_aead_chacha20poly1305_ietf_encrypt_detached(dst, tag->data(), &tag_len, src, n, ad,
                                                                           ad_len, nullptr, nonce.data(), key_.data());
  if (rc != 0) return Status::internal(std::string(cipherName(cipher_)) + " encryption failed");
  return Status::ok();
}

Status AeadStream::skip() {
  if (counter_ == UINT64_MAX) return Status::protocol("AEAD nonce space exhausted on this connection");
  ++counter_;
  return Status::ok();
}

Status AeadStream::open(const uint8_t* ad, size_t ad_len, uint8_t* data, size_t n, const AeadTag& tag) {
  if (counter_ == UINT64_MAX) return Status::protocol("AEAD nonce space exhausted on this connection");
  uint8_t empty = 0;
  if (n == 0) data = &empty;
  const auto nonce = nextNonce();
  const int rc = aes_ ? crypto_aead_aes256gcm_decrypt_detached_afternm(data, nullptr, data, n, tag.data(), ad, ad_len,
                                                                       nonce.data(), &aes_->state)
                      : crypto_aead_chacha20poly1305_ietf_decrypt_detached(data, nullptr, data, n, tag.data(), ad,
                                                                           ad_len, nonce.data(), key_.data());
  if (rc != 0) {
    return Status::protocol(std::string(cipherName(cipher_)) +
                            ": a frame failed authentication (tampered, replayed, reordered, or another key)");
  }
  return Status::ok();
}

}  // namespace pccl::net
