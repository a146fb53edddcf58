#include "peer/master_link.hpp"

#include <fmt/format.h>

#include <utility>

#include "util/log.hpp"

namespace pccl::peer {

MasterLink::MasterLink(asio::io_context& io, std::shared_ptr<const net::AuthKey> key, Millis handshake_timeout)
    : io_(io), key_(std::move(key)), handshake_timeout_(handshake_timeout), timer_(io) {
  dispatcher_.on<wire::Heartbeat>([](const wire::FrameHeader&, const wire::Heartbeat&) { return Status::ok(); });
  dispatcher_.on<wire::Error>([this](const wire::FrameHeader&, const wire::Error& e) {
    refused_ = true;
    lost(net::statusFromRemoteError(e, master_name_));
    return Status::ok();
  });
}

MasterLink::~MasterLink() {
  *alive_ = false;
  close();
}

void MasterLink::open(const net::HostPort& master, Callback on_open, Callback on_lost) {
  const uint64_t gen = ++generation_;  // first: what the old connection reports from here on is ignored
  if (conn_) conn_->close(Status::ok());
  conn_.reset();
  timer_.cancel();
  closing_ = false;
  ready_ = false;
  refused_ = false;
  on_left_ = nullptr;
  master_name_ = "master " + master.toString();
  on_lost_ = std::move(on_lost);
  auto resolver = std::make_shared<net::Tcp::resolver>(io_);
  auto socket = std::make_shared<net::Tcp::socket>(io_);
  auto alive = alive_;
  // Whether this attempt is still the link's current one (not destroyed, not replaced by another open()).
  auto current = [this, alive, gen] { return *alive && gen == generation_; };
  auto fail = [this, on_open](const asio::error_code& ec, const char* what) {
    on_open(Status::masterUnreachable(fmt::format("cannot {} {}: {}", what, master_name_, ec.message())));
  };
  resolver->async_resolve(
      master.host, std::to_string(master.port),
      [this, resolver, socket, current, on_open, fail](const asio::error_code& ec, net::Tcp::resolver::results_type res) {
        if (!current()) return;
        if (ec) return fail(ec, "resolve");
        // A master behind a firewall that drops packets never answers the SYN: bound the TCP connect by
        // the handshake deadline instead of the kernel's minutes of retries.
        auto timer = std::make_shared<asio::steady_timer>(io_, handshake_timeout_);
        auto timed_out = std::make_shared<bool>(false);
        timer->async_wait([socket, timed_out](const asio::error_code& e) {
          if (e) return;  // cancelled: the connect finished first
          *timed_out = true;
          socket->close();
        });
        asio::async_connect(*socket, res, [this, socket, timer, timed_out, current, on_open, fail](
                                              const asio::error_code& ec2, const net::Tcp::endpoint&) {
          timer->cancel();
          if (!current()) return;
          if (*timed_out) {
            return on_open(Status::masterUnreachable(fmt::format(
                "cannot connect to {}: no answer within {} ms (is a firewall dropping packets to its port?)",
                master_name_, handshake_timeout_.count())));
          }
          if (ec2) return fail(ec2, "connect to");
          net::ClientHandshake hs{wire::Role::kPeerToMaster, key_, handshake_timeout_, master_name_};
          net::asyncClientHandshake(std::move(*socket), hs, [this, current, on_open](Result<net::Link> r) {
            if (!current()) return;
            if (!r.isOk()) {
              Status s = r.status();
              // A master that never answers, or drops us mid-handshake, is unreachable; auth and version
              // problems keep their own codes.
              if (s.code() == Code::kSystemError || s.code() == Code::kTimeout) {
                s = Status::masterUnreachable(s.message()).withContext(master_name_);
              }
              return on_open(s);
            }
            conn_ = std::make_shared<net::Connection>(std::move(r).value(), wire::kMaxControlPayload);
            conn_->start([this](const wire::FrameHeader& h, const uint8_t* p, size_t n) {
                           return dispatcher_.dispatch(h, p, n);
                         },
                         [this, current](const Status& why) {
                           if (!current()) return;
                           if (closing_) {
                             if (on_left_) std::exchange(on_left_, nullptr)();
                             return;
                           }
                           lost(Status::masterUnreachable("connection to " + master_name_ + " lost: " + why.message()));
                         });
            last_tx_ = Clock::now();
            on_open(Status::ok());
          });
        });
      });
}

void MasterLink::startHeartbeats(Millis interval, Millis timeout) {
  interval_ = interval;
  timeout_ = timeout;
  tick();
}

void MasterLink::tick() {
  if (!conn_ || closing_ || !conn_->isOpen()) return;
  const TimePoint now = Clock::now();
  auto silent = std::chrono::duration_cast<Millis>(now - conn_->lastReceive());
  if (silent > timeout_) {
    return lost(Status::masterUnreachable(
        fmt::format("no heartbeat from {} for {} ms (timeout {} ms)", master_name_, silent.count(), timeout_.count())));
  }
  if (now - last_tx_ >= interval_) {
    conn_->send(wire::Heartbeat{}, 0);
    last_tx_ = now;
  }
  Millis period = std::clamp(std::min(interval_, timeout_ / 20), Millis(5), Millis(1000));
  timer_.expires_after(period);
  timer_.async_wait([this, alive = alive_, gen = generation_](const asio::error_code& ec) {
    if (!ec && *alive && gen == generation_) tick();
  });
}

void MasterLink::lost(const Status& s) {
  if (closing_) return;
  closing_ = true;
  ready_ = false;
  timer_.cancel();
  if (conn_) conn_->close(s);
  if (on_lost_) std::exchange(on_lost_, nullptr)(s);
}

void MasterLink::leave(uint64_t epoch, std::function<void()> done) {
  if (!conn_ || closing_ || !conn_->isOpen()) {
    closing_ = true;
    return done();
  }
  closing_ = true;
  timer_.cancel();
  on_left_ = std::move(done);
  conn_->send(wire::Leave{}, epoch);
  conn_->closeAfterFlush(Status::ok());
}

void MasterLink::close() {
  closing_ = true;
  ready_ = false;
  timer_.cancel();
  if (conn_) conn_->close(Status::ok());
}

}  // namespace pccl::peer
