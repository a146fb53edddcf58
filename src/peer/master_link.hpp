// A peer's control connection to the master: connect, authenticate, then frames both ways and
// heartbeats. Callers register message handlers on dispatcher() before open().
// Thread: the communicator's io thread.
#ifndef PCCL_PEER_MASTER_LINK_HPP_
#define PCCL_PEER_MASTER_LINK_HPP_

#include <functional>
#include <memory>

#include "net/connection.hpp"
#include "net/endpoint.hpp"
#include "net/handshake.hpp"
#include "wire/dispatch.hpp"

namespace pccl::peer {

class MasterLink {
 public:
  using Callback = std::function<void(const Status&)>;

  MasterLink(asio::io_context& io, std::shared_ptr<const net::AuthKey> key, Millis handshake_timeout);
  ~MasterLink();

  wire::Dispatcher& dispatcher() { return dispatcher_; }

  // on_open: once, after authentication (or with the failure). on_lost: once, if an open link breaks
  // (EOF, heartbeat timeout, an Error from the master) — not after close() or leave(). A link that was
  // lost or closed may be opened again (to the same master or another): what the old connection still
  // reports is ignored.
  void open(const net::HostPort& master, Callback on_open, Callback on_lost);
  // The master's expectations (from JoinAccepted) combined with ours.
  void startHeartbeats(Millis interval, Millis timeout);
  template <typename Msg>
  void send(const Msg& m, uint64_t epoch) {
    if (conn_ && !closing_) conn_->send(m, epoch);
  }
  // Ready: the master took us in (a fresh join, or the run resumed after we came back to it). Until
  // then only the join and heartbeats go out; the collectives' reports wait (Collectives::masterBack).
  void setReady(bool ready) { ready_ = ready; }
  bool isReady() const { return ready_ && conn_ && !closing_ && conn_->isOpen(); }
  // The last loss was the master's own Error (a refusal, a kick), not a broken connection.
  bool refused() const { return refused_; }
  const std::string& masterName() const { return master_name_; }
  // The open connection's session id (zeros when none is open): a resuming JoinRequest signs it.
  net::SessionId session() const { return conn_ ? conn_->session() : net::SessionId{}; }
  // Sends Leave and closes; `done` runs once the link is closed.
  void leave(uint64_t epoch, std::function<void()> done);
  void close();
  // The connection is reset under us (tests: a middlebox's RST): both ends see it broken.
  void resetForTest() {
    if (conn_) conn_->reset(Status::peerLost("the connection to the master was reset"));
  }
  // The master closed the connection (or it broke) and we have not read that yet (net::Connection).
  bool remoteClosed() const { return !conn_ || conn_->remoteClosed(); }

 private:
  void tick();
  void lost(const Status& s);

  asio::io_context& io_;
  std::shared_ptr<const net::AuthKey> key_;
  Millis handshake_timeout_;
  wire::Dispatcher dispatcher_;
  std::shared_ptr<net::Connection> conn_;
  asio::steady_timer timer_;
  Millis interval_{1000};
  Millis timeout_{10000};
  TimePoint last_tx_{};
  Callback on_lost_;
  std::function<void()> on_left_;
  std::string master_name_;
  bool closing_ = false;
  bool ready_ = false;
  bool refused_ = false;
  uint64_t generation_ = 0;  // bumped by open(): callbacks of an older connection are ignored
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace pccl::peer

#endif  // PCCL_PEER_MASTER_LINK_HPP_
