// A hostile member, for tests that attack what an authenticated peer may do (docs/security.md "What an
// authenticated member can and cannot do"): it holds the run's secret and speaks the protocol with the
// library's own handshake and wire code, but says whatever the test makes it say — a resume claiming
// another member's id, a forged or replayed signature, an out-of-range term. Blocking, one connection
// per object, every read with a deadline. Keep new attacks here so that each protocol change is attacked
// too.
#ifndef PCCL_TESTS_HOSTILE_PEER_HPP_
#define PCCL_TESTS_HOSTILE_PEER_HPP_

#include <fcntl.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "net/asio.hpp"
#include "net/auth.hpp"
#include "net/handshake.hpp"
#include "net/identity.hpp"
#include "raw_socket.hpp"
#include "wire/dispatch.hpp"
#include "wire/messages.hpp"

namespace pccl::test {

class HostilePeer {
 public:
  // Dials 127.0.0.1:`port` and authenticates as `role` with `secret` (empty: an open run). ok() says
  // whether that worked; error() why not.
  HostilePeer(uint16_t port, const std::string& secret, wire::Role role = wire::Role::kPeerToMaster)
      : key_(std::make_shared<net::AuthKey>(secret)) {
    asio::io_context io;
    Result<net::Link> got = Status::internal("no answer");
    net::ClientHandshake hs{role, key_, Millis(5000), "hostile target"};
    net::asyncDial(io, net::HostPort{"127.0.0.1", port}, hs, [&](Result<net::Link> r) { got = std::move(r); });
    io.run_for(std::chrono::seconds(10));
    if (!got.isOk()) {
      error_ = got.status();
      return;
    }
    session_ = got->session;
    asio::error_code ec;
    const int fd = got->socket.release(ec);
    if (ec) {
      error_ = Status::systemError(ec.message());
      return;
    }
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);  // our reads are blocking, with poll deadlines
    sock_ = RawSocket(fd);
  }

  bool ok() const { return sock_.ok(); }
  const Status& error() const { return error_; }
  const net::SessionId& session() const { return session_; }
  const net::SigningKey& ringKey() const { return ring_key_; }  // this member's own ring identity

  template <typename M>
  bool send(const M& m, uint64_t epoch = 0) {
    return sock_.sendBytes(wire::encodeFrame(m, epoch));
  }
  bool sendRaw(const std::vector<uint8_t>& bytes) { return sock_.sendBytes(bytes); }

  // The next frame of type M within `ms` (frames of other types are skipped); nullopt at the deadline,
  // when the connection closes, or when the frame does not decode.
  template <typename M>
  std::optional<M> expect(int ms) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return std::nullopt;
      auto f = sock_.recvFrame(static_cast<int>(left.count()));
      if (!f) return std::nullopt;
      if (f->header.type == static_cast<uint16_t>(wire::MsgType::kError)) last_error_ = decodeError(*f);
      if (f->header.type != static_cast<uint16_t>(M::kType)) continue;
      auto m = wire::decodePayload<M>(f->payload.data(), f->payload.size());
      if (!m.isOk()) return std::nullopt;
      return std::move(m).value();
    }
  }
  // The Error the master answers with (the frame before it closes), within `ms`.
  std::optional<wire::Error> expectError(int ms) {
    if (auto e = expect<wire::Error>(ms)) return e;
    return last_error_;
  }
  bool waitClosed(int ms) { return sock_.waitClosed(ms); }

  // A newcomer's JoinRequest with this member's own ring key.
  wire::JoinRequest freshJoin() const {
    wire::JoinRequest j;
    j.p2p_port = 1;  // nobody listens there: this member never takes part in a ring
    j.connections = 1;
    j.host_connections = 1;
    j.ring_key = ring_key_.publicKey();
    j.client_version = "hostile";
    return j;
  }
  // A resume claiming to be member `id` of run (`run_id`, `term`), signed over this connection by
  // `signer` (this member's own key when null) and naming `claimed_key` as the member's ring key (the
  // signer's public key when null).
  wire::JoinRequest resume(const wire::Uuid& run_id, uint64_t term, const wire::Uuid& id, uint64_t epoch,
                           std::vector<wire::Uuid> ring, const net::SigningKey* signer = nullptr,
                           const wire::SignKey* claimed_key = nullptr) const {
    const net::SigningKey& k = signer != nullptr ? *signer : ring_key_;
    wire::JoinRequest j = freshJoin();
    j.ring_key = claimed_key != nullptr ? *claimed_key : k.publicKey();
    j.resume_flags = wire::JoinRequest::kResuming;
    if (epoch != 0) j.resume_flags |= wire::JoinRequest::kRingUp;
    j.run_id = run_id;
    j.term = term;
    j.peer_id = id;
    j.epoch = epoch;
    j.ring = std::move(ring);
    const std::vector<uint8_t> proof = net::resumeProof(session_, j);
    j.resume_sig = k.sign(proof.data(), proof.size());
    return j;
  }

 private:
  static std::optional<wire::Error> decodeError(const RawSocket::Frame& f) {
    auto e = wire::decodePayload<wire::Error>(f.payload.data(), f.payload.size());
    if (!e.isOk()) return std::nullopt;
    return std::move(e).value();
  }

  std::shared_ptr<net::AuthKey> key_;
  net::SigningKey ring_key_;
  net::SessionId session_{};
  RawSocket sock_;
  Status error_;
  std::optional<wire::Error> last_error_;
};

}  // namespace pccl::test

#endif  // PCCL_TESTS_HOSTILE_PEER_HPP_
