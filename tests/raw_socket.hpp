// A raw TCP client/server for hostile-input tests: exact bytes out, frames in, every wait with a deadline.
#ifndef PCCL_TESTS_RAW_SOCKET_HPP_
#define PCCL_TESTS_RAW_SOCKET_HPP_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "wire/frame.hpp"
#include "wire/messages.hpp"

namespace pccl::test {

class RawSocket {
 public:
  RawSocket() = default;
  explicit RawSocket(int fd) : fd_(fd) {}
  RawSocket(RawSocket&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  RawSocket& operator=(RawSocket&& o) noexcept {
    std::swap(fd_, o.fd_);
    return *this;
  }
  ~RawSocket() {
    if (fd_ >= 0) ::close(fd_);
  }

  static RawSocket connectTo(uint16_t port) {
    // CLOEXEC: a process the test forks (pccl-master, etcd) must not hold this connection open.
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
      ::close(fd);
      return RawSocket();
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return RawSocket(fd);
  }

  bool ok() const { return fd_ >= 0; }

  bool sendBytes(const std::vector<uint8_t>& b) {
    size_t off = 0;
    while (off < b.size()) {
      ssize_t n = ::send(fd_, b.data() + off, b.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }

  // Exactly n bytes, or nullopt on EOF/error/deadline.
  std::optional<std::vector<uint8_t>> recvExact(size_t n, int timeout_ms) {
    std::vector<uint8_t> out(n);
    size_t got = 0;
    while (got < n) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, timeout_ms) <= 0) return std::nullopt;
      ssize_t r = ::recv(fd_, out.data() + got, n - got, 0);
      if (r <= 0) return std::nullopt;
      got += static_cast<size_t>(r);
    }
    return out;
  }

  struct Frame {
    wire::FrameHeader header;
    std::vector<uint8_t> payload;
  };
  std::optional<Frame> recvFrame(int timeout_ms) {
    auto h = recvExact(wire::kHeaderSize, timeout_ms);
    if (!h) return std::nullopt;
    auto hdr = wire::decodeHeader(h->data(), h->size(), wire::kMaxControlPayload);
    if (!hdr.isOk()) return std::nullopt;
    auto p = recvExact(hdr->length, timeout_ms);
    if (!p) return std::nullopt;
    return Frame{*hdr, *p};
  }

  // True when the remote closes (EOF or reset) within the deadline; data before that is discarded.
  bool waitClosed(int timeout_ms) {
    for (;;) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, timeout_ms) <= 0) return false;
      char buf[4096];
      ssize_t r = ::recv(fd_, buf, sizeof(buf), 0);
      if (r <= 0) return true;
    }
  }

  int fd() const { return fd_; }

 private:
  int fd_ = -1;
};

// A listening socket on 127.0.0.1 with an ephemeral port.
class RawListener {
 public:
  RawListener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    ::listen(fd_, 16);
    socklen_t len = sizeof(a);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
  }
  ~RawListener() { ::close(fd_); }
  uint16_t port() const { return port_; }
  int fd() const { return fd_; }
  RawSocket accept(int timeout_ms) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) <= 0) return RawSocket();
    return RawSocket(::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC));
  }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

}  // namespace pccl::test

#endif  // PCCL_TESTS_RAW_SOCKET_HPP_
