#include "net/handshake.hpp"

#include <fmt/format.h>

#include <utility>
#include <vector>

#include "wire/messages.hpp"

namespace pccl::net {

Status statusFromRemoteError(const wire::Error& e, const std::string& who) {
  Code code = e.code <= static_cast<uint16_t>(Code::kProtocolError) && e.code != 0 ? static_cast<Code>(e.code)
                                                                                   : Code::kProtocolError;
  return Status(code, who + " says: " + e.message);
}

namespace {

// Shared plumbing of both sides: one socket, one deadline, frame-at-a-time reads and writes.
class HandshakeIo : public std::enable_shared_from_this<HandshakeIo> {
 public:
  using FrameK = std::function<void(Status, const wire::FrameHeader&, const std::vector<uint8_t>&)>;
  using Finish = std::function<void(Status)>;

  HandshakeIo(Tcp::socket socket, Millis timeout, Finish on_fail)
      : socket_(std::move(socket)), timer_(socket_.get_executor()), timeout_(timeout), on_fail_(std::move(on_fail)) {
    tuneSocket(socket_);
  }

  void armDeadline() {
    auto self = shared_from_this();
    timer_.expires_after(timeout_);
    timer_.async_wait([this, self](const asio::error_code& ec) {
      if (ec || done_) return;
      timed_out_ = true;
      asio::error_code ignore;
      socket_.close(ignore);
    });
  }

  void write(std::vector<uint8_t> frame, std::function<void()> k) {
    auto self = shared_from_this();
    auto buf = std::make_shared<std::vector<uint8_t>>(std::move(frame));
    asio::async_write(socket_, asio::buffer(*buf), [this, self, buf, k = std::move(k)](const asio::error_code& ec, size_t) {
      if (done_) return;
      if (ec) return fail(ioError(ec, "write"));
      k();
    });
  }

  void readFrame(FrameK k) {
    auto self = shared_from_this();
    asio::async_read(socket_, asio::buffer(header_), [this, self, k = std::move(k)](const asio::error_code& ec, size_t) mutable {
      if (done_) return;
      if (ec) return fail(ioError(ec, "read"));
      auto h = wire::decodeHeader(header_.data(), header_.size(), wire::kMaxHandshakePayload);
      if (!h.isOk()) return k(h.status(), wire::FrameHeader{}, payload_);
      payload_.resize(h->length);
      wire::FrameHeader hdr = *h;
      asio::async_read(socket_, asio::buffer(payload_), [this, self, hdr, k = std::move(k)](const asio::error_code& ec2, size_t) {
        if (done_) return;
        if (ec2) return fail(ioError(ec2, "read"));
        k(Status::ok(), hdr, payload_);
      });
    });
  }

  // Sends an Error frame, then fails with `s` (the frame is best effort: we do not wait long for it).
  void rejectWith(const Status& s) {
    wire::Error e;
    e.code = static_cast<uint16_t>(s.code());
    e.message = s.message();
    write(wire::encodeFrame(e, 0), [this, s] { fail(s); });
  }

  void fail(const Status& s) {
    if (done_) return;
    done_ = true;
    timer_.cancel();
    asio::error_code ignore;
    socket_.close(ignore);
    on_fail_(s);
  }

  Tcp::socket release() {
    done_ = true;
    timer_.cancel();
    return std::move(socket_);
  }

  bool done() const { return done_; }

 private:
  Status ioError(const asio::error_code& ec, const char* what) const {
    if (timed_out_) return Status::timeout(fmt::format("handshake not completed within {} ms", timeout_.count()));
    if (ec == asio::error::eof) return Status::systemError("connection closed during the handshake");
    return Status::systemError(fmt::format("handshake {} failed: {}", what, ec.message()));
  }

