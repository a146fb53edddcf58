#include "net/frame_io.hpp"

#include <utility>

#include "net/tcp_rto.hpp"

namespace pccl::net {

FrameIo::FrameIo(Tcp::socket socket, Millis timeout, Finish on_fail, uint32_t max_payload)
    : socket_(std::move(socket)),
      timer_(socket_.get_executor()),
      timeout_(timeout),
      on_fail_(std::move(on_fail)),
      max_payload_(max_payload) {
  tuneSocket(socket_);
  capRetransmitBackoff(socket_.native_handle());
}

FrameIo::FrameIo(Link link, Millis timeout, Finish on_fail, uint32_t max_payload)
    : FrameIo(std::move(link.socket), timeout, std::move(on_fail), max_payload) {
  crypto_ = std::move(link.crypto);
  session_ = link.session;
}

void FrameIo::armDeadline() {
  auto self = shared_from_this();
  timer_.expires_after(timeout_);
  timer_.async_wait([this, self](const asio::error_code& ec) {
    if (ec || done_) return;
    timed_out_ = true;
    asio::error_code ignore;
    socket_.close(ignore);
    // A socket with no read or write pending learns of the deadline only here.
    fail(Status::timeout(fmt::format("not completed within {} ms", timeout_.count())));
  });
}

void FrameIo::write(std::vector<uint8_t> frame, std::function<void()> k) {
  auto self = shared_from_this();
  Status sealed = sealFrame(crypto_, frame);
  if (!sealed.isOk()) return fail(sealed);
  auto buf = std::make_shared<std::vector<uint8_t>>(std::move(frame));
  asio::async_write(socket_, asio::buffer(*buf), [this, self, buf, k = std::move(k)](const asio::error_code& ec, size_t) {
    if (done_) return;
    if (ec) return fail(ioError(ec, "write"));
    k();
  });
}

void FrameIo::readFrame(FrameK k) {
  auto self = shared_from_this();
  asio::async_read(socket_, asio::buffer(header_), [this, self, k = std::move(k)](const asio::error_code& ec, size_t) mutable {
    if (done_) return;
    if (ec) return fail(ioError(ec, "read"));
    auto h = wire::decodeHeader(header_.data(), header_.size(), max_payload_ + sealOverhead(crypto_));
    if (!h.isOk()) return k(h.status(), wire::FrameHeader{}, payload_);
    payload_.resize(h->length);
    wire::FrameHeader hdr = *h;
    asio::async_read(socket_, asio::buffer(payload_), [this, self, hdr, k = std::move(k)](const asio::error_code& ec2, size_t) {
      if (done_) return;
      if (ec2) return fail(ioError(ec2, "read"));
      wire::FrameHeader opened_hdr = hdr;
      Status opened = openFrame(crypto_, header_, opened_hdr, payload_.data());
      if (!opened.isOk()) return fail(opened.withContext(peerName()));
      payload_.resize(opened_hdr.length);
      k(Status::ok(), opened_hdr, payload_);
    });
  });
}

void FrameIo::rejectWith(const Status& s) {
  wire::Error e;
  e.code = static_cast<uint16_t>(s.code());
  e.message = s.message();
  write(wire::encodeFrame(e, 0), [this, s] { fail(s); });
}

void FrameIo::fail(const Status& s) {
  if (done_) return;
  done_ = true;
  timer_.cancel();
  asio::error_code ignore;
  socket_.close(ignore);
  on_fail_(s);
}

Link FrameIo::release() {
  done_ = true;
  timer_.cancel();
  return Link{std::move(socket_), std::move(crypto_), session_};
}

Status FrameIo::ioError(const asio::error_code& ec, const char* what) const {
  if (timed_out_) return Status::timeout(fmt::format("not completed within {} ms", timeout_.count()));
  if (ec == asio::error::eof) return Status::systemError("connection closed by the remote");
  return Status::systemError(fmt::format("{} failed: {}", what, ec.message()));
}

Status statusFromRemoteError(const wire::Error& e, const std::string& who) {
  return Status(wire::codeFromWire(e.code, Code::kProtocolError), who + " says: " + e.message);
}

}  // namespace pccl::net
