// A relay for many TCP connections on loopback, for network faults that leave both ends alive: every
// connection accepted on port() is forwarded to the target port, both directions, until the test
// silences it. A silenced connection stays open at both ends but forwards nothing (a middlebox that
// dropped the flow, a path gone dark); its client side can also be closed while the server side stays
// open and silent (the client notices and re-dials, the server still believes in the old connection).
// It can also lose one answer: dropAnswerTo(needle) forwards the next request that contains `needle`,
// then drops the server's answer to it and closes that connection's client side (the server acted on
// the request; the client never hears, and sees its connection closed before any answer).
// One background thread driven by poll(), non-blocking sends with per-direction queues (a side that
// stops reading never blocks the others); an eventfd stops it, another wakes it after a change. Every
// wait has a deadline.
#ifndef PCCL_TESTS_TCP_RELAY_HPP_
#define PCCL_TESTS_TCP_RELAY_HPP_

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <list>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "raw_socket.hpp"

namespace pccl::test {

class TcpRelay {
 public:
  explicit TcpRelay(uint16_t target_port) : target_(target_port) {
    stop_ = eventfd(0, EFD_CLOEXEC);
    wake_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    thread_ = std::thread([this] { run(); });
  }
  ~TcpRelay() {
    uint64_t one = 1;
    (void)!::write(stop_, &one, sizeof one);
    thread_.join();
    ::close(stop_);
    ::close(wake_);
  }
  TcpRelay(const TcpRelay&) = delete;
  TcpRelay& operator=(const TcpRelay&) = delete;

  uint16_t port() const { return listener_.port(); }

  // Every connection open now stops forwarding; with `close_clients`, its client side is also closed
  // (the server side stays open and hears nothing more). Connections accepted later forward as usual
  // unless blackhole(true).
  void silenceAll(bool close_clients) { change([&] { silence_all_ = close_clients ? 2 : 1; }); }
  // On: every connection, open or accepted later, forwards nothing (kept open) until blackhole(false),
  // after which the ones still open forward again (what they queued meanwhile is delivered).
  void blackhole(bool on) { change([&] { blackhole_ = on; }); }

  // One-shot: the next connection whose client sends bytes containing `needle` (e.g. "/v3/kv/txn")
  // forwards them to the server as usual; the server's answer is then dropped, the connection's client
  // side closed and its server side left open and silent. Connections after it forward as usual.
  void dropAnswerTo(const std::string& needle) {
    change([&] {
      drop_needle_ = needle;
      answers_dropped_ = 0;
    });
  }
  // Waits until the answer dropAnswerTo() armed for was dropped; false at the deadline.
  bool waitAnswerDropped(int timeout_ms) {
    std::unique_lock<std::mutex> lk(mu_);
    return cv_.wait_for(lk, std::chrono::milliseconds(timeout_ms), [&] { return answers_dropped_ > 0; });
  }

  // Connections accepted so far.
  size_t accepted() const {
    std::lock_guard<std::mutex> lk(mu_);
    return accepted_;
  }
  // Waits until at least `n` connections were accepted; false at the deadline.
  bool waitAccepted(size_t n, int timeout_ms) {
    std::unique_lock<std::mutex> lk(mu_);
    return cv_.wait_for(lk, std::chrono::milliseconds(timeout_ms), [&] { return accepted_ >= n; });
  }

 private:
  struct Pair {
    RawSocket client, server;
    std::vector<uint8_t> to_server, to_client;  // received, not yet written
    bool silent = false;                        // silenced for good (silenceAll): closes are not forwarded
    bool dead = false;
    bool drop_answer = false;                   // the request dropAnswerTo() looked for went through here
    std::string recent;                         // the client's last bytes, for a needle split across reads
  };

