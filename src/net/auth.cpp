#include "net/auth.hpp"

#include <sodium.h>

#include <cstring>
#include <vector>

namespace pccl::net {

Status initCrypto() {
  static const int rc = sodium_init();  // thread-safe static init; returns 1 when already done
  if (rc < 0) return Status::systemError("libsodium failed to initialise");
  return Status::ok();
}

AuthKey::AuthKey(const std::string& secret, bool encrypt) : has_secret_(!secret.empty()), encrypt_(encrypt) {
  (void)initCrypto();
  static constexpr char kLabel[] = "pccl/auth/v1";
  crypto_generichash_state st;
  crypto_generichash_init(&st, nullptr, 0, key_.size());
  crypto_generichash_update(&st, reinterpret_cast<const unsigned char*>(kLabel), sizeof(kLabel) - 1);
  crypto_generichash_update(&st, reinterpret_cast<const unsigned char*>(secret.data()), secret.size());
  crypto_generichash_final(&st, key_.data(), key_.size());
}

namespace {
std::vector<uint8_t> transcript(AuthKey::Side side, uint8_t client_role, const wire::Nonce& cn,
                                const wire::Nonce& sn) {
  const char* label = side == AuthKey::Side::kClient ? "pccl client proof" : "pccl server proof";
  std::vector<uint8_t> t(label, label + std::strlen(label));
  t.push_back(static_cast<uint8_t>(wire::kProtocolVersion & 0xff));
  t.push_back(static_cast<uint8_t>(wire::kProtocolVersion >> 8));
  t.push_back(client_role);
  t.push_back(static_cast<uint8_t>(client_role | 0x80));  // the server's role mirrors the client's
  t.insert(t.end(), cn.begin(), cn.end());
  t.insert(t.end(), sn.begin(), sn.end());
  return t;
}
}  // namespace

wire::Mac AuthKey::proof(Side side, uint8_t client_role, const wire::Nonce& cn, const wire::Nonce& sn) const {
  std::vector<uint8_t> t = transcript(side, client_role, cn, sn);
  wire::Mac mac{};
  crypto_auth_hmacsha256(mac.data(), t.data(), t.size(), key_.data());
  return mac;
}

bool AuthKey::verify(Side side, uint8_t client_role, const wire::Nonce& cn, const wire::Nonce& sn,
                     const wire::Mac& mac) const {
  std::vector<uint8_t> t = transcript(side, client_role, cn, sn);
  return crypto_auth_hmacsha256_verify(mac.data(), t.data(), t.size(), key_.data()) == 0;
}

std::array<uint8_t, 32> AuthKey::sessionKey(const char* label, uint8_t client_role, const wire::Nonce& cn,
                                            const wire::Nonce& sn) const {
  std::vector<uint8_t> t(label, label + std::strlen(label));
  t.push_back(client_role);
  t.insert(t.end(), cn.begin(), cn.end());
  t.insert(t.end(), sn.begin(), sn.end());
  std::array<uint8_t, 32> out{};
  crypto_generichash(out.data(), out.size(), t.data(), t.size(), key_.data(), key_.size());
  return out;
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
