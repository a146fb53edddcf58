#include "net/listener.hpp"

#include <algorithm>
#include <utility>

#include "util/log.hpp"

namespace pccl::net {

namespace {
constexpr Millis kMinBackoff{10};
constexpr Millis kMaxBackoff{1000};
}  // namespace

Listener::Listener(asio::io_context& io, ListenerConfig config)
    : config_(std::move(config)), acceptor_(io), retry_(io), backoff_(kMinBackoff) {}

Status Listener::open() {
  asio::error_code ec;
  auto addr = asio::ip::make_address(config_.address.host == "localhost" ? "127.0.0.1" : config_.address.host, ec);
  if (ec) {
    return Status::invalidArgument("listen address '" + config_.address.host + "' is not an IP address: " + ec.message());
  }
  Tcp::endpoint ep(addr, config_.address.port);
  acceptor_.open(ep.protocol(), ec);
  if (!ec) acceptor_.set_option(Tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor_.bind(ep, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return Status::systemError("cannot listen on " + config_.address.toString() + ": " + ec.message());
  port_ = acceptor_.local_endpoint(ec).port();
  return Status::ok();
}

std::string Listener::boundAddress() const { return HostPort{config_.address.host, port_}.toString(); }

void Listener::start(OnAuthenticated on_authenticated) {
  on_authenticated_ = std::move(on_authenticated);
  acceptNext();
}

void Listener::close() {
  closed_ = true;
  retry_.cancel();
  asio::error_code ec;
  acceptor_.close(ec);
}

void Listener::acceptNext() {
  auto self = shared_from_this();
  acceptor_.async_accept([this, self](const asio::error_code& ec, Tcp::socket socket) {
    if (closed_) return;
    if (ec) return acceptFailed(ec);
    if (failures_ > 0) {
      PCCL_LOG_INFO(config_.name, "accepting again after {} failed accepts over {} ms", failures_,
                    msSince(failing_since_));
      failures_ = 0;
      backoff_ = kMinBackoff;
    }
    std::string who = remoteName(socket);
    if (pending_ >= config_.max_pending_handshakes) {
      PCCL_LOG_WARN(config_.name, "refusing {}: {} handshakes already in progress", who, pending_);
      asio::error_code ignore;
      socket.close(ignore);
      return acceptNext();
    }
    authenticate(std::move(socket), who);
    acceptNext();
  });
}

void Listener::adopt(Tcp::socket socket) {
  if (closed_) return;
  std::string who = remoteName(socket) + " (relayed)";
  authenticate(std::move(socket), who);
}

void Listener::authenticate(Tcp::socket socket, const std::string& who) {
  auto self = shared_from_this();
  ++pending_;
  ServerHandshake params{config_.key, config_.handshake_timeout};
  asyncServerHandshake(std::move(socket), params, [this, self, who](Result<Authenticated> r) {
    --pending_;
    if (closed_) return;
    if (!r.isOk()) {
      PCCL_LOG_WARN(config_.name, "dropped connection from {}: {}", who, r.status().toString());
      return;
    }
    on_authenticated_(std::move(r).value());
  });
}

void Listener::acceptFailed(const asio::error_code& ec) {
  // Usually out of descriptors (EMFILE/ENFILE) or kernel memory: retrying at once would fail again at
  // once. The connection waits in the backlog; we try again after the pause.
  if (failures_++ == 0) {
    failing_since_ = Clock::now();
    PCCL_LOG_WARN(config_.name, "accept failed: {}; retrying every {}..{} ms until it works (not logged again "
                  "until then)", ec.message(), kMinBackoff.count(), kMaxBackoff.count());
  }
  retry_.expires_after(backoff_);
  backoff_ = std::min(backoff_ * 2, kMaxBackoff);
  retry_.async_wait([this, self = shared_from_this()](const asio::error_code& wait_ec) {
    if (wait_ec || closed_) return;
    acceptNext();
  });
}

}  // namespace pccl::net
