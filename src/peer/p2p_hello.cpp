#include "peer/p2p_hello.hpp"

#include <fmt/format.h>

#include <utility>

#include "peer/relay.hpp"
#include "util/log.hpp"

namespace pccl::peer {

std::vector<uint8_t> ringHelloSigned(const net::SessionId& session, const wire::P2PHello& hello) {
  static constexpr char kLabel[] = "pccl ring hello v4";
  std::vector<uint8_t> out;
  out.reserve(sizeof kLabel - 1 + session.size() + 37);
  wire::ByteWriter w(&out);
  w.bytes(kLabel, sizeof kLabel - 1);
  w.fixed(session);
  w.fixed(hello.sender_id);
  w.u64(hello.epoch);
  w.u32(hello.index);
  w.u8(hello.flags);
  w.u64(hello.received);
  return out;
}

HelloDial HelloDial::toMember(asio::io_context& io, const wire::MemberInfo& to, wire::Role role,
                              std::shared_ptr<const net::AuthKey> key, std::shared_ptr<const net::SigningKey> identity,
                              Millis timeout, const char* what) {
  HelloDial d;
  d.io = &io;
  d.to = net::HostPort{to.host, to.port};
  d.role = role;
  d.key = std::move(key);
  d.identity = std::move(identity);
  d.timeout = timeout;
  d.who = fmt::format("{} {} at {}", what, wire::shortId(to.id), d.to.toString());
  return d;
}

void dialWithHello(const HelloDial& d, std::function<bool()> stale, std::function<void(const Status&)> failed,
                   std::function<void(net::Link, const wire::P2PAccept&)> accepted) {
  auto fail = [stale, failed, who = d.who](const Status& s) {
    if (!stale()) failed(s.withContext(who));
  };
  net::ClientHandshake hs{d.role, d.key, d.timeout, d.who};
  auto authenticated = [d, stale, fail, accepted](Result<net::Link> r) {
    if (stale()) return;
    if (!r.isOk()) {
      if (!d.before_hello) return fail(r.status());
      if (!stale()) d.before_hello(r.status().withContext(d.who));
      return;
    }
    auto io = std::make_shared<net::FrameIo>(std::move(r).value(), d.timeout, fail);
    io->armDeadline();
    wire::P2PHello hello;
    hello.sender_id = d.self;
    hello.epoch = d.epoch;
    hello.index = d.index;
    hello.flags = d.flags;
    hello.received = d.received;
    const std::vector<uint8_t> signed_bytes = ringHelloSigned(io->session(), hello);
    hello.signature = d.identity->sign(signed_bytes.data(), signed_bytes.size());
    io->write(wire::encodeFrame(hello, d.epoch), [io, who = d.who, stale, accepted] {
      io->readFrame([io, who, stale, accepted](Status s, const wire::FrameHeader& h, const std::vector<uint8_t>& p) {
        if (stale()) return io->fail(Status::ok());
        auto accept = s.isOk() ? net::expectFrame<wire::P2PAccept>(h, p, who) : Result<wire::P2PAccept>(s);
        if (!accept.isOk()) return io->fail(accept.status());
        accepted(io->release(), *accept);
      });
    });
  };
  if (!d.via_relay) return net::asyncDial(*d.io, d.to, hs, authenticated);
  RelayOpen o{d.io, d.relay, d.key, d.identity, d.timeout, "relay for " + d.who, d.relay_hello};
  openRelayed(o, [hs, authenticated](Result<net::Tcp::socket> s) {
    if (!s.isOk()) return authenticated(s.status());
    net::asyncClientHandshake(std::move(s).value(), hs, authenticated);
  });
}

void readHello(net::Link link, Millis timeout, const char* kind, std::shared_ptr<bool> alive, HelloHandler on_hello) {
  std::string who = net::remoteName(link.socket);
  auto io = std::make_shared<net::FrameIo>(std::move(link), timeout, [who, kind](const Status& s) {
    if (!s.isOk()) PCCL_LOG_DEBUG("ring", "{} connection from {} dropped: {}", kind, who, s.toString());
  });
  io->armDeadline();
  io->readFrame([io, alive, who, on_hello](Status s, const wire::FrameHeader& h, const std::vector<uint8_t>& p) {
    if (!*alive) return io->fail(Status::ok());
    auto hello = s.isOk() ? net::expectFrame<wire::P2PHello>(h, p, who) : Result<wire::P2PHello>(s);
    if (!hello.isOk()) return io->fail(hello.status());
    on_hello(io, *hello);
  });
}

Status verifyHello(const net::FrameIo& io, const wire::P2PHello& hello, const wire::SignKey& key, const char* kind,
                   const std::string& listed_for) {
  const std::vector<uint8_t> signed_bytes = ringHelloSigned(io.session(), hello);
  if (net::verifySignature(key, signed_bytes.data(), signed_bytes.size(), hello.signature)) return Status::ok();
  return Status::authFailed(fmt::format(
      "{} hello claiming to be peer {} is not signed for this connection with the ring key the master lists for "
      "it{}",
      kind, wire::shortId(hello.sender_id), listed_for));
}

}  // namespace pccl::peer
