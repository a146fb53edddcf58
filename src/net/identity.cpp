#include "net/identity.hpp"

#include <sodium.h>

#include "net/auth.hpp"

namespace pccl::net {

static_assert(crypto_sign_PUBLICKEYBYTES == 32 && crypto_sign_BYTES == 64, "Ed25519 sizes");

SigningKey::SigningKey() : sk_(crypto_sign_SECRETKEYBYTES) {
  (void)initCrypto();
  crypto_sign_keypair(pk_.data(), sk_.data());
  sk_.seal();
}

wire::Signature SigningKey::sign(const uint8_t* msg, size_t n) const {
  wire::Signature sig{};
  crypto_sign_detached(sig.data(), nullptr, msg, n, sk_.data());
  return sig;
}

bool verifySignature(const wire::SignKey& pk, const uint8_t* msg, size_t n, const wire::Signature& sig) {
  (void)initCrypto();
  return crypto_sign_verify_detached(sig.data(), msg, n, pk.data()) == 0;
}

}  // namespace pccl::net
