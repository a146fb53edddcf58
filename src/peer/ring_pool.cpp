#include "peer/ring_pool.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "net/endpoint.hpp"
#include "peer/relay.hpp"
#include "util/log.hpp"

namespace pccl::peer {

namespace {
constexpr const char* kLog = "ring";
constexpr size_t kMaxParked = 256;  // inbound connections waiting for their epoch
constexpr Millis kFirstRedial{100}, kMaxRedial{1000};  // between re-dials of a broken connection
constexpr int kBuildDialAttempts = 3;                   // a ring build's dial of one connection
constexpr Millis kBuildRedial{200};

HelloAcceptor::Rules ringRules(std::function<bool(const wire::Uuid&)> resumable) {
  auto refuse = [](const wire::P2PHello& hello, uint64_t epoch) {
    if (hello.epoch < epoch) {
      return Status::invalidUsage(fmt::format("stale epoch {}: this peer is at epoch {}", hello.epoch, epoch));
    }
    return Status::invalidUsage(
        fmt::format("peer {} is not our ring predecessor in epoch {}", wire::shortId(hello.sender_id), epoch));
  };
  return {"ring", "ring predecessor", kMaxParked, "too many ring connections waiting for their epoch", refuse,
          [](uint64_t epoch) { return fmt::format(" in epoch {}", epoch); }, std::move(resumable)};
}
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
  plan.predecessor_at = pred;
  plan.dial_successor = wire::opensLink(*mine, succ);
  plan.dial_predecessor = !wire::opensLink(pred, *mine);
  for (const auto& m : ring) {
    if (mine->hasRelay() && m.id == mine->relay) {
      plan.successor_relayed = true;
      plan.successor_relay = m;
    }
    if (pred.hasRelay() && m.id == pred.relay) {
      plan.predecessor_relayed = true;
      plan.predecessor_relay = m;
    }
  }
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
      acceptor_(handshake_timeout, ringRules([this](const wire::Uuid& sender) { return resumableFrom(sender); })),
      deadline_(io) {}

RingPool::~RingPool() {
  *alive_ = false;
  reset(Status::ok());
}

size_t RingPool::count(const Channels& c) const {
  return static_cast<size_t>(std::count_if(c.begin(), c.end(), [](const auto& ch) { return ch != nullptr; }));
}

// Both directions' connections go (and the claims of the inbound ones).
void RingPool::closeAll(const Status& why) {
  Channels all = std::move(out_);
  out_.clear();
  for (auto& link : extra_out_) all.insert(all.end(), link.begin(), link.end());
  extra_out_.clear();
  all.insert(all.end(), in_.begin(), in_.end());
  in_.clear();
  Channels in = acceptor_.release();
  all.insert(all.end(), in.begin(), in.end());
  for (auto& c : all) {
    if (c) c->close(why);
  }
}

void RingPool::reset(const Status& why) {
  building_ = false;
  acceptor_.stop();
  done_ = nullptr;
  deadline_.cancel();
  closeAll(why.isOk() ? Status::peerLost("ring connections reset") : why);
}

void RingPool::build(const RingPlan& plan, Done done) {
  reset(Status::ok());
  plan_ = plan;
  done_ = std::move(done);
  building_ = true;
  if (plan.alone) {
    acceptor_.close(plan.epoch);
    return finish(Status::ok());
  }
  if (!plan.dial_successor) {
    PCCL_LOG_INFO(kLog, "epoch={}: ring successor {} cannot be dialled: it opens the {} connections we send on",
                  plan.epoch, wire::shortId(plan.successor.id), plan.successor_connections);
  }
  if (plan.dial_predecessor) {
    PCCL_LOG_INFO(kLog, "epoch={}: this peer cannot be dialled: it opens the {} connections its ring predecessor {} "
                  "sends on", plan.epoch, plan.predecessor_connections, wire::shortId(plan.predecessor));
  }
  out_.assign(plan.dial_successor ? plan.successor_connections : 0, nullptr);
  in_.assign(plan.dial_predecessor ? plan.predecessor_connections : 0, nullptr);
  extra_out_.assign(plan.extra.size(), Channels{});
  for (size_t i = 0; i < plan.extra.size(); ++i) {
    if (plan.extra[i].dial) extra_out_[i].assign(plan.extra[i].connections, nullptr);
  }
  deadline_.expires_after(build_timeout_);
  deadline_.async_wait([this, alive = alive_, epoch = plan.epoch](const asio::error_code& ec) {
    if (ec || !*alive || !building_ || plan_.epoch != epoch) return;
    finish(Status::timeout(fmt::format("ring connections for epoch {} not up within {} ms ({}/{} to successor {}, "
                                       "{}/{} from predecessor {})",
                                       epoch, build_timeout_.count(), count(outbound()), plan_.successor_connections,
                                       wire::shortId(plan_.successor.id), count(inbound()),
                                       plan_.predecessor_connections, wire::shortId(plan_.predecessor))));
  });
  for (uint32_t i = 0; plan.dial_successor && i < plan.successor_connections; ++i) {
    connectOne(plan.successor, kSuccessor, i, plan.epoch);
  }
  for (uint32_t i = 0; plan.dial_predecessor && i < plan.predecessor_connections; ++i) {
    connectOne(plan.predecessor_at, kPredecessor, i, plan.epoch);
  }
  for (uint32_t i = 0; plan.predecessor_relayed && i < plan.predecessor_connections; ++i) openFromRelay(i, plan.epoch);
  for (size_t e = 0; e < plan.extra.size(); ++e) {
    for (uint32_t i = 0; plan.extra[e].dial && i < plan.extra[e].connections; ++i) {
      connectOne(plan.extra[e].peer, static_cast<int>(e), i, plan.epoch);
    }
  }
  HelloAcceptor::Round round;
  round.id = plan.epoch;
  round.accepts = true;
  round.sender = plan.predecessor;
  round.sender_key = plan.predecessor_key;
  round.connections = plan.dial_predecessor ? 0 : plan.predecessor_connections;
  for (const auto& x : plan.extra) {
    if (!x.dial) round.more.push_back(HelloAcceptor::Sender{x.peer.id, x.peer.ring_key, x.connections});
  }
  if (!plan.dial_successor) {  // last: outbound() finds its slots at the end
    round.more.push_back(HelloAcceptor::Sender{plan.successor.id, plan.successor.ring_key,
                                               plan.successor_connections, true, "ring successor"});
  }
  // Replays what came before the plan.
  acceptor_.open(round, [this](uint32_t index, bool resumable) { onAccepted(index, resumable); });
}

void RingPool::connectOne(const wire::MemberInfo& to, int extra, uint32_t index, uint64_t epoch, int attempt,
                          bool resume) {
  HelloDial d = dialTo(to, extra, epoch, index);
  const bool ask = resumableTo(extra);
  if (ask) d.flags |= wire::kHelloResumable;
  // A hello went out before, on a connection that broke: the acceptor may hold that connection (it
  // accepted, we never read it), so this one resumes it, or is taken in as new where it holds none.
  if (resume) d.flags |= wire::kHelloResume;
  auto alive = alive_;
  auto stale = [this, alive, epoch] { return !*alive || !building_ || plan_.epoch != epoch; };
  // A connection reset or lost (a fault on the path) is dialled again, a few times; a refusal to
  // authenticate is not, nor the acceptor's refusal (docs/algorithms.md §6, "Network faults").
  auto again = [this, alive, to, extra, index, epoch, attempt](const Status& s, bool resume_next) {
    PCCL_LOG_DEBUG(kLog, "dial of connection {} failed {} its hello ({}); again in {} ms", index,
                   resume_next ? "after" : "before", s.toString(), kBuildRedial.count());
    auto t = std::make_shared<asio::steady_timer>(io_, kBuildRedial);
    t->async_wait([this, alive, t, to, extra, index, epoch, attempt, resume_next](const asio::error_code& ec) {
      if (!ec && *alive && building_ && plan_.epoch == epoch) connectOne(to, extra, index, epoch, attempt + 1, resume_next);
    });
  };
  const bool last = attempt + 1 >= kBuildDialAttempts;
  d.before_hello = [this, again, last, resume](const Status& s) {
    if (last || s.code() == Code::kAuthFailed || s.code() == Code::kVersionMismatch) return finish(s);
    again(s, resume);
  };
  // After the hello only a resumable link can be taken over by a new connection.
  const auto broken = [](const Status& s) {
    return s.code() == Code::kSystemError || s.code() == Code::kPeerLost || s.code() == Code::kTimeout;
  };
  dialWithHello(d, stale,
                [this, again, last, ask, broken](const Status& s) {
                  if (last || !ask || !broken(s)) return finish(s);
                  again(s, true);
                },
                [this, to, ask, extra, index, epoch, who = d.who](net::Link link, const wire::P2PAccept& accept) {
                  auto ch = std::make_shared<net::DataChannel>(std::move(link), epoch, who);
                  if (ask && (accept.flags & wire::kHelloResumable) != 0) {
                    ch->enableResume(resumeOptions(&to, extra, index, epoch));
                  }
                  if (extra == kSuccessor && plan_.successor_same_host && lend_) {
                    ch->enableLending(net::LendRole::kDialer);
                  }
                  slotsOf(extra)[index] = std::move(ch);
                  maybeDone();
                });
}

void RingPool::adopt(net::Link link) { acceptor_.adopt(std::move(link)); }

void RingPool::onAccepted(uint32_t index, bool resumable) {
  if (resumable) {
    acceptor_.channels()[index]->enableResume(resumeOptions(nullptr, -1, index, plan_.epoch));
  } else if (index < acceptedFromPredecessor() && plan_.predecessor_same_host && lend_) {
    acceptor_.channels()[index]->enableLending(net::LendRole::kAcceptor);
  }
  maybeDone();
}

// A link that lends payloads (a ring neighbour on this host, net/lending.hpp) does not resume: a lent
// frame names memory rather than carrying bytes. Two-level links never lend.
bool RingPool::resumableTo(int extra) const {
  if (extra == kSuccessor && plan_.successor_relayed) return false;  // a relayed link does not resume
  return resume_.on && (extra != kSuccessor || !(plan_.successor_same_host && lend_));
}

RingPool::Channels& RingPool::slotsOf(int extra) {
  if (extra == kSuccessor) return out_;
  if (extra == kPredecessor) return in_;
  return extra_out_[static_cast<size_t>(extra)];
}

HelloDial RingPool::dialTo(const wire::MemberInfo& to, int extra, uint64_t epoch, uint32_t index) const {
  HelloDial d = HelloDial::toMember(io_, to, wire::Role::kPeerToPeer, key_, identity_, timeout_,
                                    extra == kSuccessor     ? "ring successor"
                                    : extra == kPredecessor ? "ring predecessor"
                                                            : "linked peer");
  d.self = plan_.self;
  d.epoch = epoch;
  d.index = index;
  if (extra == kPredecessor) d.flags = wire::kHelloReverse;  // it sends, we dial (wire::opensLink)
  if (extra == kSuccessor && plan_.successor_relayed) {
    d.via_relay = true;
    d.relay = net::HostPort{plan_.successor_relay.host, plan_.successor_relay.port};
    d.relay_hello = wire::RelayHello{plan_.self, epoch, plan_.self, plan_.successor.id, index, {}};
  }
  return d;
}

void RingPool::openFromRelay(uint32_t index, uint64_t epoch) {
  RelayOpen o{&io_, net::HostPort{plan_.predecessor_relay.host, plan_.predecessor_relay.port}, key_, identity_,
              timeout_,
              fmt::format("relay {} of the ring link from predecessor {}", wire::shortId(plan_.predecessor_relay.id),
                          wire::shortId(plan_.predecessor)),
              wire::RelayHello{plan_.self, epoch, plan_.predecessor, plan_.self, index, {}}};
  openRelayed(o, [this, alive = alive_, epoch](Result<net::Tcp::socket> s) {
    if (!*alive || !building_ || plan_.epoch != epoch) return;
    if (!s.isOk()) return finish(s.status());
    if (adopt_inbound_) adopt_inbound_(std::move(s).value());
  });
}

bool RingPool::resumableFrom(const wire::Uuid& sender) const {
  if (!resume_.on) return false;
  if (sender == plan_.predecessor) return !(plan_.predecessor_same_host && lend_) && !plan_.predecessor_relayed;
  if (sender == plan_.successor.id && !plan_.dial_successor) return true;  // never on one host
  return std::any_of(plan_.extra.begin(), plan_.extra.end(), [&](const auto& x) { return x.peer.id == sender; });
}

net::ResumeOptions RingPool::resumeOptions(const wire::MemberInfo* to, int extra, uint32_t index, uint64_t epoch) {
  net::ResumeOptions o;
  o.wait = resume_.wait;
  o.stall = resume_.stall;
  o.resumed = [fn = resume_.resumed](net::DataChannel&, uint64_t resent, Millis stalled) {
    if (fn) fn(resent, stalled);
  };
  if (to == nullptr) return o;  // the remote dials again
  o.broken = [this, alive = alive_, to = *to, extra, index, epoch](net::DataChannel& ch, const Status&) {
    if (*alive && plan_.epoch == epoch) redial(ch.weak_from_this(), to, extra, index, epoch, kFirstRedial);
  };
  return o;
}

void RingPool::redial(std::weak_ptr<net::DataChannel> weak, const wire::MemberInfo& to, int extra, uint32_t index,
                      uint64_t epoch, Millis backoff) {
  auto ch = weak.lock();
  if (!ch || !ch->isOpen() || !ch->broken() || plan_.epoch != epoch) return;
  HelloDial d = dialTo(to, extra, epoch, index);
  d.flags |= wire::kHelloResumable | wire::kHelloResume;
  d.received = ch->framesReceived();
  auto alive = alive_;
  auto stale = [this, alive, weak, epoch] {
    auto c = weak.lock();
    return !*alive || plan_.epoch != epoch || !c || !c->isOpen() || !c->broken();
  };
  auto again = [this, alive, weak, to, extra, index, epoch, backoff](const Status& s) {
    PCCL_LOG_DEBUG(kLog, "re-dial of connection {} failed ({}); again in {} ms", index, s.toString(), backoff.count());
    auto t = std::make_shared<asio::steady_timer>(io_, backoff);
    t->async_wait([this, alive, t, weak, to, extra, index, epoch, backoff](const asio::error_code& ec) {
      if (!ec && *alive) redial(weak, to, extra, index, epoch, std::min(backoff * 2, kMaxRedial));
    });
  };
  dialWithHello(d, stale, again, [weak, who = d.who](net::Link link, const wire::P2PAccept& accept) {
    auto c = weak.lock();
    if (!c || !c->isOpen()) return;
    if ((accept.flags & wire::kHelloResumable) == 0) {
      return c->close(Status::protocol(who + " accepted a resume without resuming"));
    }
    (void)c->resumeOn(std::move(link), accept.received);  // a bad count closes the channel, with the reason
  });
}

uint32_t RingPool::acceptedFromPredecessor() const {
  return plan_.dial_predecessor ? 0 : plan_.predecessor_connections;
}

RingPool::Channels RingPool::outbound() const {
  if (plan_.dial_successor) return out_;
  const Channels& all = acceptor_.channels();  // a successor that dials us: the last slots
  const size_t n = std::min<size_t>(all.size(), plan_.successor_connections);
  return Channels(all.end() - static_cast<std::ptrdiff_t>(n), all.end());
}

RingPool::Channels RingPool::inbound() const {
  if (plan_.dial_predecessor) return in_;
  const Channels& all = acceptor_.channels();
  return Channels(all.begin(), all.begin() + std::min<size_t>(all.size(), acceptedFromPredecessor()));
}

std::vector<RingPool::Channels> RingPool::extraLinks() const {
  std::vector<Channels> out;
  const Channels& in = acceptor_.channels();
  size_t at = acceptedFromPredecessor();  // the accepted links' slots follow the predecessor's
  for (size_t e = 0; e < plan_.extra.size(); ++e) {
    if (plan_.extra[e].dial) {
      out.push_back(e < extra_out_.size() ? extra_out_[e] : Channels{});
      continue;
    }
    const size_t end = std::min(in.size(), at + plan_.extra[e].connections);
    out.emplace_back(in.begin() + std::min(at, end), in.begin() + end);
    at = end;
  }
  return out;
}

void RingPool::maybeDone() {
  if (!building_) return;
  for (const auto& link : extra_out_) {
    if (count(link) != link.size()) return;
  }
  if (count(in_) != in_.size()) return;
  if (count(out_) == out_.size() && count(acceptor_.channels()) == acceptor_.channels().size()) finish(Status::ok());
}

void RingPool::finish(const Status& s) {
  if (!building_) return;
  building_ = false;
  acceptor_.stop();
  deadline_.cancel();
  Done done = std::move(done_);
  done_ = nullptr;
  if (!s.isOk()) closeAll(s);
  if (done) done(plan_.epoch, s);
}

}  // namespace pccl::peer
