// One socket exchanging whole frames one at a time under a single deadline. Used before a socket
// becomes a Connection or DataChannel: the authentication handshake and the ring hello. Once the
// connection's keys are set (secure(), or a Link made by the handshake), frames are sealed and opened.
// Thread: the owning io_context's thread.
#ifndef PCCL_NET_FRAME_IO_HPP_
#define PCCL_NET_FRAME_IO_HPP_

#include <fmt/format.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "net/asio.hpp"
#include "net/link.hpp"
#include "pccl/status.hpp"
#include "util/clock.hpp"
#include "wire/messages.hpp"

namespace pccl::net {

class FrameIo : public std::enable_shared_from_this<FrameIo> {
 public:
  using FrameK = std::function<void(Status, const wire::FrameHeader&, const std::vector<uint8_t>&)>;
  using Finish = std::function<void(Status)>;

  // on_fail runs once, on any failure (I/O error, deadline, or fail()/rejectWith()).
  FrameIo(Tcp::socket socket, Millis timeout, Finish on_fail, uint32_t max_payload = wire::kMaxHandshakePayload);
  FrameIo(Link link, Millis timeout, Finish on_fail, uint32_t max_payload = wire::kMaxHandshakePayload);

  void armDeadline();
  void write(std::vector<uint8_t> frame, std::function<void()> k);
  void readFrame(FrameK k);
  // Sends an Error frame (best effort), then fails with `s`.
  void rejectWith(const Status& s);
  void fail(const Status& s);
  // The handshake is done: from now on every frame is sealed/opened with `crypto` (no-op when it is
  // off), and the link carries `session`.
  void establish(const SessionId& session, SessionCrypto crypto) {
    session_ = session;
    crypto_ = std::move(crypto);
  }
  const SessionId& session() const { return session_; }
  // Hands the socket (and its keys) over; the deadline no longer applies.
  Link release();
  bool done() const { return done_; }
  std::string peerName() const { return remoteName(socket_); }

 private:
  Status ioError(const asio::error_code& ec, const char* what) const;

  Tcp::socket socket_;
  SessionCrypto crypto_;
  SessionId session_{};
  asio::steady_timer timer_;
  Millis timeout_;
  Finish on_fail_;
  uint32_t max_payload_;
  wire::HeaderBytes header_{};
  std::vector<uint8_t> payload_;
  bool done_ = false;
  bool timed_out_ = false;
};

// Decodes `Msg` from a frame, or turns the remote's Error into its Status, or complains about the type.
Status statusFromRemoteError(const wire::Error& e, const std::string& who);
template <typename Msg>
Result<Msg> expectFrame(const wire::FrameHeader& h, const std::vector<uint8_t>& p, const std::string& who) {
  if (h.type == static_cast<uint16_t>(wire::MsgType::kError)) {
    auto e = wire::decodePayload<wire::Error>(p.data(), p.size());
    if (!e.isOk()) return e.status();
    return statusFromRemoteError(*e, who);
  }
  if (h.type != static_cast<uint16_t>(Msg::kType)) {
    return Status::protocol(fmt::format("{} sent {}, expected {}", who, wire::msgTypeName(h.type),
                                        wire::msgTypeName(static_cast<uint16_t>(Msg::kType))));
  }
  return wire::decodePayload<Msg>(p.data(), p.size());
}

}  // namespace pccl::net

#endif  // PCCL_NET_FRAME_IO_HPP_
