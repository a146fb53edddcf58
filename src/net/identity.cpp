#include "net/identity.hpp"

#include <sodium.h>

#include "net/auth.hpp"
#include "wire/bytes.hpp"

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

std::vector<uint8_t> resumeProof(const SessionId& session, const wire::JoinRequest& m) {
  static constexpr char kLabel[] = "pccl resume v1";
  std::vector<uint8_t> out(kLabel, kLabel + sizeof kLabel);
  wire::ByteWriter w(&out);
  w.fixed(session);
  w.fixed(m.run_id);
  w.u64(m.term);
  w.fixed(m.peer_id);
  w.u64(m.epoch);
  w.u8(m.resume_flags);
  w.fixed(m.ring_key);
  w.u32(static_cast<uint32_t>(m.ring.size()));
  for (const wire::Uuid& id : m.ring) w.fixed(id);
  return out;
}

bool verifySignature(const wire::SignKey& pk, const uint8_t* msg, size_t n, const wire::Signature& sig) {
  (void)initCrypto();
  return crypto_sign_verify_detached(sig.data(), msg, n, pk.data()) == 0;
}

}  // namespace pccl::net
