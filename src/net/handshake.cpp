#include "net/handshake.hpp"

#include <fmt/format.h>

#include <utility>
#include <vector>

#include "net/frame_io.hpp"
#include "wire/messages.hpp"

namespace pccl::net {


void asyncClientHandshake(Tcp::socket socket, ClientHandshake params, ClientDone done) {
  auto shared_done = std::make_shared<ClientDone>(std::move(done));
  auto io = std::make_shared<FrameIo>(std::move(socket), params.timeout,
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
      auto reply = expectFrame<wire::HelloReply>(h, payload, p->server_name);
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
          auto ok = expectFrame<wire::AuthOk>(h2, payload2, p->server_name);
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
      asyncClientHandshake(std::move(*socket), *p, [shared_done](Result<Tcp::socket> r) { (*shared_done)(std::move(r)); });
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
        auto proof = expectFrame<wire::AuthProof>(h2, payload2, "client");
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
