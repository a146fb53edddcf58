// Shared-secret mutual authentication primitives (libsodium). See docs/protocol.md §Handshake.
//   key   = BLAKE2b-256("pccl/auth/v1" || secret)
//   proof = HMAC-SHA-256(key, label || version || client_role || server_role || client_nonce || server_nonce)
// with distinct labels for the client's and the server's proof, so neither can be reflected.
#ifndef PCCL_NET_AUTH_HPP_
#define PCCL_NET_AUTH_HPP_

#include <array>
#include <cstdint>
#include <string>

#include "pccl/status.hpp"
#include "wire/messages.hpp"

namespace pccl::net {

// Initialises libsodium once; thread-safe.
Status initCrypto();

class AuthKey {
 public:
  // The run's credentials and policy: its secret (empty = open run) and whether its connections are
  // encrypted (needs a secret: the keys derive from it).
  explicit AuthKey(const std::string& secret, bool encrypt = false);
  bool hasSecret() const { return has_secret_; }
  bool encrypt() const { return encrypt_; }

  enum class Side : uint8_t { kClient = 1, kServer = 2 };
  wire::Mac proof(Side side, uint8_t client_role, const wire::Nonce& client_nonce,
                  const wire::Nonce& server_nonce) const;
  bool verify(Side side, uint8_t client_role, const wire::Nonce& client_nonce, const wire::Nonce& server_nonce,
              const wire::Mac& mac) const;
  // A 32-byte key for one direction of one authenticated connection (net/aead.hpp):
  // BLAKE2b-256 keyed with the run's key over label || client_role || client_nonce || server_nonce.
  std::array<uint8_t, 32> sessionKey(const char* label, uint8_t client_role, const wire::Nonce& client_nonce,
                                     const wire::Nonce& server_nonce) const;

 private:
  std::array<uint8_t, 32> key_{};
  bool has_secret_ = false;
  bool encrypt_ = false;
};

wire::Nonce randomNonce();
wire::Uuid randomUuid();

}  // namespace pccl::net

#endif  // PCCL_NET_AUTH_HPP_
