#include "net/handshake.hpp"

#include <fmt/format.h>

#include <utility>
#include <vector>

#include "net/frame_io.hpp"
#include "wire/messages.hpp"

namespace pccl::net {

namespace {
// Hello / HelloReply flags (docs/protocol.md §4).
constexpr uint8_t kFlagSecret = 1;   // Hello: the client holds a secret; reply: the server requires one
constexpr uint8_t kFlagEncrypt = 2;  // this side encrypts the connection (both must)
constexpr uint8_t kFlagAes = 4;      // Hello: the client can run AES-256-GCM; reply: AES-256-GCM chosen

uint8_t helloFlags(const AuthKey& key) {
  uint8_t f = key.hasSecret() ? kFlagSecret : 0;
  if (key.encrypt()) f |= kFlagEncrypt;
  if (key.encrypt() && preferredCipher() == Cipher::kAes256Gcm) f |= kFlagAes;
  return f;
}

// Both ends of every connection of a run must agree on encryption: no side silently talks in clear.
Status checkEncryption(const AuthKey& key, uint8_t remote_flags, const std::string& remote) {
  const bool remote_encrypts = (remote_flags & kFlagEncrypt) != 0;
  if (key.encrypt() && !key.hasSecret()) {
    return Status::invalidArgument("encryption needs a shared secret (its keys derive from it) and none is configured");
  }
  if (remote_encrypts == key.encrypt()) return Status::ok();
  return Status::authFailed(fmt::format(
      "encryption setting mismatch: {} {} its connections and this process {} (every process of a run must set "
      "encrypt alike)",
      remote, remote_encrypts ? "encrypts" : "does not encrypt", key.encrypt() ? "requires encryption" : "does not"));
}

// The connection's two AEAD streams, keyed per direction from the secret and both nonces.
SessionCrypto sessionCrypto(const AuthKey& key, AuthKey::Side side, bool aes, uint8_t role, const wire::Nonce& cn,
                            const wire::Nonce& sn) {
  const Cipher cipher = aes ? Cipher::kAes256Gcm : Cipher::kChaCha20Poly1305;
  auto c2s = std::make_unique<AeadStream>(cipher, key.sessionKey("pccl/enc/v1/c2s", role, cn, sn));
  auto s2c = std::make_unique<AeadStream>(cipher, key.sessionKey("pccl/enc/v1/s2c", role, cn, sn));
  SessionCrypto c;
  if (side == AuthKey::Side::kClient) {
    c.send = std::move(c2s);
    c.recv = std::move(s2c);
  } else {
    c.send = std::move(s2c);
    c.recv = std::move(c2s);
  }
  return c;
}
}  // namespace


void asyncClientHandshake(Tcp::socket socket, ClientHandshake params, ClientDone done) {
  auto shared_done = std::make_shared<ClientDone>(std::move(done));
  auto io = std::make_shared<FrameIo>(std::move(socket), params.timeout,
                                      [shared_done](Status s) { (*shared_done)(std::move(s)); });
  io->armDeadline();
  auto p = std::make_shared<ClientHandshake>(std::move(params));
  wire::Hello hello;
  hello.role = static_cast<uint8_t>(p->role);
  hello.flags = helloFlags(*p->key);
  hello.nonce = randomNonce();
  const wire::Nonce cn = hello.nonce;

  io->write(wire::encodeFrame(hello, 0), [io, p, cn, shared_done] {
    io->readFrame([io, p, cn, shared_done](Status s, const wire::FrameHeader& h, const std::vector<uint8_t>& payload) {
      if (!s.isOk()) return io->fail(s.withContext(p->server_name));
      auto reply = expectFrame<wire::HelloReply>(h, payload, p->server_name);
      if (!reply.isOk()) return io->fail(reply.status());
      bool server_requires = (reply->flags & kFlagSecret) != 0;
      if (server_requires && !p->key->hasSecret()) {
        return io->fail(Status::authFailed(p->server_name +
                                           " requires a shared secret and none is configured here "
                                           "(set the config's secret, PCCL_SECRET or PCCL_SECRET_FILE)"));
      }
      if (!server_requires && p->key->hasSecret()) {
        return io->fail(Status::authFailed(p->server_name +
                                           " runs without a secret but one is configured here; refusing an "
                                           "unauthenticated server"));
      }
      Status agreed = checkEncryption(*p->key, reply->flags, p->server_name);
      if (!agreed.isOk()) return io->fail(agreed);
      const wire::Nonce sn = reply->nonce;
      const bool aes = (reply->flags & kFlagAes) != 0;
      if (aes && (helloFlags(*p->key) & kFlagAes) == 0) {
        return io->fail(Status::protocol(p->server_name + " chose AES-256-GCM, which this process did not offer"));
      }
      wire::AuthProof proof;
      proof.mac = p->key->proof(AuthKey::Side::kClient, static_cast<uint8_t>(p->role), cn, sn);
      io->write(wire::encodeFrame(proof, 0), [io, p, cn, sn, aes, shared_done] {
        io->readFrame([io, p, cn, sn, aes, shared_done](Status s2, const wire::FrameHeader& h2,
                                                   const std::vector<uint8_t>& payload2) {
          if (!s2.isOk()) return io->fail(s2.withContext(p->server_name));
          auto ok = expectFrame<wire::AuthOk>(h2, payload2, p->server_name);
          if (!ok.isOk()) return io->fail(ok.status());
          if (!p->key->verify(AuthKey::Side::kServer, static_cast<uint8_t>(p->role), cn, sn, ok->mac)) {
            return io->fail(Status::authFailed(p->server_name + " failed to prove knowledge of the shared secret"));
          }
          if (p->key->encrypt()) io->secure(sessionCrypto(*p->key, AuthKey::Side::kClient, aes, static_cast<uint8_t>(p->role), cn, sn));
          (*shared_done)(io->release());
        });
      });
    });
  });
}

void asyncDial(asio::io_context& io, const HostPort& to, ClientHandshake params, ClientDone done) {
  auto resolver = std::make_shared<Tcp::resolver>(io);
  auto socket = std::make_shared<Tcp::socket>(io);
  auto timer = std::make_shared<asio::steady_timer>(io);
  auto shared_done = std::make_shared<ClientDone>(std::move(done));
  auto timed_out = std::make_shared<bool>(false);
  timer->expires_after(params.timeout);
  timer->async_wait([socket, resolver, timed_out](const asio::error_code& ec) {
    if (ec) return;
    *timed_out = true;
    resolver->cancel();
    asio::error_code ignored;
    socket->close(ignored);
  });
  auto p = std::make_shared<ClientHandshake>(std::move(params));
  const std::string where = to.toString();
  auto failed = [p, timed_out, where](const char* what, const asio::error_code& ec) {
    if (*timed_out) {
      return Status::timeout(fmt::format("no connection to {} within {} ms", where, p->timeout.count()));
    }
    return Status::peerLost(fmt::format("{} {} failed: {}", what, where, ec.message()));
  };
  resolver->async_resolve(to.host, std::to_string(to.port), [resolver, socket, timer, shared_done, p, failed](
                                                                 const asio::error_code& ec, Tcp::resolver::results_type res) {
    if (ec) {
      timer->cancel();
      return (*shared_done)(failed("resolving", ec));
    }
    asio::async_connect(*socket, res, [socket, timer, shared_done, p, failed](const asio::error_code& ec2,
                                                                               const Tcp::endpoint&) {
      timer->cancel();
      if (ec2) return (*shared_done)(failed("connecting to", ec2));
      asyncClientHandshake(std::move(*socket), *p, [shared_done](Result<Link> r) { (*shared_done)(std::move(r)); });
    });
  });
}

void asyncServerHandshake(Tcp::socket socket, ServerHandshake params, ServerDone done) {
  auto shared_done = std::make_shared<ServerDone>(std::move(done));
  auto io = std::make_shared<FrameIo>(std::move(socket), params.timeout,
                                          [shared_done](Status s) { (*shared_done)(std::move(s)); });
  io->armDeadline();
  auto key = params.key;
  io->readFrame([io, key, shared_done](Status s, const wire::FrameHeader& h, const std::vector<uint8_t>& payload) {
    if (s.code() == Code::kVersionMismatch) return io->rejectWith(s);
    if (!s.isOk()) return io->fail(s);
    auto hello = expectFrame<wire::Hello>(h, payload, "client");
    if (!hello.isOk()) return io->rejectWith(hello.status());
    if (hello->role < static_cast<uint8_t>(wire::Role::kPeerToMaster) ||
        hello->role > static_cast<uint8_t>(wire::Role::kStateFetch)) {
      return io->rejectWith(Status::protocol(fmt::format("unknown connection role {}", hello->role)));
    }
    Status agreed = checkEncryption(*key, hello->flags, "the client");
    if (!agreed.isOk()) return io->rejectWith(agreed);
    const wire::Nonce cn = hello->nonce;
    const uint8_t role = hello->role;
    wire::HelloReply reply;
    reply.flags = helloFlags(*key);
    // AES-256-GCM only when both ends run it in hardware (and want it).
    const bool aes = (hello->flags & kFlagAes) != 0 && (reply.flags & kFlagAes) != 0;
    if (!aes) reply.flags = static_cast<uint8_t>(reply.flags & ~kFlagAes);
    reply.nonce = randomNonce();
    const wire::Nonce sn = reply.nonce;
    io->write(wire::encodeFrame(reply, 0), [io, key, cn, sn, role, aes, shared_done] {
      io->readFrame([io, key, cn, sn, role, aes, shared_done](Status s2, const wire::FrameHeader& h2,
                                                         const std::vector<uint8_t>& payload2) {
        if (!s2.isOk()) return io->fail(s2);
        auto proof = expectFrame<wire::AuthProof>(h2, payload2, "client");
        if (!proof.isOk()) return io->fail(proof.status());
        if (!key->verify(AuthKey::Side::kClient, role, cn, sn, proof->mac)) {
          return io->rejectWith(Status::authFailed("authentication failed: wrong shared secret"));
        }
        wire::AuthOk ok;
        ok.mac = key->proof(AuthKey::Side::kServer, role, cn, sn);
        io->write(wire::encodeFrame(ok, 0), [io, key, cn, sn, role, aes, shared_done] {
          if (key->encrypt()) io->secure(sessionCrypto(*key, AuthKey::Side::kServer, aes, role, cn, sn));
          (*shared_done)(Authenticated{io->release(), static_cast<wire::Role>(role)});
        });
      });
    });
  });
}

}  // namespace pccl::net
