#include "probe.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include "netns.hpp"

namespace pccl::wanem {

namespace {
constexpr uint16_t kPort = 47999;

// The probe's two threads run SCHED_FIFO, below the router's threads (writer 10, reader 20): on a busy machine the round
// trip then measures the emulated path, not how long the endpoints wait for a CPU. Best effort.
void realtimeSelf() {
  sched_param sp{};
  sp.sched_priority = 5;
  pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);
}

int tcpSocket() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  return fd;
}

// Echoes bytes until the client closes. Runs in the server namespace.
std::string serve(const std::string& ns, const std::string& addr, std::promise<void>* listening) {
  realtimeSelf();
  std::string error;
  if (!Network::enter(ns, &error)) {
    listening->set_value();
    return error;
  }
  const int lfd = tcpSocket();
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(kPort);
  inet_pton(AF_INET, addr.c_str(), &sa.sin_addr);
  const bool ok = ::bind(lfd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0 && ::listen(lfd, 1) == 0;
  listening->set_value();
  if (!ok) return close(lfd), "probe server cannot listen";
  pollfd p{lfd, POLLIN, 0};
  if (poll(&p, 1, 10000) <= 0) return close(lfd), "probe client never connected";
  const int fd = ::accept(lfd, nullptr, nullptr);
  close(lfd);
  char c;
  while (::recv(fd, &c, 1, 0) == 1) {
    if (::send(fd, &c, 1, MSG_NOSIGNAL) != 1) break;
  }
  close(fd);
  return "";
}
}  // namespace

ProbeResult probeRtt(const std::string& client_ns, const std::string& server_ns, const std::string& server_addr,
                     int rounds) {
  ProbeResult r;
  std::promise<void> listening;
  auto server = std::async(std::launch::async, serve, server_ns, server_addr, &listening);
  listening.get_future().wait();
  std::vector<double> rtts;
  auto client = std::async(std::launch::async, [&]() -> std::string {
    realtimeSelf();
    std::string error;
    if (!Network::enter(client_ns, &error)) return error;
    const int fd = tcpSocket();
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(kPort);
    inet_pton(AF_INET, server_addr.c_str(), &sa.sin_addr);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) return close(fd), "probe cannot connect";
    for (int i = 0; i < rounds; ++i) {
      char c = 'x';
      const auto t0 = std::chrono::steady_clock::now();
      if (::send(fd, &c, 1, MSG_NOSIGNAL) != 1 || ::recv(fd, &c, 1, 0) != 1) return close(fd), "probe connection broke";
      rtts.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    close(fd);
    return "";
  });
  const std::string ce = client.get(), se = server.get();
  if (!ce.empty() || !se.empty()) {
    r.error = !ce.empty() ? ce : se;
    return r;
  }
  std::sort(rtts.begin(), rtts.end());
  r.ok = !rtts.empty();
  r.median_ms = rtts[rtts.size() / 2];
  r.min_ms = rtts.front();
  return r;
}

}  // namespace pccl::wanem

namespace pccl::wanem {

namespace {
// Counts what arrives; returns bytes received in [start + seconds/2, start + seconds] over that time.
std::string receive(const std::string& ns, const std::string& addr, double seconds, std::promise<void>* listening,
                    double* mbit) {
  std::string error;
  if (!Network::enter(ns, &error)) {
    listening->set_value();
    return error;
  }
  const int lfd = tcpSocket();
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(kPort + 1);
  inet_pton(AF_INET, addr.c_str(), &sa.sin_addr);
  const bool ok = ::bind(lfd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0 && ::listen(lfd, 1) == 0;
  listening->set_value();
  if (!ok) return close(lfd), "rate probe cannot listen";
  pollfd p{lfd, POLLIN, 0};
  if (poll(&p, 1, 10000) <= 0) return close(lfd), "rate probe sender never connected";
  const int fd = ::accept(lfd, nullptr, nullptr);
  close(lfd);
  std::vector<char> buf(1 << 20);
  const auto t0 = std::chrono::steady_clock::now();
  const auto half = t0 + std::chrono::duration<double>(seconds / 2);
  uint64_t counted = 0;
  std::chrono::steady_clock::time_point first{}, last{};
  for (;;) {
    const ssize_t n = ::recv(fd, buf.data(), buf.size(), 0);
    if (n <= 0) break;
    const auto now = std::chrono::steady_clock::now();
    if (now < half) continue;
    if (first == std::chrono::steady_clock::time_point{}) first = now;
    else counted += static_cast<uint64_t>(n);
    last = now;
  }
  close(fd);
  const double dt = std::chrono::duration<double>(last - first).count();
  *mbit = dt > 0 ? static_cast<double>(counted) * 8 / dt / 1e6 : 0;
  return "";
}
}  // namespace

RateResult probeRate(const std::string& sender_ns, const std::string& receiver_ns, const std::string& receiver_addr,
                     double seconds) {
  RateResult r;
  std::promise<void> listening;
  double mbit = 0;
  auto server = std::async(std::launch::async, receive, receiver_ns, receiver_addr, seconds, &listening, &mbit);
  listening.get_future().wait();
  auto client = std::async(std::launch::async, [&]() -> std::string {
    std::string error;
    if (!Network::enter(sender_ns, &error)) return error;
    const int fd = tcpSocket();
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(kPort + 1);
    inet_pton(AF_INET, receiver_addr.c_str(), &sa.sin_addr);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) return close(fd), "rate probe cannot connect";
    std::vector<char> buf(1 << 16, 'x');
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < end) {
      if (::send(fd, buf.data(), buf.size(), MSG_NOSIGNAL) <= 0) return close(fd), "rate probe connection broke";
    }
    close(fd);
    return "";
  });
  const std::string ce = client.get(), se = server.get();
  r.error = !ce.empty() ? ce : se;
  r.ok = r.error.empty() && mbit > 0;
  if (r.error.empty() && !r.ok) r.error = "nothing arrived in the second half of the transfer";
  r.goodput_mbit = mbit;
  return r;
}

}  // namespace pccl::wanem