  Tcp::socket socket_;
  asio::steady_timer timer_;
  Millis timeout_;
  Finish on_fail_;
  wire::HeaderBytes header_{};
  std::vector<uint8_t> payload_;
  bool done_ = false;
  bool timed_out_ = false;
};

// Decodes `Msg` from a handshake frame, or the remote's Error, or complains about the type.
template <typename Msg>
Result<Msg> expect(const wire::FrameHeader& h, const std::vector<uint8_t>& p, const std::string& who) {
  if (h.type == static_cast<uint16_t>(wire::MsgType::kError)) {
    auto e = wire::decodePayload<wire::Error>(p.data(), p.size());
    if (!e.isOk()) return e.status();
    return statusFromRemoteError(*e, who);
  }
  if (h.type != static_cast<uint16_t>(Msg::kType)) {
    return Status::protocol(fmt::format("{} sent {} during the handshake, expected {}", who,
                                        wire::msgTypeName(h.type), wire::msgTypeName(static_cast<uint16_t>(Msg::kType))));
  }
  return wire::decodePayload<Msg>(p.data(), p.size());
}

}  // namespace

void asyncClientHandshake(Tcp::socket socket, ClientHandshake params, ClientDone done) {
  auto shared_done = std::make_shared<ClientDone>(std::move(done));
  auto io = std::make_shared<HandshakeIo>(std::move(socket), params.timeout,
                                          [shared_done](Status s) { (*shared_done)(std::move(s)); });
  io->armDeadline();
  auto p = std::make_shared<ClientHandshake>(std::move(params));
  wire::Hello hello;
  hello.role = static_cast<uint8_t>(p->role);
  hello.flags = p->key->hasSecret() ? 1 : 0;
  hello.nonce = randomNonce();
  const wire::Nonce cn = hello.nonce;

  io->write(wire::encodeFrame(hello, 0), [io, p, cn, shared_done] {
    io->readFrame([io, p, cn, shared_done](Status s, const wire::FrameHeader& h, const std::vector<uint8_t>& payload) {
      if (!s.isOk()) return io->fail(s.withContext(p->server_name));
      auto reply = expect<wire::HelloReply>(h, payload, p->server_name);
      if (!reply.isOk()) return io->fail(reply.status());
      bool server_requires = (reply->flags & 1) != 0;
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
      const wire::Nonce sn = reply->nonce;
      wire::AuthProof proof;
      proof.mac = p->key->proof(AuthKey::Side::kClient, static_cast<uint8_t>(p->role), cn, sn);
      io->write(wire::encodeFrame(proof, 0), [io, p, cn, sn, shared_done] {
        io->readFrame([io, p, cn, sn, shared_done](Status s2, const wire::FrameHeader& h2,
                                                   const std::vector<uint8_t>& payload2) {
          if (!s2.isOk()) return io->fail(s2.withContext(p->server_name));
          auto ok = expect<wire::AuthOk>(h2, payload2, p->server_name);
          if (!ok.isOk()) return io->fail(ok.status());
          if (!p->key->verify(AuthKey::Side::kServer, static_cast<uint8_t>(p->role), cn, sn, ok->mac)) {
            return io->fail(Status::authFailed(p->server_name + " failed to prove knowledge of the shared secret"));
          }
          (*shared_done)(io->release());
        });
      });
    });
  });
}

void asyncServerHandshake(Tcp::socket socket, ServerHandshake params, ServerDone done) {
  auto shared_done = std::make_shared<ServerDone>(std::move(done));
  auto io = std::make_shared<HandshakeIo>(std::move(socket), params.timeout,
                                          [shared_done](Status s) { (*shared_done)(std::move(s)); });
  io->armDeadline();
  auto key = params.key;
  io->readFrame([io, key, shared_done](Status s, const wire::FrameHeader& h, const std::vector<uint8_t>& payload) {
    if (s.code() == Code::kVersionMismatch) return io->rejectWith(s);
    if (!s.isOk()) return io->fail(s);
    auto hello = expect<wire::Hello>(h, payload, "client");
    if (!hello.isOk()) return io->rejectWith(hello.status());
    if (hello->role != static_cast<uint8_t>(wire::Role::kPeerToMaster) &&
        hello->role != static_cast<uint8_t>(wire::Role::kPeerToPeer)) {
      return io->rejectWith(Status::protocol(fmt::format("unknown connection role {}", hello->role)));
    }
    const wire::Nonce cn = hello->nonce;
    const uint8_t role = hello->role;
    wire::HelloReply reply;
    reply.flags = key->hasSecret() ? 1 : 0;
    reply.nonce = randomNonce();
    const wire::Nonce sn = reply.nonce;
    io->write(wire::encodeFrame(reply, 0), [io, key, cn, sn, role, shared_done] {
      io->readFrame([io, key, cn, sn, role, shared_done](Status s2, const wire::FrameHeader& h2,
                                                         const std::vector<uint8_t>& payload2) {
        if (!s2.isOk()) return io->fail(s2);
        auto proof = expect<wire::AuthProof>(h2, payload2, "client");
        if (!proof.isOk()) return io->fail(proof.status());
        if (!key->verify(AuthKey::Side::kClient, role, cn, sn, proof->mac)) {
          return io->rejectWith(Status::authFailed("authentication failed: wrong shared secret"));
        }
        wire::AuthOk ok;
        ok.mac = key->proof(AuthKey::Side::kServer, role, cn, sn);
        io->write(wire::encodeFrame(ok, 0), [io, role, shared_done] {
          (*shared_done)(Authenticated{io->release(), static_cast<wire::Role>(role)});
        });
      });
    });
  });
}

}  // namespace pccl::net
