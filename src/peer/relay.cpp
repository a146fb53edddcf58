#include "peer/relay.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "util/log.hpp"
#include "wire/bytes.hpp"

namespace pccl::peer {

namespace {
constexpr const char* kLog = "ring";
constexpr char kLabel[] = "pccl relay hello v1";
constexpr size_t kMaxEarly = 64;             // hellos for a ring we have not heard of yet
constexpr size_t kSpliceBuffer = 256 << 10;  // per direction

// Test hook (tests/test_relay.cpp): what a hostile relay does to the bytes from `from` to `to`.
std::atomic<int> g_tamper{0};  // 0 none, 1 flip a byte, 2 send a chunk twice
}  // namespace

void relayTamperForTest(int mode) { g_tamper.store(mode); }

std::vector<uint8_t> relayHelloSigned(const net::SessionId& session, const wire::RelayHello& hello) {
  std::vector<uint8_t> out;
  wire::ByteWriter w(&out);
  w.bytes(kLabel, sizeof kLabel - 1);
  w.fixed(session);
  w.fixed(hello.sender_id);
  w.u64(hello.epoch);
  w.fixed(hello.from);
  w.fixed(hello.to);
  w.u32(hello.index);
  return out;
}

void openRelayed(const RelayOpen& o, std::function<void(Result<net::Tcp::socket>)> done) {
  net::ClientHandshake hs{wire::Role::kRelay, o.key, o.timeout, o.who};
  net::asyncDial(*o.io, o.relay, hs, [o, done](Result<net::Link> r) {
    if (!r.isOk()) return done(r.status().withContext(o.who));
    auto fail = [done, who = o.who](const Status& s) { done(s.withContext(who)); };
    auto io = std::make_shared<net::FrameIo>(std::move(r).value(), o.timeout, fail);
    io->armDeadline();
    wire::RelayHello hello = o.hello;
    const std::vector<uint8_t> bytes = relayHelloSigned(io->session(), hello);
    hello.signature = o.identity->sign(bytes.data(), bytes.size());
    io->write(wire::encodeFrame(hello, hello.epoch), [io, done, who = o.who] {
      // The deadline runs on: the other end must come within it too.
      io->readFrame([io, done, who](Status s, const wire::FrameHeader& h, const std::vector<uint8_t>& p) {
        auto ready = s.isOk() ? net::expectFrame<wire::RelayReady>(h, p, who) : Result<wire::RelayReady>(s);
        if (!ready.isOk()) return io->fail(ready.status());
        done(std::move(io->release().socket));
      });
    });
  });
}

Relay::~Relay() { shutdown(); }

void Relay::shutdown() {
  *alive_ = false;
  alive_ = std::make_shared<bool>(true);
  for (auto& [key, w] : waiting_) w.io->fail(Status::ok());
  waiting_.clear();
  for (auto& e : early_) e.first->fail(Status::ok());
  early_.clear();
  for (auto& weak : spliced_) {
    if (auto s = weak.lock()) {
      asio::error_code ignore;
      s->close(ignore);
    }
  }
  spliced_.clear();
}

void Relay::expect(uint64_t epoch, std::vector<Link> links) {
  epoch_ = epoch;
  links_ = std::move(links);
  for (auto it = waiting_.begin(); it != waiting_.end();) {  // an older ring's ends that never paired
    if (std::get<0>(it->first) < epoch) {
      it->second.io->rejectWith(Status::topologyChanged(fmt::format("the relay moved on to epoch {}", epoch)));
      it = waiting_.erase(it);
    } else {
      ++it;
    }
  }
  for (const Link& l : links_) {
    PCCL_LOG_INFO(kLog, "epoch={}: relaying the ring link {} -> {} ({} connections): both cannot be dialled", epoch,
                  wire::shortId(l.from.id), wire::shortId(l.to.id), l.connections);
  }
  std::vector<std::pair<std::shared_ptr<net::FrameIo>, wire::RelayHello>> early = std::move(early_);
  early_.clear();
  for (auto& [io, hello] : early) {
    if (hello.epoch < epoch) {
      io->rejectWith(Status::topologyChanged(fmt::format("the relay moved on to epoch {}", epoch)));
    } else {
      onHello(io, hello);  // this ring's, or parked again
    }
  }
}

std::vector<Relay::Link> relayedBy(const std::vector<wire::MemberInfo>& ring, const wire::Uuid& self) {
  std::vector<Relay::Link> out;
  for (size_t i = 0; i < ring.size(); ++i) {
    if (ring[i].relay != self) continue;
    for (size_t k = 1; k <= ring.size(); ++k) {  // its group successor, wrapping around
      const wire::MemberInfo& next = ring[(i + k) % ring.size()];
      if (next.group != ring[i].group) continue;
      if (next.id != ring[i].id) out.push_back(Relay::Link{ring[i], next, wire::linkConnections(ring[i], next)});
      break;
    }
  }
  return out;
}

void Relay::adopt(net::Link link) {
  auto alive = alive_;
  auto io = std::make_shared<net::FrameIo>(std::move(link), timeout_, [](const Status& s) {
    if (!s.isOk()) PCCL_LOG_DEBUG(kLog, "relay connection dropped: {}", s.toString());
  });
  io->armDeadline();
  io->readFrame([this, io, alive](Status s, const wire::FrameHeader& h, const std::vector<uint8_t>& p) {
    if (!*alive) return io->fail(Status::ok());
    auto hello = s.isOk() ? net::expectFrame<wire::RelayHello>(h, p, io->peerName()) : Result<wire::RelayHello>(s);
    if (!hello.isOk()) return io->fail(hello.status());
    onHello(io, *hello);
  });
}

Status Relay::check(const net::FrameIo& io, const wire::RelayHello& hello) const {
  if (hello.epoch != epoch_) {
    return Status::invalidUsage(
        fmt::format("this peer relays no link of epoch {} (it is at epoch {})", hello.epoch, epoch_));
  }
  for (const Link& l : links_) {
    if (l.from.id != hello.from || l.to.id != hello.to) continue;
    if (hello.index >= l.connections) {
      return Status::invalidUsage(fmt::format("relayed connection index {} of {}", hello.index, l.connections));
    }
    const wire::MemberInfo& sender = hello.sender_id == l.from.id ? l.from : l.to;
    const std::vector<uint8_t> bytes = relayHelloSigned(io.session(), hello);
    if (!net::verifySignature(sender.ring_key, bytes.data(), bytes.size(), hello.signature)) {
      return Status::authFailed(fmt::format("relay hello claiming to be peer {} is not signed for this connection "
                                            "with the ring key the master lists for it",
                                            wire::shortId(hello.sender_id)));
    }
    return Status::ok();
  }
  return Status::invalidUsage(fmt::format("this peer relays no ring link {} -> {} in epoch {}",
                                          wire::shortId(hello.from), wire::shortId(hello.to), hello.epoch));
}

void Relay::onHello(const std::shared_ptr<net::FrameIo>& io, const wire::RelayHello& hello) {
  if (hello.epoch > epoch_) {  // its ring has not reached us yet: waits (within its deadline) for expect()
    if (early_.size() >= kMaxEarly) return io->rejectWith(Status::invalidUsage("too many early relay connections"));
    early_.emplace_back(io, hello);
    return;
  }
  if (Status ok = check(*io, hello); !ok.isOk()) return io->rejectWith(ok);
  const bool from_side = hello.sender_id == hello.from;
  const Key key{hello.epoch, hello.from, hello.to, hello.index};
  auto it = waiting_.find(key);
  if (it == waiting_.end()) {
    waiting_.emplace(key, Waiting{io, from_side});
    return;
  }
  if (it->second.from_side == from_side) {
    return io->rejectWith(Status::invalidUsage(fmt::format("a second {} end of relayed connection {}",
                                                           from_side ? "sending" : "receiving", hello.index)));
  }
  std::shared_ptr<net::FrameIo> from = from_side ? io : it->second.io;
  std::shared_ptr<net::FrameIo> to = from_side ? it->second.io : io;
  waiting_.erase(it);
  const std::string name = fmt::format("{} -> {} #{}", wire::shortId(hello.from), wire::shortId(hello.to), hello.index);
  auto both = std::make_shared<int>(0);
  auto go = [this, from, to, both, name, alive = alive_] {
    if (!*alive || ++*both < 2) return;
    splice(from, to, name);
  };
  from->write(wire::encodeFrame(wire::RelayReady{}, hello.epoch), go);
  to->write(wire::encodeFrame(wire::RelayReady{}, hello.epoch), go);
}

namespace {
// One direction of a splice: reads what comes on `in` and writes it to `out`, until either fails.
struct Pump : std::enable_shared_from_this<Pump> {
  std::shared_ptr<net::Tcp::socket> in, out;
  std::vector<uint8_t> buf = std::vector<uint8_t>(kSpliceBuffer);
  std::shared_ptr<std::atomic<uint64_t>> total;  // the relay's count: outlives it (handlers may run later)
  uint64_t bytes = 0;
  bool tamper = false;  // the from -> to direction, under the test hook
  std::function<void(uint64_t)> ended;

