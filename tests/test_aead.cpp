// The AEAD primitive for encrypted runs (net/aead.hpp): both ciphers round-trip in place and out of
// place; tampering with the data, the authenticated header or the tag, replaying or reordering
// messages, or another key are all refused; both ends derive matching per-direction keys, which change
// with every ephemeral X25519 exchange.
#include <catch2/catch.hpp>

#include <numeric>
#include <vector>

#include "net/aead.hpp"
#include "net/auth.hpp"

using namespace pccl;
using namespace pccl::net;

namespace {

AeadKey keyOf(uint8_t v) {
  AeadKey k{};
  k.fill(v);
  return k;
}

std::vector<uint8_t> bytes(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 31u);
  return v;
}

// One message sealed in place: its ciphertext and tag.
struct Sealed {
  std::vector<uint8_t> data;
  AeadTag tag{};
};

// Seals a fresh copy of PLAIN under HEADER. The copy is built here, never assigned over an existing
// buffer: GCC 12's -O3 -Warray-bounds misreads vector copy-assignment into a reused vector.
Sealed sealCopy(AeadStream& tx, const std::vector<uint8_t>& header, const std::vector<uint8_t>& plain) {
  Sealed s{plain, {}};
  REQUIRE(tx.seal(header.data(), header.size(), s.data.data(), s.data.size(), &s.tag).isOk());
  return s;
}

}  // namespace

TEST_CASE("aead: both ciphers round-trip, in place and out of place, message after message", "[aead]") {
  std::vector<Cipher> ciphers = {Cipher::kChaCha20Poly1305};
  if (aesGcmAvailable()) ciphers.push_back(Cipher::kAes256Gcm);
  for (Cipher c : ciphers) {
    INFO(cipherName(c));
    AeadStream tx(c, keyOf(7)), rx(c, keyOf(7));
    CHECK(tx.cipher() == c);
    const std::vector<uint8_t> header = bytes(20, 1);
    for (size_t n : {size_t{0}, size_t{1}, size_t{24}, size_t{4096}, size_t{1} << 20}) {
      const std::vector<uint8_t> plain = bytes(n, static_cast<uint8_t>(n));
      std::vector<uint8_t> wire(n);
      AeadTag tag{};
      REQUIRE(tx.sealTo(header.data(), header.size(), plain.data(), n, wire.data(), &tag).isOk());
      if (n >= 16) CHECK(wire != plain);
      REQUIRE(rx.open(header.data(), header.size(), wire.data(), n, tag).isOk());
      CHECK(wire == plain);
      std::vector<uint8_t> inplace = plain;
      REQUIRE(tx.seal(nullptr, 0, inplace.data(), n, &tag).isOk());
      REQUIRE(rx.open(nullptr, 0, inplace.data(), n, tag).isOk());
      CHECK(inplace == plain);
    }
    CHECK(tx.messages() == rx.messages());
  }
}

TEST_CASE("aead: tampering, replay, reordering and another key are refused", "[aead]") {
  for (Cipher c : {Cipher::kChaCha20Poly1305, preferredCipher()}) {
    INFO(cipherName(c));
    const std::vector<uint8_t> header = bytes(20, 3), plain = bytes(1000, 9);
    {  // a flipped data bit
      AeadStream tx(c, keyOf(1)), rx(c, keyOf(1));
      Sealed m = sealCopy(tx, header, plain);
      m.data[500] ^= 1;
      Status s = rx.open(header.data(), header.size(), m.data.data(), m.data.size(), m.tag);
      CHECK(s.code() == Code::kProtocolError);
      CHECK_THAT(s.message(), Catch::Contains("authentication"));
    }
    {  // a changed header (authenticated, not encrypted)
      AeadStream tx(c, keyOf(1)), rx(c, keyOf(1));
      Sealed m = sealCopy(tx, header, plain);
      std::vector<uint8_t> other = header;
      other[4] ^= 0x80;
      CHECK_FALSE(rx.open(other.data(), other.size(), m.data.data(), m.data.size(), m.tag).isOk());
    }
    {  // a flipped tag bit
      AeadStream tx(c, keyOf(1)), rx(c, keyOf(1));
      Sealed m = sealCopy(tx, header, plain);
      m.tag[0] ^= 1;
      CHECK_FALSE(rx.open(header.data(), header.size(), m.data.data(), m.data.size(), m.tag).isOk());
    }
    {  // replay: the same message twice (the second is checked under the next nonce)
      AeadStream tx(c, keyOf(1)), rx(c, keyOf(1));
      Sealed m = sealCopy(tx, header, plain);
      std::vector<uint8_t> copy = m.data;
      REQUIRE(rx.open(header.data(), header.size(), m.data.data(), m.data.size(), m.tag).isOk());
      CHECK_FALSE(rx.open(header.data(), header.size(), copy.data(), copy.size(), m.tag).isOk());
    }
    {  // reordering: the second message first
      AeadStream tx(c, keyOf(1)), rx(c, keyOf(1));
      Sealed first = sealCopy(tx, header, plain);
      Sealed second = sealCopy(tx, header, plain);
      CHECK_FALSE(rx.open(header.data(), header.size(), second.data.data(), second.data.size(), second.tag).isOk());
    }
    {  // another key
      AeadStream tx(c, keyOf(1)), rx(c, keyOf(2));
      Sealed m = sealCopy(tx, header, plain);
      CHECK_FALSE(rx.open(header.data(), header.size(), m.data.data(), m.data.size(), m.tag).isOk());
    }
  }
}

