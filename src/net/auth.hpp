// The handshake's cryptography (libsodium), docs/protocol.md §6 and §6.1:
//   K     = BLAKE2b-256("pccl/auth/v1" || secret)                      the run key
//   T     = version || roles || both flags || both nonces || both ephemeral X25519 public keys
//   proof = HMAC-SHA-256(K, label || T), distinct labels for the client's and the server's proof
//   ikm   = X25519(own ephemeral secret, peer's ephemeral public)      encrypted connections only
//   key   = BLAKE2b-256(key: K, "pccl/enc/v3/c2s" | "pccl/enc/v3/s2c" || ikm || T)
// The session keys need both the run key and the ephemeral secrets, which never leave the handshake, so
// a recording of a run stays sealed for whoever learns the secret later (forward secrecy).
#ifndef PCCL_NET_AUTH_HPP_
#define PCCL_NET_AUTH_HPP_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "net/secret_key.hpp"
#include "pccl/status.hpp"
#include "wire/messages.hpp"

namespace pccl::net {

// Initialises libsodium once; thread-safe.
Status initCrypto();

// Identifies one authenticated connection: BLAKE2b-256("pccl/session/v3" || T). Public (derived from
// bytes that travelled in clear), unique per connection (fresh nonces); other layers sign or MAC it to
// bind a claim to this connection.
using SessionId = std::array<uint8_t, 32>;

// The public bytes of one handshake, as both ends saw them.
struct Transcript {
  uint8_t client_role = 0;
  uint8_t client_flags = 0;  // the Hello's flags
  uint8_t server_flags = 0;  // the HelloReply's flags
  wire::Nonce client_nonce{};
  wire::Nonce server_nonce{};
  wire::KxKey client_kx{};
  wire::KxKey server_kx{};

  static constexpr size_t kBytes = 2 + 1 + 1 + 1 + 1 + 4 * 32;
  std::vector<uint8_t> bytes() const;  // T (docs/protocol.md §6)
  SessionId sessionId() const;
};

// The two directions' AEAD keys of one connection.
struct SessionKeys {
  SecretKey c2s;
  SecretKey s2c;
};

class AuthKey {
 public:
  // The run's credentials and policy: its secret (empty = open run) and whether its connections are
  // encrypted (needs a secret: the keys derive from it). Only K is kept (in locked memory); the caller
  // owns `secret` and should wipe it.
  explicit AuthKey(const std::string& secret, bool encrypt = false);
  AuthKey(const AuthKey&) = delete;
  AuthKey& operator=(const AuthKey&) = delete;
  bool hasSecret() const { return has_secret_; }
  bool encrypt() const { return encrypt_; }

  enum class Side : uint8_t { kClient = 1, kServer = 2 };
  wire::Mac proof(Side side, const Transcript& t) const;
  bool verify(Side side, const Transcript& t, const wire::Mac& mac) const;
  // Both directions' keys for the connection of `t`, from the X25519 result `ikm` and K.
  SessionKeys sessionKeys(const Transcript& t, const SecretKey& ikm) const;

 private:
  LockedBytes key_{32};
  bool has_secret_ = false;
  bool encrypt_ = false;
};

// An ephemeral X25519 key pair for one handshake. Its secret half is wiped by agree() and on destruction.
class EphemeralKx {
 public:
  EphemeralKx();  // a fresh key pair
  ~EphemeralKx();
  EphemeralKx(const EphemeralKx&) = delete;
  EphemeralKx& operator=(const EphemeralKx&) = delete;

  const wire::KxKey& publicKey() const { return pk_; }
  // X25519(our secret, peer), then the secret is wiped (a second call fails). ProtocolError for a peer
  // key of small order (the shared secret would be all zeros).
  Result<SecretKey> agree(const wire::KxKey& peer);

 private:
  wire::KxKey pk_{};
  SecretKey sk_;
  bool used_ = false;
};

wire::Nonce randomNonce();
wire::Uuid randomUuid();

}  // namespace pccl::net

#endif  // PCCL_NET_AUTH_HPP_
