#include "net/connection.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <utility>

#include "net/tcp_rto.hpp"

namespace pccl::net {

namespace {
constexpr Millis kErrorLinger{500};  // how long an Error frame may take to flush before we close anyway

Status ioStatus(const asio::error_code& ec, const char* what) {
  if (ec == asio::error::eof) return Status::systemError(std::string("connection closed by remote (") + what + ")");
  return Status::systemError(std::string(what) + " failed: " + ec.message());
}
}  // namespace

Connection::Connection(Link link, uint32_t max_payload)
    : socket_(std::move(link.socket)),
      crypto_(std::move(link.crypto)),
      max_payload_(max_payload),
      session_(link.session),
      name_(remoteName(socket_)),
      linger_(socket_.get_executor()) {
  tuneSocket(socket_);
  capRetransmitBackoff(socket_.native_handle());
}

Connection::~Connection() {
  asio::error_code ec;
  socket_.close(ec);
}

void Connection::start(FrameHandler on_frame, CloseHandler on_close) {
  on_frame_ = std::move(on_frame);
  on_close_ = std::move(on_close);
  last_rx_ = Clock::now();
  readHeader();
}

void Connection::readHeader() {
  auto self = shared_from_this();
  asio::async_read(socket_, asio::buffer(header_), [this, self](const asio::error_code& ec, size_t) {
    if (closed_) return;
    if (ec) return close(ioStatus(ec, "read"));
    auto h = wire::decodeHeader(header_.data(), header_.size(), max_payload_ + sealOverhead(crypto_));
    if (!h.isOk()) return close(h.status());
    last_rx_ = Clock::now();
    readPayload(*h);
  });
}

void Connection::readPayload(const wire::FrameHeader& h) {
  payload_.resize(h.length);  // bounded by max_payload_, checked in decodeHeader
  auto self = shared_from_this();
  asio::async_read(socket_, asio::buffer(payload_), [this, self, frame = h](const asio::error_code& ec, size_t) {
    if (closed_) return;
    if (ec) return close(ioStatus(ec, "read"));
    last_rx_ = Clock::now();
    wire::FrameHeader opened = frame;
    Status s = openFrame(crypto_, header_, opened, payload_.data());
    if (s.isOk()) s = on_frame_(opened, payload_.data(), opened.length);
    if (!s.isOk()) return close(s);
    if (!closed_) readHeader();
  });
}

void Connection::sendFrame(std::vector<uint8_t> frame) {
  if (closed_ || close_after_write_) return;
  Status sealed = sealFrame(crypto_, frame);
  if (!sealed.isOk()) return close(sealed);
  out_.push_back(std::move(frame));
  if (!writing_) writeNext();
}

void Connection::writeNext() {
  if (out_.empty()) {
    writing_ = false;
    if (close_after_write_) close(close_reason_);
    return;
  }
  writing_ = true;
  auto self = shared_from_this();
  asio::async_write(socket_, asio::buffer(out_.front()), [this, self](const asio::error_code& ec, size_t) {
    if (closed_) return;
    if (ec) return close(ioStatus(ec, "write"));
    out_.pop_front();
    writeNext();
  });
}

void Connection::sendErrorAndClose(const Status& remote, uint64_t epoch, const Status* local) {
  if (closed_ || close_after_write_) return;
  wire::Error e;
  e.code = static_cast<uint16_t>(remote.code());
  e.message = remote.message();
  sendFrame(wire::encodeFrame(e, epoch));
  closeAfterFlush(local != nullptr ? *local : remote);
}

void Connection::closeAfterFlush(const Status& reason) {
  if (closed_ || close_after_write_) return;
  close_after_write_ = true;
  close_reason_ = reason;
  if (!writing_) return close(reason);
  auto self = shared_from_this();
  linger_.expires_after(kErrorLinger);
  linger_.async_wait([this, self](const asio::error_code& ec) {
    if (!ec) close(close_reason_);
  });
}

void Connection::close(const Status& reason) {
  if (closed_) return;
  closed_ = true;
  asio::error_code ec;
  linger_.cancel();
  socket_.shutdown(Tcp::socket::shutdown_both, ec);
  socket_.close(ec);
  out_.clear();
  CloseHandler handler = std::move(on_close_);
  on_close_ = nullptr;
  // on_frame_ stays: close() may run inside it. Nothing calls it once closed_ is set.
  if (handler) handler(reason);
}

void Connection::reset(const Status& reason) {
  if (closed_) return;
  asio::error_code ec;
  socket_.set_option(Tcp::socket::linger(true, 0), ec);  // the close below sends an RST
  closed_ = true;
  linger_.cancel();
  socket_.close(ec);
  out_.clear();
  CloseHandler handler = std::move(on_close_);
  on_close_ = nullptr;
  if (handler) handler(reason);
}

bool Connection::remoteClosed() const {
  if (closed_) return true;
  // POLLRDHUP: the other end's FIN arrived, even with frames before it still unread (a peek would see
  // those frames and miss the FIN behind them).
  pollfd p{const_cast<Tcp::socket&>(socket_).native_handle(), POLLRDHUP, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

}  // namespace pccl::net
