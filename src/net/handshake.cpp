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

// The connection's two AEAD streams (one per direction) from its session keys.
SessionCrypto sessionCrypto(SessionKeys keys, AuthKey::Side side, bool aes) {
  const Cipher cipher = aes ? Cipher::kAes256Gcm : Cipher::kChaCha20Poly1305;
  auto c2s = std::make_unique<AeadStream>(cipher, keys.c2s.array());
  auto s2c = std::make_unique<AeadStream>(cipher, keys.s2c.array());
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

// One client handshake: Hello, then HelloReply, AuthProof, AuthOk. Its FrameIo's failure callback holds
// only `done`, so nothing keeps the run alive once no operation is pending.
class ClientRun : public std::enable_shared_from_this<ClientRun> {
 public:
  ClientRun(Tcp::socket socket, ClientHandshake params, ClientDone done)
      : p_(std::move(params)), done_(std::make_shared<ClientDone>(std::move(done))) {
    io_ = std::make_shared<FrameIo>(std::move(socket), p_.timeout, [d = done_](Status s) { (*d)(std::move(s)); });
  }

  void start() {
    io_->armDeadline();
    wire::Hello hello;
    hello.role = static_cast<uint8_t>(p_.role);
    hello.flags = helloFlags(*p_.key);
    hello.nonce = randomNonce();
    if (p_.key->encrypt()) {
      kx_ = std::make_unique<EphemeralKx>();
      hello.kx = kx_->publicKey();
    }
    t_.client_role = hello.role;
    t_.client_flags = hello.flags;
    t_.client_nonce = hello.nonce;
    t_.client_kx = hello.kx;
    auto self = shared_from_this();
    io_->write(wire::encodeFrame(hello, 0), [self] {
      self->io_->readFrame([self](Status s, const wire::FrameHeader& h, const std::vector<uint8_t>& payload) {
        if (!s.isOk()) return self->io_->fail(s.withContext(self->p_.server_name));
        auto reply = expectFrame<wire::HelloReply>(h, payload, self->p_.server_name);
        if (!reply.isOk()) return self->io_->fail(reply.status());
        self->onReply(*reply);
      });
    });
  }

 private:
  Status checkReply(const wire::HelloReply& reply) const {
    const bool server_requires = (reply.flags & kFlagSecret) != 0;
    if (server_requires && !p_.key->hasSecret()) {
      return Status::authFailed(p_.server_name +
                                " requires a shared secret and none is configured here "
                                "(set the config's secret, PCCL_SECRET or PCCL_SECRET_FILE)");
    }
    if (!server_requires && p_.key->hasSecret()) {
      return Status::authFailed(p_.server_name +
                                " runs without a secret but one is configured here; refusing an "
                                "unauthenticated server");
    }
    PCCL_RETURN_IF_ERROR(checkEncryption(*p_.key, reply.flags, p_.server_name));
    if ((reply.flags & kFlagAes) != 0 && (t_.client_flags & kFlagAes) == 0) {
      return Status::protocol(p_.server_name + " chose AES-256-GCM, which this process did not offer");
    }
    return Status::ok();
  }

  void onReply(const wire::HelloReply& reply) {
    Status checked = checkReply(reply);
    if (!checked.isOk()) return io_->fail(checked);
    t_.server_flags = reply.flags;
    t_.server_nonce = reply.nonce;
    t_.server_kx = reply.kx;
    if (kx_) {
      auto ikm = kx_->agree(reply.kx);  // wipes our ephemeral secret
      kx_.reset();
      if (!ikm.isOk()) return io_->fail(ikm.status().withContext(p_.server_name));
      keys_ = std::make_unique<SessionKeys>(p_.key->sessionKeys(t_, *ikm));
    }
    wire::AuthProof proof;
    proof.mac = p_.key->proof(AuthKey::Side::kClient, t_);
    auto self = shared_from_this();
    io_->write(wire::encodeFrame(proof, 0), [self] {
      self->io_->readFrame([self](Status s, const wire::FrameHeader& h, const std::vector<uint8_t>& payload) {
        if (!s.isOk()) return self->io_->fail(s.withContext(self->p_.server_name));
        auto ok = expectFrame<wire::AuthOk>(h, payload, self->p_.server_name);
        if (!ok.isOk()) return self->io_->fail(ok.status());
        self->onOk(*ok);
      });
    });
  }

  void onOk(const wire::AuthOk& ok) {
    if (!p_.key->verify(AuthKey::Side::kServer, t_, ok.mac)) {
      return io_->fail(Status::authFailed(p_.server_name + " failed to prove knowledge of the shared secret"));
    }
    SessionCrypto crypto;
    if (keys_) crypto = sessionCrypto(std::move(*keys_), AuthKey::Side::kClient, (t_.server_flags & kFlagAes) != 0);
    keys_.reset();
    io_->establish(t_.sessionId(), std::move(crypto));
    (*done_)(io_->release());
  }

  ClientHandshake p_;
  std::shared_ptr<ClientDone> done_;
  std::shared_ptr<FrameIo> io_;
  Transcript t_;
  std::unique_ptr<EphemeralKx> kx_;     // encrypted connections, until the HelloReply
  std::unique_ptr<SessionKeys> keys_;   // encrypted connections, until AuthOk is verified
};

// One server handshake: Hello, HelloReply, then AuthProof, AuthOk (or Error).
class ServerRun : public std::enable_shared_from_this<ServerRun> {
 public:
  ServerRun(Tcp::socket socket, ServerHandshake params, ServerDone done)
      : p_(std::move(params)), done_(std::make_shared<ServerDone>(std::move(done))) {
    io_ = std::make_shared<FrameIo>(std::move(socket), p_.timeout, [d = done_](Status s) { (*d)(std::move(s)); });
  }

  void start() {
    io_->armDeadline();
    auto self = shared_from_this();
    io_->readFrame([self](Status s, const wire::FrameHeader& h, const std::vector<uint8_t>& payload) {
      if (s.code() == Code::kVersionMismatch) return self->io_->rejectWith(s);
      if (!s.isOk()) return self->io_->fail(s);
      auto hello = expectFrame<wire::Hello>(h, payload, "client");
      if (!hello.isOk()) return self->io_->rejectWith(hello.status());
      self->onHello(*hello);
    });
  }

 private:
  void onHello(const wire::Hello& hello) {
    if (hello.role < static_cast<uint8_t>(wire::Role::kPeerToMaster) ||
        hello.role > static_cast<uint8_t>(wire::Role::kRelay)) {
      return io_->rejectWith(Status::protocol(fmt::format("unknown connection role {}", hello.role)));
    }
    Status agreed = checkEncryption(*p_.key, hello.flags, "the client");
    if (!agreed.isOk()) return io_->rejectWith(agreed);
    wire::HelloReply reply;
    reply.flags = helloFlags(*p_.key);
    // AES-256-GCM only when both ends run it in hardware (and want it).
    if ((hello.flags & kFlagAes) == 0) reply.flags = static_cast<uint8_t>(reply.flags & ~kFlagAes);
    reply.nonce = randomNonce();
    if (p_.key->encrypt()) {
      kx_ = std::make_unique<EphemeralKx>();
      reply.kx = kx_->publicKey();
    }
    t_.client_role = hello.role;
    t_.client_flags = hello.flags;
    t_.client_nonce = hello.nonce;
    t_.client_kx = hello.kx;
    t_.server_flags = reply.flags;
    t_.server_nonce = reply.nonce;
    t_.server_kx = reply.kx;
    auto self = shared_from_this();
    io_->write(wire::encodeFrame(reply, 0), [self] {
      self->io_->readFrame([self](Status s, const wire::FrameHeader& h, const std::vector<uint8_t>& payload) {
        if (!s.isOk()) return self->io_->fail(s);
        auto proof = expectFrame<wire::AuthProof>(h, payload, "client");
        if (!proof.isOk()) return self->io_->fail(proof.status());
        self->onProof(*proof);
      });
    });
  }

  void onProof(const wire::AuthProof& proof) {
    if (!p_.key->verify(AuthKey::Side::kClient, t_, proof.mac)) {
      kx_.reset();
      return io_->rejectWith(
          Status::authFailed("authentication failed: wrong shared secret (or the handshake was altered on the way)"));
    }
    // Only now, for a client that proved the secret, the X25519 agreement (it wipes our ephemeral secret).
    std::shared_ptr<SessionKeys> keys;
    if (kx_) {
      auto ikm = kx_->agree(t_.client_kx);
      kx_.reset();
      if (!ikm.isOk()) return io_->fail(ikm.status());
      keys = std::make_shared<SessionKeys>(p_.key->sessionKeys(t_, *ikm));
    }
    wire::AuthOk ok;
    ok.mac = p_.key->proof(AuthKey::Side::kServer, t_);
    auto self = shared_from_this();
    io_->write(wire::encodeFrame(ok, 0), [self, keys] {
      const bool aes = (self->t_.server_flags & kFlagAes) != 0;
      SessionCrypto crypto;
      if (keys) crypto = sessionCrypto(std::move(*keys), AuthKey::Side::kServer, aes);
      self->io_->establish(self->t_.sessionId(), std::move(crypto));
      (*self->done_)(Authenticated{self->io_->release(), static_cast<wire::Role>(self->t_.client_role)});
    });
  }

  ServerHandshake p_;
  std::shared_ptr<ServerDone> done_;
  std::shared_ptr<FrameIo> io_;
  Transcript t_;
  std::unique_ptr<EphemeralKx> kx_;  // encrypted connections, until the client's proof is checked
};
}  // namespace


