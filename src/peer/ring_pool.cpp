#include "peer/ring_pool.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "net/endpoint.hpp"
#include "util/log.hpp"

namespace pccl::peer {

namespace {
constexpr const char* kLog = "ring";
constexpr size_t kMaxEarly = 256;
}  // namespace

using wire::linkConnections;

RingPlan planRing(const std::vector<wire::MemberInfo>& ring, const wire::Uuid& self, uint64_t epoch) {
  RingPlan plan;
  plan.epoch = epoch;
  plan.self = self;
  const wire::MemberInfo* mine = nullptr;
  for (const auto& m : ring) {
    if (m.id == self) mine = &m;
  }
  if (mine == nullptr) return plan;
  uint32_t my_group = mine->group;
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
  plan.successor_connections = linkConnections(*mine, succ);
  plan.predecessor = pred.id;
  plan.predecessor_key = pred.ring_key;
  plan.predecessor_connections = linkConnections(pred, *mine);
  plan.successor_same_host = sameHost(mine->host, succ.host);
  plan.predecessor_same_host = sameHost(pred.host, mine->host);
  return plan;
}

std::vector<uint8_t> ringHelloSigned(const net::SessionId& session, const wire::P2PHello& hello) {
  static constexpr char kLabel[] = "pccl ring hello v3";
  std::vector<uint8_t> out;
  out.reserve(sizeof kLabel - 1 + session.size() + 28);
  wire::ByteWriter w(&out);
  w.bytes(kLabel, sizeof kLabel - 1);
  w.fixed(session);
  w.fixed(hello.sender_id);
  w.u64(hello.epoch);
  w.u32(hello.index);
  return out;
}

RingPool::RingPool(asio::io_context& io, std::shared_ptr<const net::AuthKey> key,
                   std::shared_ptr<const net::SigningKey> identity, Millis handshake_timeout, Millis build_timeout,
                   bool lend)
    : io_(io),
      key_(std::move(key)),
      identity_(std::move(identity)),
      timeout_(handshake_timeout),
      build_timeout_(build_timeout),
      lend_(lend),
      deadline_(io) {}

RingPool::~RingPool() {
  *alive_ = false;
  reset(Status::ok());
  for (auto& e : early_) e.io->fail(Status::ok());
}

size_t RingPool::count(const Channels& c) const {
  return static_cast<size_t>(std::count_if(c.begin(), c.end(), [](const auto& ch) { return ch != nullptr; }));
}

void RingPool::reset(const Status& why) {
  building_ = false;
  done_ = nullptr;
  deadline_.cancel();
  Channels all = std::move(out_);
  all.insert(all.end(), in_.begin(), in_.end());
  out_.clear();
  in_.clear();
  claimed_.clear();
  for (auto& c : all) {
    if (c) c->close(why.isOk() ? Status::peerLost("ring connections reset") : why);
  }
}

void RingPool::build(const RingPlan& plan, Done done) {
  reset(Status::ok());
  plan_ = plan;
  done_ = std::move(done);
  building_ = true;
  if (plan.alone) return finish(Status::ok());
  out_.assign(plan.successor_connections, nullptr);
  in_.assign(plan.predecessor_connections, nullptr);
  claimed_.assign(plan.predecessor_connections, false);
  deadline_.expires_after(build_timeout_);
  deadline_.async_wait([this, alive = alive_, epoch = plan.epoch](const asio::error_code& ec) {
    if (ec || !*alive || !building_ || plan_.epoch != epoch) return;
    finish(Status::timeout(fmt::format("ring connections for epoch {} not up within {} ms ({}/{} to successor {}, "
                                       "{}/{} from predecessor {})",
                                       epoch, build_timeout_.count(), count(out_), out_.size(),
                                       wire::shortId(plan_.successor.id), count(in_), in_.size(),
                                       wire::shortId(plan_.predecessor))));
  });
  for (uint32_t i = 0; i < plan.successor_connections; ++i) connectOne(i, plan.epoch);
  // Connections that reached us before we learnt this epoch.
  std::vector<Early> early = std::move(early_);
  early_.clear();
  for (auto& e : early) {
    if (!e.io->done()) onHello(e.io, e.hello);
  }
}

void RingPool::connectOne(uint32_t index, uint64_t epoch) {
  std::string who = "ring successor " + wire::shortId(plan_.successor.id) + " at " +
                    net::HostPort{plan_.successor.host, plan_.successor.port}.toString();
  auto alive = alive_;
  auto stale = [this, alive, epoch] { return !*alive || !building_ || plan_.epoch != epoch; };
  auto fail = [this, stale, who](const Status& s) {
    if (!stale()) finish(s.withContext(who));
  };
  auto onAuthenticated = [this, index, epoch, who, stale, fail](net::Link link) {
    auto io = std::make_shared<net::FrameIo>(std::move(link), timeout_, fail);
    io->armDeadline();
    wire::P2PHello hello;
    hello.sender_id = plan_.self;
    hello.epoch = epoch;
    hello.index = index;
    const std::vector<uint8_t> signed_bytes = ringHelloSigned(io->session(), hello);
    hello.signature = identity_->sign(signed_bytes.data(), signed_bytes.size());
    io->write(wire::encodeFrame(hello, epoch), [this, io, index, epoch, who, stale] {
      io->readFrame([this, io, index, epoch, who, stale](Status s, const wire::FrameHeader& h,
                                                         const std::vector<uint8_t>& p) {
        if (stale()) return io->fail(Status::ok());
        if (s.isOk()) s = net::expectFrame<wire::P2PAccept>(h, p, who).status();
        if (!s.isOk()) return io->fail(s);
        out_[index] = std::make_shared<net::DataChannel>(io->release(), epoch, who);
        if (plan_.successor_same_host && lend_) out_[index]->enableLending();
        maybeDone();
      });
    });
  };
  net::ClientHandshake hs{wire::Role::kPeerToPeer, key_, timeout_, who};
  net::asyncDial(io_, net::HostPort{plan_.successor.host, plan_.successor.port}, hs,
                 [stale, fail, onAuthenticated](Result<net::Link> r) {
                   if (stale()) return;
                   if (!r.isOk()) return fail(r.status());
                   onAuthenticated(std::move(r).value());
                 });
}

void RingPool::adopt(net::Link link) {
  std::string who = net::remoteName(link.socket);
  auto io = std::make_shared<net::FrameIo>(std::move(link), timeout_, [who](const Status& s) {
    if (!s.isOk()) PCCL_LOG_DEBUG(kLog, "ring connection from {} dropped: {}", who, s.toString());
  });
  io->armDeadline();
  io->readFrame([this, io, alive = alive_, who](Status s, const wire::FrameHeader& h, const std::vector<uint8_t>& p) {
    if (!*alive) return io->fail(Status::ok());
    auto hello = s.isOk() ? net::expectFrame<wire::P2PHello>(h, p, who) : Result<wire::P2PHello>(s);
    if (!hello.isOk()) return io->fail(hello.status());
    onHello(io, *hello);
  });
}

void RingPool::onHello(const std::shared_ptr<net::FrameIo>& io, const wire::P2PHello& hello) {
  const uint64_t epoch = plan_.epoch;
  if (hello.epoch > epoch || (!building_ && epoch == 0)) {
    // From a ring we have not heard of yet: wait for our TopologyUpdate (the FrameIo deadline bounds it).
    early_.erase(std::remove_if(early_.begin(), early_.end(), [](const Early& e) { return e.io->done(); }),
                 early_.end());
    if (early_.size() >= kMaxEarly) {
      return io->rejectWith(Status::invalidUsage("too many ring connections waiting for their epoch"));
    }
    early_.push_back(Early{io, hello});
    return;
  }
  Status checked = checkHello(*io, hello);
  if (!checked.isOk()) return io->rejectWith(checked);
  // Claimed now, not when the P2PAccept is written: another connection may say the same index meanwhile.
  const uint32_t index = hello.index;
  claimed_[index] = true;
  std::string who = "ring predecessor " + wire::shortId(hello.sender_id);
  io->write(wire::encodeFrame(wire::P2PAccept{}, epoch), [this, io, index, epoch, who, alive = alive_] {
    // The build may have ended or moved on while the accept was written.
    if (!*alive || !building_ || plan_.epoch != epoch || index >= in_.size() || in_[index] != nullptr) {
      return io->fail(Status::ok());
    }
    in_[index] = std::make_shared<net::DataChannel>(io->release(), epoch, who);
    if (plan_.predecessor_same_host && lend_) in_[index]->enableLending();
    maybeDone();
  });
}

Status RingPool::checkHello(const net::FrameIo& io, const wire::P2PHello& hello) const {
  const uint64_t epoch = plan_.epoch;
  if (hello.epoch < epoch) {
    return Status::invalidUsage(fmt::format("stale epoch {}: this peer is at epoch {}", hello.epoch, epoch));
  }
  if (!building_ || plan_.alone || hello.sender_id != plan_.predecessor) {
    return Status::invalidUsage(
        fmt::format("peer {} is not our ring predecessor in epoch {}", wire::shortId(hello.sender_id), epoch));
  }
  const std::vector<uint8_t> signed_bytes = ringHelloSigned(io.session(), hello);
  if (!net::verifySignature(plan_.predecessor_key, signed_bytes.data(), signed_bytes.size(), hello.signature)) {
    return Status::authFailed(fmt::format(
        "ring hello claiming to be peer {} is not signed for this connection with the ring key the master lists "
        "for it in epoch {}", wire::shortId(hello.sender_id), epoch));
  }
  if (hello.index >= in_.size() || claimed_[hello.index]) {
    return Status::invalidUsage(fmt::format("bad or duplicate ring connection index {}", hello.index));
  }
  return Status::ok();
}

void RingPool::maybeDone() {
  if (!building_) return;
  if (count(out_) == out_.size() && count(in_) == in_.size()) finish(Status::ok());
}

void RingPool::finish(const Status& s) {
  if (!building_) return;
  building_ = false;
  deadline_.cancel();
  Done done = std::move(done_);
  done_ = nullptr;
  if (!s.isOk()) {
    Channels all = std::move(out_);
    all.insert(all.end(), in_.begin(), in_.end());
    out_.clear();
    in_.clear();
    for (auto& c : all) {
      if (c) c->close(s);
    }
  }
  if (done) done(plan_.epoch, s);
}

}  // namespace pccl::peer
