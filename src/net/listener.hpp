// Accepts TCP connections and authenticates each one; hands over only authenticated sockets.
// Bounds the number of connections still handshaking, so a flood of silent connections cannot
// tie anything up: beyond the bound, new connections are closed at once.
// Thread: the owning io_context's thread.
#ifndef PCCL_NET_LISTENER_HPP_
#define PCCL_NET_LISTENER_HPP_

#include <functional>
#include <memory>
#include <string>

#include "net/asio.hpp"
#include "net/endpoint.hpp"
#include "net/handshake.hpp"

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
  uint16_t port() const { return port_; }
  std::string boundAddress() const;

 private:
  void acceptNext();

  ListenerConfig config_;
  Tcp::acceptor acceptor_;
  OnAuthenticated on_authenticated_;
  uint16_t port_ = 0;
  uint32_t pending_ = 0;
  bool closed_ = false;
};

}  // namespace pccl::net

#endif  // PCCL_NET_LISTENER_HPP_
