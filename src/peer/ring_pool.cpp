#include "peer/ring_pool.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "net/endpoint.hpp"
#include "util/log.hpp"

namespace pccl::peer {

namespace {
constexpr const char* kLog = "ring";
constexpr size_t kMaxParked = 256;
}  // namespace

RingPlan planRing(const std::vector<wire::MemberInfo>& ring, const wire::Uuid& self, uint64_t epoch,
                  uint32_t my_connections) {
  RingPlan plan;
  plan.epoch = epoch;
  plan.self = self;
  uint32_t my_group = 0;
  for (const auto& m : ring) {
    if (m.id == self) my_group = m.group;
  }
  std::vector<const wire::MemberInfo*> group;
  size_t me = 0;
  for (const auto& m : ring) {
    if (m.group != my_group) continue;
    if (m.id == self) me = group.size();
    group.push_back(&m);
  }
  if (group.size() <= 1) return plan;
  plan.alone = false;
  const wire::MemberInfo& succ = *group[(me + 1) % group.size()];
  const wire::MemberInfo& pred = *group[(me + group.size() - 1) % group.size()];
  plan.successor = succ;
  plan.successor_connections = my_connections;
  plan.predecessor = pred.id;
  plan.predecessor_connections = pred.connections;
  return plan;
}

RingPool::RingPool(asio::io_context& io, std::shared_ptr<const net::AuthKey> key, Millis handshake_timeout,
                   Millis build_timeout)
    : io_(io),
      key_(std::move(key)),
      timeout_(handshake_timeout),
      build_timeout_(build_timeout),
      sweep_(io),
      deadline_(io) {}

RingPool::~RingPool() {
  *alive_ = false;
  reset();
  for (auto& p : parked_) p.conn->close(Status::ok());
  for (auto& c : unidentified_) c->close(Status::ok());
}

size_t RingPool::outboundCount() const {
  return static_cast<size_t>(std::count_if(out_.begin(), out_.end(), [](const auto& c) { return c != nullptr; }));
}
size_t RingPool::inboundCount() const {
  return static_cast<size_t>(std::count_if(in_.begin(), in_.end(), [](const auto& c) { return c != nullptr; }));
}

void RingPool::reset() {
  building_ = false;
  done_ = nullptr;
  deadline_.cancel();
  for (auto& c : out_) if (c) c->close(Status::ok());
  for (auto& c : in_) if (c) c->close(Status::ok());
  out_.clear();
  in_.clear();
}

void RingPool::build(const RingPlan& plan, Done done) {
  reset();
  plan_ = plan;
  done_ = std::move(done);
  building_ = true;
  if (plan.alone) return finish(Status::ok());
  out_.assign(plan.successor_connections, nullptr);
  in_.assign(plan.predecessor_connections, nullptr);
  deadline_.expires_after(build_timeout_);
  deadline_.async_wait([this, alive = alive_, epoch = plan.epoch](const asio::error_code& ec) {
    if (ec || !*alive || !building_ || plan_.epoch != epoch) return;
    finish(Status::timeout(fmt::format("ring connections for epoch {} not up within {} ms ({}/{} to successor {}, "
                                       "{}/{} from predecessor {})",
                                       epoch, build_timeout_.count(), outboundCount(), out_.size(),
                                       wire::shortId(plan_.successor.id), inboundCount(), in_.size(),
                                       wire::shortId(plan_.predecessor))));
  });
  for (uint32_t i = 0; i < plan.successor_connections; ++i) connectOne(i, plan.epoch);
  // Connections that reached us before we learnt this epoch.
  std::vector<Parked> parked = std::move(parked_);
  parked_.clear();
  for (auto& p : parked) onHello(p.conn, p.hello);
}

void RingPool::connectOne(uint32_t index, uint64_t epoch) {
  auto resolver = std::make_shared<net::Tcp::resolver>(io_);
  auto socket = std::make_shared<net::Tcp::socket>(io_);
  std::string who = "ring successor " + wire::shortId(plan_.successor.id) + " at " +
                    net::HostPort{plan_.successor.host, plan_.successor.port}.toString();
  auto alive = alive_;
  auto stale = [this, alive, epoch] { return !*alive || !building_ || plan_.epoch != epoch; };
  auto fail = [this, stale, who](const Status& s) {
    if (!stale()) finish(s.withContext(who));
  };
  resolver->async_resolve(
      plan_.successor.host, std::to_string(plan_.successor.port),
      [this, resolver, socket, index, epoch, who, stale, fail](const asio::error_code& ec,
                                                               net::Tcp::resolver::results_type res) {
        if (stale()) return;
        if (ec) return fail(Status::peerLost("resolve failed: " + ec.message()));
        asio::async_connect(*socket, res, [this, socket, index, epoch, who, stale, fail](const asio::error_code& ec2,
                                                                                        const net::Tcp::endpoint&) {
          if (stale()) return;
          if (ec2) return fail(Status::peerLost("connect failed: " + ec2.message()));
          net::ClientHandshake hs{wire::Role::kPeerToPeer, key_, timeout_, who};
          net::asyncClientHandshake(std::move(*socket), hs, [this, index, epoch, stale, fail](Result<net::Tcp::socket> r) {
            if (stale()) return;
            if (!r.isOk()) return fail(r.status());
            auto conn = std::make_shared<net::Connection>(std::move(r).value(), wire::kMaxControlPayload);
            std::weak_ptr<net::Connection> weak = conn;
            conn->start(
                [this, index, weak, stale](const wire::FrameHeader& h, const uint8_t* p, size_t n) -> Status {
                  if (out_.size() > index && out_[index] != nullptr && out_[index] == weak.lock()) {
                    // Accepted already: nothing else is defined on a ring connection yet.
                    return Status::protocol(std::string("unexpected ") + wire::msgTypeName(h.type) +
                                            " on a ring connection");
                  }
                  if (stale()) return Status::ok();
                  if (h.type == static_cast<uint16_t>(wire::MsgType::kError)) {
                    auto e = wire::decodePayload<wire::Error>(p, n);
                    return e.isOk() ? net::statusFromRemoteError(*e, "ring successor") : e.status();
                  }
                  auto acc = wire::decodePayload<wire::P2PAccept>(p, n);
                  if (h.type != static_cast<uint16_t>(wire::MsgType::kP2PAccept) || !acc.isOk() ||
                      index >= out_.size() || out_[index]) {
                    return Status::protocol("expected P2PAccept from the ring successor");
                  }
                  out_[index] = weak.lock();
                  maybeDone();
                  return Status::ok();
                },
                [this, index, stale, fail, weak](const Status& why) {
                  if (stale()) return;
                  // A ring connection that breaks before the ring is complete fails the build.
                  if (index < out_.size() && (out_[index] == nullptr || out_[index] == weak.lock())) {
                    fail(why.code() == Code::kOk ? Status::peerLost("closed") : why);
                  }
                });
            wire::P2PHello hello;
            hello.sender_id = plan_.self;
            hello.epoch = epoch;
            hello.index = index;
            conn->send(hello, epoch);
          });
        });
      });
}

void RingPool::adopt(net::Tcp::socket socket) {
  auto conn = std::make_shared<net::Connection>(std::move(socket), wire::kMaxControlPayload);
  std::weak_ptr<net::Connection> weak = conn;
  auto got_hello = std::make_shared<bool>(false);
  unidentified_.push_back(conn);
  conn->start(
      [this, weak, got_hello, alive = alive_](const wire::FrameHeader& h, const uint8_t* p, size_t n) -> Status {
        if (!*alive) return Status::ok();
        if (*got_hello) return Status::protocol(std::string("unexpected ") + wire::msgTypeName(h.type) + " on a ring connection");
        if (h.type != static_cast<uint16_t>(wire::MsgType::kP2PHello)) {
          return Status::protocol("the first message on a ring connection must be P2PHello");
        }
        auto hello = wire::decodePayload<wire::P2PHello>(p, n);
        if (!hello.isOk()) return hello.status();
        *got_hello = true;
        auto c = weak.lock();
        unidentified_.erase(std::remove(unidentified_.begin(), unidentified_.end(), c), unidentified_.end());
        onHello(c, *hello);
        return Status::ok();
      },
      [this, weak, alive = alive_](const Status& why) {
        if (!*alive) return;
        auto c = weak.lock();
        unidentified_.erase(std::remove(unidentified_.begin(), unidentified_.end(), c), unidentified_.end());
        auto it = std::find(in_.begin(), in_.end(), c);
        if (it != in_.end() && c != nullptr) {
          PCCL_LOG_DEBUG(kLog, "inbound ring connection from {} closed: {}", c->peerName(), why.toString());
          if (building_) finish(Status::peerLost("ring predecessor closed a connection: " + why.message()));
        }
      });
}

void RingPool::onHello(const std::shared_ptr<net::Connection>& conn, const wire::P2PHello& hello) {
  if (!conn || !conn->isOpen()) return;
  bool known_epoch = building_ || plan_.epoch != 0;
  if (!known_epoch || hello.epoch > plan_.epoch) {
    sweepParked();
    if (parked_.size() >= kMaxParked) {
      conn->sendErrorAndClose(Status::invalidUsage("too many ring connections waiting for their epoch"), hello.epoch);
      return;
    }
    parked_.push_back(Parked{conn, hello, Clock::now()});
    armSweep();
    return;
  }
  if (hello.epoch < plan_.epoch) {
    conn->sendErrorAndClose(Status::invalidUsage(fmt::format("stale epoch {}: this peer is at epoch {}", hello.epoch,
                                                             plan_.epoch)),
                            plan_.epoch);
    return;
  }
  place(conn, hello);
}

void RingPool::place(const std::shared_ptr<net::Connection>& conn, const wire::P2PHello& hello) {
  if (hello.sender_id != plan_.predecessor || plan_.alone) {
    conn->sendErrorAndClose(Status::invalidUsage(fmt::format("peer {} is not our ring predecessor in epoch {}",
                                                             wire::shortId(hello.sender_id), plan_.epoch)),
                            plan_.epoch);
    return;
  }
  if (hello.index >= in_.size() || in_[hello.index] != nullptr) {
    conn->sendErrorAndClose(Status::invalidUsage(fmt::format("bad or duplicate ring connection index {}", hello.index)),
                            plan_.epoch);
    return;
  }
  in_[hello.index] = conn;
  conn->send(wire::P2PAccept{}, plan_.epoch);
  maybeDone();
}

void RingPool::sweepParked() {
  const TimePoint now = Clock::now();
  auto expired = [&](const Parked& p) { return !p.conn->isOpen() || now - p.since > timeout_; };
  for (auto& p : parked_) {
    if (p.conn->isOpen() && now - p.since > timeout_) p.conn->close(Status::timeout("parked too long"));
  }
  parked_.erase(std::remove_if(parked_.begin(), parked_.end(), expired), parked_.end());
}

void RingPool::armSweep() {
  if (parked_.empty()) return;
  sweep_.expires_after(timeout_);
  sweep_.async_wait([this, alive = alive_](const asio::error_code& ec) {
    if (ec || !*alive) return;
    sweepParked();
    armSweep();
  });
}

void RingPool::maybeDone() {
  if (!building_) return;
  if (outboundCount() == out_.size() && inboundCount() == in_.size()) finish(Status::ok());
}

void RingPool::finish(const Status& s) {
  if (!building_) return;
  building_ = false;
  deadline_.cancel();
  Done done = std::move(done_);
  done_ = nullptr;
  if (!s.isOk()) {
    for (auto& c : out_) if (c) c->close(Status::ok());
    for (auto& c : in_) if (c) c->close(Status::ok());
    out_.clear();
    in_.clear();
  }
  if (done) done(plan_.epoch, s);
}

}  // namespace pccl::peer
