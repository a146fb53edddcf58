#include "peer/ring_pool.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "net/endpoint.hpp"

namespace pccl::peer {

namespace {
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
  HelloDial d =
      HelloDial::toMember(io_, plan_.successor, wire::Role::kPeerToPeer, key_, identity_, timeout_, "ring successor");
  d.self = plan_.self;
  d.epoch = epoch;
  d.index = index;
  auto alive = alive_;
  auto stale = [this, alive, epoch] { return !*alive || !building_ || plan_.epoch != epoch; };
  dialWithHello(d, stale, [this](const Status& s) { finish(s); },
                [this, index, epoch, who = d.who](net::Link link) {
                  out_[index] = std::make_shared<net::DataChannel>(std::move(link), epoch, who);
                  if (plan_.successor_same_host && lend_) out_[index]->enableLending(net::LendRole::kDialer);
                  maybeDone();
                });
}

void RingPool::adopt(net::Link link) {
  readHello(std::move(link), timeout_, "ring", alive_,
            [this](const std::shared_ptr<net::FrameIo>& io, const wire::P2PHello& hello) { onHello(io, hello); });
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
    if (plan_.predecessor_same_host && lend_) in_[index]->enableLending(net::LendRole::kAcceptor);
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
  PCCL_RETURN_IF_ERROR(verifyHello(io, hello, plan_.predecessor_key, "ring", fmt::format(" in epoch {}", epoch)));
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