namespace {

// The transcript of an encrypted ring connection with fresh nonces and fresh ephemeral keys; `ikm_c` and
// `ikm_s` are what the client and the server compute from it.
struct Exchange {
  Transcript t;
  SecretKey ikm_c;
  SecretKey ikm_s;
};

Exchange exchange(const wire::Nonce& cn, const wire::Nonce& sn) {
  Exchange e;
  EphemeralKx client, server;
  e.t.client_role = 2;
  e.t.client_flags = 1 | 2;
  e.t.server_flags = 1 | 2;
  e.t.client_nonce = cn;
  e.t.server_nonce = sn;
  e.t.client_kx = client.publicKey();
  e.t.server_kx = server.publicKey();
  auto c = client.agree(e.t.server_kx);
  auto s = server.agree(e.t.client_kx);
  REQUIRE(c.isOk());
  REQUIRE(s.isOk());
  e.ikm_c = std::move(c).value();
  e.ikm_s = std::move(s).value();
  return e;
}

}  // namespace

TEST_CASE("aead: session keys match across the two ends and differ per direction, connection, secret and "
          "ephemeral exchange", "[aead]") {
  REQUIRE(initCrypto().isOk());
  AuthKey a("s3cret"), b("s3cret"), other("different");
  const wire::Nonce cn = randomNonce(), sn = randomNonce();
  Exchange e = exchange(cn, sn);
  CHECK(e.ikm_c.array() == e.ikm_s.array());
  const SessionKeys kc = a.sessionKeys(e.t, e.ikm_c);
  const SessionKeys ks = b.sessionKeys(e.t, e.ikm_s);
  const auto c2s = kc.c2s.array();
  CHECK(c2s == ks.c2s.array());
  CHECK(kc.s2c.array() == ks.s2c.array());
  CHECK(c2s != kc.s2c.array());
  CHECK(c2s != other.sessionKeys(e.t, e.ikm_c).c2s.array());
  Transcript role = e.t;
  role.client_role = 1;
  CHECK(c2s != a.sessionKeys(role, e.ikm_c).c2s.array());
  Transcript nonce = e.t;
  nonce.server_nonce = randomNonce();
  CHECK(c2s != a.sessionKeys(nonce, e.ikm_c).c2s.array());

  // Same secret, same nonces, fresh ephemeral keys: other session keys. What a recording shows plus the
  // secret (transcript and K, but no X25519 result) does not give them: a guessed ikm gives others.
  Exchange again = exchange(cn, sn);
  CHECK(a.sessionKeys(again.t, again.ikm_c).c2s.array() != c2s);
  CHECK(a.sessionKeys(e.t, SecretKey{}).c2s.array() != c2s);
  CHECK(a.sessionKeys(e.t, again.ikm_c).c2s.array() != c2s);
}

TEST_CASE("aead: an ephemeral key is used once, and a small-order peer key is refused", "[aead]") {
  REQUIRE(initCrypto().isOk());
  EphemeralKx peer;
  EphemeralKx once;
  CHECK(once.agree(peer.publicKey()).isOk());
  auto twice = once.agree(peer.publicKey());  // its secret was wiped by the first agreement
  REQUIRE_FALSE(twice.isOk());
  CHECK(twice.status().code() == Code::kInternalError);
  EphemeralKx fresh;
  auto zero = fresh.agree(wire::KxKey{});  // the identity point: an all-zero shared secret
  REQUIRE_FALSE(zero.isOk());
  CHECK(zero.status().code() == Code::kProtocolError);
}
