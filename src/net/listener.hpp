// Accepts TCP connections and authenticates each one; hands over only authenticated sockets.
// Bounds the number of connections still handshaking, so a flood of silent connections cannot
// tie anything up: beyond the bound, new connections are closed at once. A failing accept (out of file
// descriptors: EMFILE/ENFILE, or of kernel memory) is retried after a pause that doubles from 10 ms to
// 1 s, so the process neither spins nor floods its log (one warning per episode, one line when accepting
// works again); connections wait in the kernel's backlog meanwhile.
// Thread: the owning io_context's thread.
#ifndef PCCL_NET_LISTENER_HPP_
#define PCCL_NET_LISTENER_HPP_

#include <functional>
#include <memory>
#include <string>

#include "net/asio.hpp"
#include "net/endpoint.hpp"
#include "net/handshake.hpp"
#include "util/clock.hpp"

namespace pccl::net {

struct ListenerConfig {
  HostPort address;
  std::shared_ptr<const AuthKey> key;
  Millis handshake_timeout{5000};
  uint32_t max_pending_handshakes = 64;
  std::string name = "listener";  // log component
};

class Listener : public std::enable_shared_from_this<Listener> {
 public:
  using OnAuthenticated = std::function<void(Authenticated)>;

  Listener(asio::io_context& io, ListenerConfig config);
  Status open();  // binds and listens; call from any thread before start()
  void start(OnAuthenticated on_authenticated);
  void close();
  // A connection this process opened that the remote end treats as one it opened (a relayed ring
  // link's receiving end, peer/relay.hpp): authenticated as if it had been accepted here, then handed
  // to start()'s callback. Thread: the io thread, after start().
  void adopt(Tcp::socket socket);
  // Authentications in progress at once beyond which new connections are refused (a peer raises it to
  // what its ring plan makes others open to it). Thread: the io thread.
  void setMaxPendingHandshakes(uint32_t n) { config_.max_pending_handshakes = n; }
  uint16_t port() const { return port_; }
  std::string boundAddress() const;

 private:
  void acceptNext();
  void authenticate(Tcp::socket socket, const std::string& who);
  void acceptFailed(const asio::error_code& ec);

  ListenerConfig config_;
  Tcp::acceptor acceptor_;
  OnAuthenticated on_authenticated_;
  uint16_t port_ = 0;
  uint32_t pending_ = 0;
  bool closed_ = false;
  asio::steady_timer retry_;    // the pause after a failed accept
  Millis backoff_;              // the next pause
  uint64_t failures_ = 0;       // failed accepts in the current episode
  TimePoint failing_since_{};
};

}  // namespace pccl::net

#endif  // PCCL_NET_LISTENER_HPP_
