// Authenticated encryption of one direction of one connection (libsodium), for encrypted runs
// (design.md §3; docs/security.md). Each direction has its own 32-byte key from the handshake
// (AuthKey::sessionKeys: the run key, the ephemeral X25519 result and the transcript), and each sealed
// message its own 96-bit nonce: a counter, little-endian, that both ends advance in step (TCP keeps the
// order), so nothing nonce-related travels.
//   AES-256-GCM where the CPU has AES-NI (and PCLMUL), ChaCha20-Poly1305-IETF otherwise.
// Messages are sealed detached (the 16-byte tag apart) and opened in place, so a payload can be read
// straight into its destination and decrypted there.
// The framing that uses it: net/link.hpp (control frames) and net/data_channel.hpp (data frames).
#ifndef PCCL_NET_AEAD_HPP_
#define PCCL_NET_AEAD_HPP_

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "pccl/status.hpp"

namespace pccl::net {

inline constexpr size_t kAeadTagBytes = 16;
using AeadKey = std::array<uint8_t, 32>;
using AeadTag = std::array<uint8_t, kAeadTagBytes>;

enum class Cipher : uint8_t { kChaCha20Poly1305 = 1, kAes256Gcm = 2 };
const char* cipherName(Cipher c);
// AES-256-GCM when this CPU runs it in hardware, else ChaCha20-Poly1305; PCCL_CIPHER=chacha20poly1305
// makes this process offer ChaCha20-Poly1305 only (PCCL_CIPHER=aes256gcm or unset: the default). Both
// ends of a connection must use the same: the handshake picks AES only when both offer it.
bool aesGcmAvailable();
Cipher preferredCipher();

// One direction: seal() on the sending end, open() on the receiving end, with the same key. Not
// thread-safe (one connection's io thread).
class AeadStream {
 public:
  AeadStream(Cipher cipher, const AeadKey& key);
  ~AeadStream();
  AeadStream(const AeadStream&) = delete;
  AeadStream& operator=(const AeadStream&) = delete;

  // data[0..n) := its encryption (in place), tag := its authenticator over `ad` and the ciphertext.
  Status seal(const uint8_t* ad, size_t ad_len, uint8_t* data, size_t n, AeadTag* tag);
  // `src` encrypted into `dst` (may equal src): for payloads the caller must not modify.
  Status sealTo(const uint8_t* ad, size_t ad_len, const uint8_t* src, size_t n, uint8_t* dst, AeadTag* tag);
  // data[0..n) := its decryption (in place) when `tag` authenticates it with `ad`; ProtocolError
  // (data then undefined) when it does not: tampering, a lost or replayed message, or another key.
  Status open(const uint8_t* ad, size_t ad_len, uint8_t* data, size_t n, const AeadTag& tag);
  // Consumes the nonce of one message that is dropped unread (so the next one opens in step). Its bytes
  // are not authenticated: only for a payload nobody uses.
  Status skip();

  Cipher cipher() const { return cipher_; }
  uint64_t messages() const { return counter_; }

 private:
  std::array<uint8_t, 12> nextNonce();

  Cipher cipher_;
  AeadKey key_;
  uint64_t counter_ = 0;
  struct AesState;
  std::unique_ptr<AesState> aes_;  // precomputed AES-GCM key schedule
};

}  // namespace pccl::net

#endif  // PCCL_NET_AEAD_HPP_
