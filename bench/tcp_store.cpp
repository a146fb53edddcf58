#include "tcp_store.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <stdexcept>

namespace pccl::bench {

namespace {
constexpr uint8_t kSet = 1, kGet = 2, kWait = 3;
constexpr uint32_t kMaxItem = 64u << 20;

bool readAll(int fd, void* buf, size_t n) {
  auto* p = static_cast<uint8_t*>(buf);
  while (n > 0) {
    const ssize_t r = ::recv(fd, p, n, 0);
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}
bool writeAll(int fd, const void* buf, size_t n) {
  const auto* p = static_cast<const uint8_t*>(buf);
  while (n > 0) {
    const ssize_t r = ::send(fd, p, n, MSG_NOSIGNAL);
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}
bool readU32(int fd, uint32_t* v) {
  uint8_t b[4];
  if (!readAll(fd, b, 4)) return false;
  *v = b[0] | (b[1] << 8) | (b[2] << 16) | (static_cast<uint32_t>(b[3]) << 24);
  return true;
}
void putU32(std::vector<char>* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
bool readBlob(int fd, std::vector<char>* out) {
  uint32_t n = 0;
  if (!readU32(fd, &n) || n > kMaxItem) return false;
  out->resize(n);
  return n == 0 || readAll(fd, out->data(), n);
}
}  // namespace

std::unique_ptr<StoreServer> StoreServer::start(const std::string& host, std::string* error) {
  std::unique_ptr<StoreServer> s(new StoreServer());
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  if (getaddrinfo(host.empty() ? nullptr : host.c_str(), "0", &hints, &res) != 0 || res == nullptr) {
    *error = "store: cannot resolve " + host;
    return nullptr;
  }
  s->listen_fd_ = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1;
  setsockopt(s->listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  const bool ok = s->listen_fd_ >= 0 && ::bind(s->listen_fd_, res->ai_addr, res->ai_addrlen) == 0 &&
                  ::listen(s->listen_fd_, 256) == 0;
  freeaddrinfo(res);
  if (!ok) {
    *error = std::string("store: cannot listen: ") + std::strerror(errno);
    return nullptr;
  }
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  getsockname(s->listen_fd_, reinterpret_cast<sockaddr*>(&ss), &len);
  s->port_ = ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                                            : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  s->acceptor_ = std::thread([p = s.get()] { p->acceptLoop(); });
  return s;
}

StoreServer::~StoreServer() {
  stop_ = true;
  ::shutdown(listen_fd_, SHUT_RDWR);
  ::close(listen_fd_);
  if (acceptor_.joinable()) acceptor_.join();
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (int fd : client_fds_) ::shutdown(fd, SHUT_RDWR);
    cv_.notify_all();
  }
  for (auto& t : clients_) t.join();
}

void StoreServer::acceptLoop() {
  while (!stop_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (poll(&p, 1, 200) <= 0) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    std::lock_guard<std::mutex> lk(mu_);
    client_fds_.push_back(fd);
    clients_.emplace_back([this, fd] { serve(fd); });
  }
}

void StoreServer::serve(int fd) {
  for (;;) {
    uint8_t op = 0;
    uint32_t n = 0;
    if (!readAll(fd, &op, 1) || !readU32(fd, &n) || n > 4096) break;
    std::vector<std::string> keys(n);
    bool ok = true;
    for (auto& k : keys) {
      std::vector<char> b;
      ok = ok && readBlob(fd, &b);
      k.assign(b.begin(), b.end());
    }
    std::vector<char> reply;
    if (ok && op == kSet && n == 1) {
      std::vector<char> value;
      if (!readBlob(fd, &value)) break;
      std::lock_guard<std::mutex> lk(mu_);
      kv_[keys[0]] = std::move(value);
      cv_.notify_all();
      reply.push_back(1);
    } else if (ok && (op == kGet || op == kWait)) {
      uint32_t timeout_ms = 60000;
      if (op == kWait && !readU32(fd, &timeout_ms)) break;
      std::unique_lock<std::mutex> lk(mu_);
      const bool there = cv_.wait_for(lk, std::chrono::milliseconds(timeout_ms), [&] {
        if (stop_) return true;
        for (const auto& k : keys) {
          if (kv_.count(k) == 0) return false;
        }
        return true;
      });
      reply.push_back(there && !stop_ ? 1 : 0);
      if (op == kGet) {
        const std::vector<char> empty;
        const auto& v = (there && !stop_ && n == 1) ? kv_[keys[0]] : empty;
        putU32(&reply, static_cast<uint32_t>(v.size()));
        reply.insert(reply.end(), v.begin(), v.end());
      }
    } else {
      break;
    }
    if (!writeAll(fd, reply.data(), reply.size())) break;
  }
  ::close(fd);
}

StoreClient::StoreClient(const std::string& host, uint16_t port, int timeout_ms) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0 || res == nullptr) {
    throw std::runtime_error("store: cannot resolve " + host);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {  // the server may still be starting on another rank: retry until the deadline
    fd_ = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ >= 0 && ::connect(fd_, res->ai_addr, res->ai_addrlen) == 0) break;
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    if (std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  freeaddrinfo(res);
  if (fd_ < 0) throw std::runtime_error("store: cannot connect to " + host + ":" + std::to_string(port));
  const int one = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

StoreClient::~StoreClient() {
  if (fd_ >= 0) ::close(fd_);
}

void StoreClient::request(uint8_t op, const std::vector<std::string>& keys, const std::vector<char>* value,
                          uint32_t timeout_ms) {
  std::vector<char> out;
  out.push_back(static_cast<char>(op));
  putU32(&out, static_cast<uint32_t>(keys.size()));
  for (const auto& k : keys) {
    putU32(&out, static_cast<uint32_t>(k.size()));
    out.insert(out.end(), k.begin(), k.end());
  }
  if (value != nullptr) {
    putU32(&out, static_cast<uint32_t>(value->size()));
    out.insert(out.end(), value->begin(), value->end());
  }
  if (op == kWait) putU32(&out, timeout_ms);
  if (!writeAll(fd_, out.data(), out.size())) throw std::runtime_error("store: connection lost");
}

void StoreClient::set(const std::string& key, const std::vector<char>& value) {
  std::lock_guard<std::mutex> lk(mu_);
  request(kSet, {key}, &value, 0);
  uint8_t ok = 0;
  if (!readAll(fd_, &ok, 1) || ok != 1) throw std::runtime_error("store: set failed");
}

std::vector<char> StoreClient::get(const std::string& key) {
  std::lock_guard<std::mutex> lk(mu_);
  request(kGet, {key}, nullptr, 0);
  uint8_t ok = 0;
  std::vector<char> v;
  if (!readAll(fd_, &ok, 1) || !readBlob(fd_, &v)) throw std::runtime_error("store: connection lost");
  if (ok != 1) throw std::runtime_error("store: key " + key + " did not appear in time");
  return v;
}

void StoreClient::wait(const std::vector<std::string>& keys, int timeout_ms) {
  std::lock_guard<std::mutex> lk(mu_);
  request(kWait, keys, nullptr, static_cast<uint32_t>(timeout_ms));
  uint8_t ok = 0;
  if (!readAll(fd_, &ok, 1)) throw std::runtime_error("store: connection lost");
  if (ok != 1) throw std::runtime_error("store: keys did not appear within the timeout");
}

}  // namespace pccl::bench
