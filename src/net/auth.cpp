#include "net/auth.hpp"

#include <sodium.h>

#include <cstring>

namespace pccl::net {

Status initCrypto() {
  static const int rc = sodium_init();  // thread-safe static init; returns 1 when already done
  if (rc < 0) return Status::systemError("libsodium failed to initialise");
  return Status::ok();
}

namespace {
void hashUpdate(crypto_generichash_state* st, const void* p, size_t n) {
  crypto_generichash_update(st, static_cast<const unsigned char*>(p), n);
}
void hashUpdate(crypto_generichash_state* st, const char* label) { hashUpdate(st, label, std::strlen(label)); }
}  // namespace

std::vector<uint8_t> Transcript::bytes() const {
  std::vector<uint8_t> t;
  t.reserve(kBytes);
  t.push_back(static_cast<uint8_t>(wire::kProtocolVersion & 0xff));
  t.push_back(static_cast<uint8_t>(wire::kProtocolVersion >> 8));
  t.push_back(client_role);
  t.push_back(static_cast<uint8_t>(client_role | 0x80));  // the server's role mirrors the client's
  t.push_back(client_flags);
  t.push_back(server_flags);
  for (const auto* part : {&client_nonce, &server_nonce, &client_kx, &server_kx}) {
    t.insert(t.end(), part->begin(), part->end());
  }
  return t;
}

SessionId Transcript::sessionId() const {
  const std::vector<uint8_t> t = bytes();
  crypto_generichash_state st;
  crypto_generichash_init(&st, nullptr, 0, 32);
  hashUpdate(&st, "pccl/session/v3");
  hashUpdate(&st, t.data(), t.size());
  SessionId id{};
  crypto_generichash_final(&st, id.data(), id.size());
  return id;
}

AuthKey::AuthKey(const std::string& secret, bool encrypt) : has_secret_(!secret.empty()), encrypt_(encrypt) {
  (void)initCrypto();
  crypto_generichash_state st;  // holds secret bytes in its block buffer until wiped below
  crypto_generichash_init(&st, nullptr, 0, key_.size());
  hashUpdate(&st, "pccl/auth/v1");
  hashUpdate(&st, secret.data(), secret.size());
  crypto_generichash_final(&st, key_.data(), key_.size());
  sodium_memzero(&st, sizeof st);
  key_.seal();
}

namespace {
std::vector<uint8_t> proofInput(AuthKey::Side side, const Transcript& t) {
  const char* label = side == AuthKey::Side::kClient ? "pccl client proof" : "pccl server proof";
  std::vector<uint8_t> in(label, label + std::strlen(label));
  const std::vector<uint8_t> tb = t.bytes();
  in.insert(in.end(), tb.begin(), tb.end());
  return in;
}
}  // namespace

wire::Mac AuthKey::proof(Side side, const Transcript& t) const {
  const std::vector<uint8_t> in = proofInput(side, t);
  wire::Mac mac{};
  crypto_auth_hmacsha256(mac.data(), in.data(), in.size(), key_.data());
  return mac;
}

bool AuthKey::verify(Side side, const Transcript& t, const wire::Mac& mac) const {
  const std::vector<uint8_t> in = proofInput(side, t);
  return crypto_auth_hmacsha256_verify(mac.data(), in.data(), in.size(), key_.data()) == 0;
}

SessionKeys AuthKey::sessionKeys(const Transcript& t, const SecretKey& ikm) const {
  const std::vector<uint8_t> tb = t.bytes();
  SessionKeys keys;
  for (auto [label, out] : {std::pair<const char*, SecretKey*>{"pccl/enc/v3/c2s", &keys.c2s},
                            std::pair<const char*, SecretKey*>{"pccl/enc/v3/s2c", &keys.s2c}}) {
    crypto_generichash_state st;
    crypto_generichash_init(&st, key_.data(), key_.size(), out->size());
    hashUpdate(&st, label);
    hashUpdate(&st, ikm.data(), ikm.size());
    hashUpdate(&st, tb.data(), tb.size());
    crypto_generichash_final(&st, out->data(), out->size());
    sodium_memzero(&st, sizeof st);
  }
  return keys;
}

EphemeralKx::EphemeralKx() {
  (void)initCrypto();
  static_assert(crypto_scalarmult_BYTES == 32 && crypto_scalarmult_SCALARBYTES == 32, "X25519 sizes");
  randombytes_buf(sk_.data(), sk_.size());
  crypto_scalarmult_base(pk_.data(), sk_.data());
}

EphemeralKx::~EphemeralKx() = default;  // sk_ wipes itself

Result<SecretKey> EphemeralKx::agree(const wire::KxKey& peer) {
  if (used_) return Status::internal("an ephemeral key was used twice");
  used_ = true;
  SecretKey shared;
  const int rc = crypto_scalarmult(shared.data(), sk_.data(), peer.data());
  sk_.wipe();
  if (rc != 0) return Status::protocol("the remote's ephemeral key is of small order (an all-zero shared secret)");
  return shared;
}

wire::Nonce randomNonce() {
  (void)initCrypto();
  wire::Nonce n{};
  randombytes_buf(n.data(), n.size());
  return n;
}

wire::Uuid randomUuid() {
  (void)initCrypto();
  wire::Uuid u{};
  randombytes_buf(u.data(), u.size());
  return u;
}

}  // namespace pccl::net