void asyncClientHandshake(Tcp::socket socket, ClientHandshake params, ClientDone done) {
  std::make_shared<ClientRun>(std::move(socket), std::move(params), std::move(done))->start();
}

void asyncConnect(asio::io_context& io, const HostPort& to, Millis timeout, std::function<void(Connected)> done) {
  auto resolver = std::make_shared<Tcp::resolver>(io);
  auto socket = std::make_shared<Tcp::socket>(io);
  auto timer = std::make_shared<asio::steady_timer>(io);
  auto timed_out = std::make_shared<bool>(false);
  timer->expires_after(timeout);
  timer->async_wait([socket, resolver, timed_out](const asio::error_code& ec) {
    if (ec) return;
    *timed_out = true;
    resolver->cancel();
    asio::error_code ignored;
    socket->close(ignored);
  });
  auto finish = [socket, timer, timed_out, done = std::move(done)](const asio::error_code& ec, const char* what) {
    timer->cancel();
    done(Connected{std::move(*socket), ec, ec && *timed_out, what});
  };
  resolver->async_resolve(to.host, std::to_string(to.port), [resolver, socket, finish](
                                                                 const asio::error_code& ec, Tcp::resolver::results_type res) {
    if (ec) return finish(ec, "resolving");
    asio::async_connect(*socket, res, [finish](const asio::error_code& ec2, const Tcp::endpoint&) {
      finish(ec2, "connecting to");
    });
  });
}

void asyncDial(asio::io_context& io, const HostPort& to, ClientHandshake params, ClientDone done) {
  const Millis timeout = params.timeout;
  asyncConnect(io, to, timeout, [p = std::move(params), done = std::move(done), where = to.toString()](Connected c) {
    if (c.timed_out) return done(Status::timeout(fmt::format("no connection to {} within {} ms", where, p.timeout.count())));
    if (c.ec) return done(Status::peerLost(fmt::format("{} {} failed: {}", c.what, where, c.ec.message())));
    asyncClientHandshake(std::move(c.socket), p, done);
  });
}

void asyncServerHandshake(Tcp::socket socket, ServerHandshake params, ServerDone done) {
  std::make_shared<ServerRun>(std::move(socket), std::move(params), std::move(done))->start();
}

}  // namespace pccl::net