  void next() {
    auto self = shared_from_this();
    in->async_read_some(asio::buffer(buf), [self](const asio::error_code& ec, size_t n) {
      if (ec) return self->end();
      self->forward(n);
    });
  }
  void forward(size_t n) {
    const int mode = tamper ? g_tamper.load() : 0;
    const bool hit = mode != 0 && bytes < (64u << 10) && bytes + n >= (64u << 10);
    if (hit && mode == 1) buf[n / 2] ^= 0x40;
    const size_t times = hit && mode == 2 ? 2 : 1;
    bytes += n;
    total->fetch_add(n, std::memory_order_relaxed);
    writeOut(n, times);
  }
  // Writes the n bytes read `times` times, then reads on.
  void writeOut(size_t n, size_t times) {
    auto self = shared_from_this();
    asio::async_write(*out, asio::buffer(buf.data(), n), [self, n, times](const asio::error_code& ec, size_t) {
      if (ec) return self->end();
      if (times > 1) return self->writeOut(n, times - 1);
      self->next();
    });
  }
  void end() {
    asio::error_code ignore;
    in->close(ignore);
    out->close(ignore);
    if (ended) std::exchange(ended, nullptr)(bytes);
  }
};
}  // namespace

void Relay::splice(std::shared_ptr<net::FrameIo> a, std::shared_ptr<net::FrameIo> b, const std::string& name) {
  auto from = std::make_shared<net::Tcp::socket>(std::move(a->release().socket));
  auto to = std::make_shared<net::Tcp::socket>(std::move(b->release().socket));
  spliced_.erase(std::remove_if(spliced_.begin(), spliced_.end(), [](const auto& w) { return w.expired(); }),
                 spliced_.end());
  spliced_.push_back(from);
  spliced_.push_back(to);
  auto forward = std::make_shared<Pump>();
  auto back = std::make_shared<Pump>();
  forward->in = from;
  forward->out = to;
  forward->total = relayed_bytes_;
  forward->tamper = true;
  back->in = to;
  back->out = from;
  back->total = relayed_bytes_;
  struct Counts {
    int ended = 0;
    uint64_t forward = 0, back = 0;
  };
  auto counts = std::make_shared<Counts>();
  auto ended = [name, counts] {
    if (++counts->ended < 2) return;
    PCCL_LOG_INFO(kLog, "relayed connection {} closed: {} bytes relayed forward, {} back", name, counts->forward,
                  counts->back);
  };
  forward->ended = [ended, counts](uint64_t n) {
    counts->forward = n;
    ended();
  };
  back->ended = [ended, counts](uint64_t n) {
    counts->back = n;
    ended();
  };
  PCCL_LOG_DEBUG(kLog, "relaying connection {}", name);
  forward->next();
  back->next();
}

}  // namespace pccl::peer
