// A framed, authenticated TCP connection: a read loop delivering whole frames, and a write queue.
// In an encrypted run every frame is sealed on send and opened (authenticated) before delivery.
// Thread: everything runs on the owning io_context's single thread; post() to it from elsewhere.
#ifndef PCCL_NET_CONNECTION_HPP_
#define PCCL_NET_CONNECTION_HPP_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "net/asio.hpp"
#include "net/link.hpp"
#include "pccl/status.hpp"
#include "util/clock.hpp"
#include "wire/frame.hpp"
#include "wire/messages.hpp"

namespace pccl::net {

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  // Returning a failed Status closes the connection with that reason.
  using FrameHandler = std::function<Status(const wire::FrameHeader&, const uint8_t*, size_t)>;
  using CloseHandler = std::function<void(const Status&)>;

  Connection(Link link, uint32_t max_payload);
  ~Connection();

  void start(FrameHandler on_frame, CloseHandler on_close);
  void sendFrame(std::vector<uint8_t> frame);
  template <typename Msg>
  void send(const Msg& msg, uint64_t epoch) { sendFrame(wire::encodeFrame(msg, epoch)); }
  // Sends `remote` as an Error message, then closes once it is written (bounded by a short linger
  // timer); the close handler sees `local` (defaults to `remote`).
  void sendErrorAndClose(const Status& remote, uint64_t epoch, const Status* local = nullptr);
  // Closes once everything queued is written (bounded by the same linger timer).
  void closeAfterFlush(const Status& reason);
  // Closes at once; the close handler runs once, with `reason`. Idempotent.
  void close(const Status& reason);
  // Closes at once with a reset (the remote reads ECONNRESET, as after a middlebox's RST).
  void reset(const Status& reason);

  bool isOpen() const { return !closed_; }
  // True when the remote has closed (its EOF or a reset waits in the socket, unread) or we did. Looks
  // without reading: a frame still unread before the EOF hides it.
  bool remoteClosed() const;
  TimePoint lastReceive() const { return last_rx_; }
  const std::string& peerName() const { return name_; }
  // The handshake's session id (proofs bound to this connection sign it).
  const SessionId& session() const { return session_; }

 private:
  void readHeader();
  void readPayload(const wire::FrameHeader& h);
  void writeNext();

  Tcp::socket socket_;
  SessionCrypto crypto_;
  uint32_t max_payload_;
  SessionId session_{};
  std::string name_;
  FrameHandler on_frame_;
  CloseHandler on_close_;
  wire::HeaderBytes header_{};
  std::vector<uint8_t> payload_;
  std::deque<std::vector<uint8_t>> out_;
  bool writing_ = false;
  bool closed_ = false;
  bool close_after_write_ = false;
  Status close_reason_;
  asio::steady_timer linger_;
  TimePoint last_rx_ = Clock::now();
};

}  // namespace pccl::net

#endif  // PCCL_NET_CONNECTION_HPP_
