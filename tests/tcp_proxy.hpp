// A man in the middle for one TCP connection on loopback: forwards both directions, records what each
// side sent, and can tamper with the client-to-server stream (flip bits of one byte, or replay a byte
// range) and flip bits of one byte of the server-to-client stream.
// One background thread driven by poll(); an eventfd stops it. Every wait has a deadline.
#ifndef PCCL_TESTS_TCP_PROXY_HPP_
#define PCCL_TESTS_TCP_PROXY_HPP_

#include <sys/eventfd.h>

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "raw_socket.hpp"

namespace pccl::test {

class TcpProxy {
 public:
  struct Tamper {
    int64_t flip_at = -1;      // client-to-server offset whose byte is inverted
    int64_t replay_from = -1;  // once the stream passes replay_to, bytes [replay_from, replay_to) are sent again
    int64_t replay_to = -1;
    int64_t flip_reply_at = -1;  // server-to-client offset whose byte is inverted
    uint8_t flip_mask = 0xff;    // the bits a flip inverts
  };

  TcpProxy(uint16_t target_port, Tamper tamper) : target_(target_port), tamper_(tamper) {
    stop_ = eventfd(0, EFD_CLOEXEC);
    thread_ = std::thread([this] { run(); });
  }
  ~TcpProxy() {
    uint64_t one = 1;
    (void)!::write(stop_, &one, sizeof one);
    thread_.join();
    ::close(stop_);
  }
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

  uint16_t port() const { return listener_.port(); }
  std::vector<uint8_t> clientBytes() const {
    std::lock_guard<std::mutex> lk(mu_);
    return sent_;
  }
  std::vector<uint8_t> serverBytes() const {
    std::lock_guard<std::mutex> lk(mu_);
    return replied_;
  }

 private:
  void run() {
    pollfd a[2] = {{listener_.fd(), POLLIN, 0}, {stop_, POLLIN, 0}};
    if (::poll(a, 2, 30000) <= 0 || (a[1].revents & POLLIN) != 0) return;
    RawSocket client = listener_.accept(0);
    RawSocket server = RawSocket::connectTo(target_);
    if (!client.ok() || !server.ok()) return;
    std::vector<uint8_t> buf(64 * 1024);
    for (;;) {
      pollfd p[3] = {{client.fd(), POLLIN, 0}, {server.fd(), POLLIN, 0}, {stop_, POLLIN, 0}};
      if (::poll(p, 3, 30000) <= 0 || (p[2].revents & POLLIN) != 0) return;
      if (p[0].revents != 0) {
        ssize_t n = ::recv(client.fd(), buf.data(), buf.size(), 0);
        if (n <= 0) return;
        if (!server.sendBytes(fromClient(buf.data(), static_cast<size_t>(n)))) return;
      }
      if (p[1].revents != 0) {
        ssize_t n = ::recv(server.fd(), buf.data(), buf.size(), 0);
        if (n <= 0) return;
        if (!client.sendBytes(fromServer(buf.data(), static_cast<size_t>(n)))) return;
      }
    }
  }

  // The bytes to forward for `n` new client bytes, tampered as asked.
  std::vector<uint8_t> fromClient(const uint8_t* data, size_t n) {
    std::lock_guard<std::mutex> lk(mu_);
    const int64_t start = static_cast<int64_t>(sent_.size());
    sent_.insert(sent_.end(), data, data + n);
    std::vector<uint8_t> out(data, data + n);
    if (tamper_.flip_at >= start && tamper_.flip_at < start + static_cast<int64_t>(n)) {
      out[static_cast<size_t>(tamper_.flip_at - start)] ^= tamper_.flip_mask;
    }
    const int64_t end = start + static_cast<int64_t>(n);
    if (!replayed_ && tamper_.replay_to >= 0 && end >= tamper_.replay_to) {
      replayed_ = true;
      const auto cut = out.begin() + (tamper_.replay_to - start);
      std::vector<uint8_t> copy(sent_.begin() + tamper_.replay_from, sent_.begin() + tamper_.replay_to);
      out.insert(cut, copy.begin(), copy.end());
    }
    return out;
  }

  std::vector<uint8_t> fromServer(const uint8_t* data, size_t n) {
    std::lock_guard<std::mutex> lk(mu_);
    const int64_t start = static_cast<int64_t>(replied_.size());
    replied_.insert(replied_.end(), data, data + n);
    std::vector<uint8_t> out(data, data + n);
    if (tamper_.flip_reply_at >= start && tamper_.flip_reply_at < start + static_cast<int64_t>(n)) {
      out[static_cast<size_t>(tamper_.flip_reply_at - start)] ^= tamper_.flip_mask;
    }
    return out;
  }

  RawListener listener_;
  uint16_t target_;
  Tamper tamper_;
  int stop_ = -1;
  mutable std::mutex mu_;
  std::vector<uint8_t> sent_;
  std::vector<uint8_t> replied_;
  bool replayed_ = false;
  std::thread thread_;
};

}  // namespace pccl::test

#endif  // PCCL_TESTS_TCP_PROXY_HPP_