  template <typename Fn>
  void change(Fn fn) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      fn();
    }
    uint64_t one = 1;
    (void)!::write(wake_, &one, sizeof one);
  }

  static bool pump(int from, std::vector<uint8_t>* queue) {  // false: `from` closed or failed
    uint8_t buf[64 * 1024];
    const ssize_t n = ::recv(from, buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return false;
    if (n > 0) queue->insert(queue->end(), buf, buf + n);
    return true;
  }
  static bool flush(int to, std::vector<uint8_t>* queue) {  // false: `to` failed
    while (!queue->empty()) {
      const ssize_t n = ::send(to, queue->data(), queue->size(), MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n < 0) return errno == EAGAIN || errno == EINTR;
      queue->erase(queue->begin(), queue->begin() + n);
    }
    return true;
  }

  // Whether the client bytes of `p` from `from` on, with the few before them, hold `needle`.
  static bool sawNeedle(Pair& p, const std::vector<uint8_t>& queue, size_t from, const std::string& needle) {
    p.recent.append(queue.begin() + static_cast<std::ptrdiff_t>(from), queue.end());
    const bool found = p.recent.find(needle) != std::string::npos;
    if (p.recent.size() > needle.size()) p.recent.erase(0, p.recent.size() - needle.size());
    return found;
  }

  void run() {
    std::list<Pair> pairs;
    for (;;) {
      bool hole = false;
      std::string needle;
      {
        std::lock_guard<std::mutex> lk(mu_);
        hole = blackhole_;
        needle = drop_needle_;
        if (silence_all_ != 0) {
          for (Pair& p : pairs) {
            p.silent = true;
            if (silence_all_ == 2) p.client = RawSocket();
          }
          silence_all_ = 0;
        }
      }
      pairs.remove_if([](const Pair& p) { return p.dead; });
      std::vector<pollfd> fds = {{listener_.fd(), POLLIN, 0}, {stop_, POLLIN, 0}, {wake_, POLLIN, 0}};
      std::vector<Pair*> owners;
      for (Pair& p : pairs) {
        const bool flowing = !p.silent && !hole;
        const short cin = static_cast<short>((flowing ? POLLIN : 0) | (flowing && !p.to_client.empty() ? POLLOUT : 0));
        const short sin = static_cast<short>((flowing ? POLLIN : 0) | (flowing && !p.to_server.empty() ? POLLOUT : 0));
        if (p.client.ok()) {
          fds.push_back({p.client.fd(), cin, 0});
          owners.push_back(&p);
        }
        if (p.server.ok()) {
          fds.push_back({p.server.fd(), sin, 0});
          owners.push_back(&p);
        }
      }
      if (::poll(fds.data(), fds.size(), 60000) < 0 && errno != EINTR) return;
      if ((fds[1].revents & POLLIN) != 0) return;
      if ((fds[2].revents & POLLIN) != 0) {
        uint64_t v = 0;
        (void)!::read(wake_, &v, sizeof v);
      }
      if ((fds[0].revents & POLLIN) != 0) {
        RawSocket c = listener_.accept(0);
        RawSocket s = c.ok() ? RawSocket::connectTo(target_) : RawSocket();
        if (c.ok() && s.ok()) {
          pairs.push_back(Pair{std::move(c), std::move(s), {}, {}, false, false, false, {}});
          std::lock_guard<std::mutex> lk(mu_);
          ++accepted_;
          cv_.notify_all();
        }
        continue;  // `owners` may point into a list that changed: poll again
      }
      for (size_t i = 3; i < fds.size(); ++i) {
        Pair& p = *owners[i - 3];
        if (fds[i].revents == 0 || p.dead) continue;
        const bool is_client = p.client.ok() && fds[i].fd == p.client.fd();
        if (p.silent) {
          // Polled only for errors and hang-ups (POLLHUP, POLLERR): a silenced connection forwards no
          // close either. That side alone is closed; the other one stays open, and hears nothing.
          (is_client ? p.client : p.server) = RawSocket();
          p.dead = !p.client.ok() && !p.server.ok();
          continue;
        }
        std::vector<uint8_t>* in = is_client ? &p.to_server : &p.to_client;
        std::vector<uint8_t>* out = is_client ? &p.to_client : &p.to_server;
        const int other = is_client ? (p.server.ok() ? p.server.fd() : -1) : (p.client.ok() ? p.client.fd() : -1);
        const size_t had = in->size();
        if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) != 0 && !pump(fds[i].fd, in)) {
          // Closed: what it sent before still goes on (best effort) before the pair is dropped.
          if (!hole && other >= 0) (void)flush(other, in);
          p.dead = true;
          continue;
        }
        if (is_client && !needle.empty() && in->size() > had && sawNeedle(p, *in, had, needle)) {
          p.drop_answer = true;
          needle.clear();
          std::lock_guard<std::mutex> lk(mu_);
          drop_needle_.clear();
        }
        if (!is_client && p.drop_answer && !in->empty()) {
          in->clear();  // the answer is lost on its way back
          p.client = RawSocket();
          p.silent = true;
          p.drop_answer = false;
          std::lock_guard<std::mutex> lk(mu_);
          ++answers_dropped_;
          cv_.notify_all();
          continue;
        }
        if ((fds[i].revents & POLLOUT) != 0 && !flush(fds[i].fd, out)) p.dead = true;
        // Forward what just arrived at once when the other side can take it.
        if (!p.dead && !in->empty() && !p.silent && !hole && other >= 0 && !flush(other, in)) p.dead = true;
      }
    }
  }

  RawListener listener_;
  uint16_t target_;
  int stop_ = -1;
  int wake_ = -1;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  size_t accepted_ = 0;
  int silence_all_ = 0;  // 1: silence the open connections, 2: and close their client sides
  bool blackhole_ = false;
  std::string drop_needle_;    // dropAnswerTo(): armed while not empty
  size_t answers_dropped_ = 0;
  std::thread thread_;
};

}  // namespace pccl::test

#endif  // PCCL_TESTS_TCP_RELAY_HPP_
