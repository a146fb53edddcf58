#include "peer/link_probe.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "net/endpoint.hpp"
#include "peer/p2p_hello.hpp"

namespace pccl::peer {

namespace {
constexpr size_t kMaxParked = 64;  // inbound connections waiting for their round's plan

HelloAcceptor::Rules probeRules() {
  auto refuse = [](const wire::P2PHello& hello, uint64_t) {
    return Status::invalidUsage(fmt::format("peer {} is not measuring its link to us in probe {}",
                                            wire::shortId(hello.sender_id), hello.epoch));
  };
  return {"probe", "probe source", kMaxParked, "too many probe connections waiting", refuse,
          [](uint64_t) { return std::string(); }, nullptr};
}

uint64_t micros(std::chrono::steady_clock::duration d) {
  return static_cast<uint64_t>(std::max<int64_t>(1, std::chrono::duration_cast<std::chrono::microseconds>(d).count()));
}
}  // namespace

uint64_t steadyRate(const std::vector<std::pair<TimePoint, uint64_t>>& samples, TimePoint start) {
  if (samples.empty()) return 0;
  const auto& last = samples.back();
  const TimePoint first = samples.front().first;
  if (samples.size() < 8 || last.first - first < std::chrono::milliseconds(2)) {
    return static_cast<uint64_t>(static_cast<double>(last.second) * 1e6 / static_cast<double>(micros(last.first - start)));
  }
  const TimePoint half = first + (last.first - first) / 2;
  // The last sample before the second half: the bytes after it arrived within [its time, last].
  auto it = std::lower_bound(samples.begin(), samples.end(), half,
                             [](const std::pair<TimePoint, uint64_t>& s, TimePoint t) { return s.first < t; });
  const auto& from = *(it == samples.begin() ? it : std::prev(it));
  return static_cast<uint64_t>(static_cast<double>(last.second - from.second) * 1e6 /
                               static_cast<double>(micros(last.first - from.first)));
}

LinkProber::LinkProber(asio::io_context& io, std::shared_ptr<const net::AuthKey> key,
                       std::shared_ptr<const net::SigningKey> identity, Millis handshake_timeout)
    : io_(io),
      key_(std::move(key)),
      identity_(std::move(identity)),
      handshake_timeout_(handshake_timeout),
      deadline_(io),
      stop_timer_(io),
      acceptor_(handshake_timeout, probeRules()),
      zeros_(kProbeFrameBytes, 0) {}

LinkProber::~LinkProber() {
  *alive_ = false;
  cancel();
}

void LinkProber::closeAll() {
  std::vector<Out> out = std::move(out_);
  std::vector<std::shared_ptr<net::DataChannel>> in = std::move(in_);
  in_.clear();
  for (auto& c : acceptor_.release()) in.push_back(c);  // every channel is in one of out_, in_ (or not yet)
  out_.clear();
  for (auto& o : out) {
    if (o.ch) o.ch->close(Status::ok());
  }
  for (auto& c : in) {
    if (!c) continue;
    rx_buffer_peak_ = std::max(rx_buffer_peak_, c->receiveBufferBytes());
    c->close(Status::ok());
  }
}

void LinkProber::cancel() {
  running_ = false;
  acceptor_.idle();
  report_ = nullptr;
  deadline_.cancel();
  stop_timer_.cancel();
  closeAll();
}

void LinkProber::start(const wire::Uuid& self, const wire::ProbePlan& plan, Report report) {
  cancel();
  running_ = true;
  self_ = self;
  plan_ = plan;
  report_ = std::move(report);
  tx_over_ = !plan.has_target;
  rx_over_ = !plan.has_source;
  tx_error_.clear();
  rx_error_.clear();
  out_up_ = 0;
  rtt_us_ = 0;
  sending_ = false;
  budget_spent_ = false;
  tx_bytes_ = 0;
  rx_bytes_ = 0;
  ends_ = 0;
  samples_.clear();
  rx_start_ = Clock::now();
  if (plan.has_target) out_.assign(plan.target_connections, Out{});
  if (plan.has_source) {
    in_.assign(plan.source_connections, nullptr);
    in_ended_.assign(plan.source_connections, false);
  }
  // Both sides are bounded: the connections, the pings and the budget, with room for a slow start.
  const Millis bound = Millis(plan.budget_ms) + 3 * handshake_timeout_;
  deadline_.expires_after(bound);
  deadline_.async_wait([this, alive = alive_, id = plan.probe_id, bound](const asio::error_code& ec) {
    if (ec || !*alive || !running_ || plan_.probe_id != id) return;
    if (!tx_over_) txFinish(fmt::format("sending to peer {} not over within {} ms", wire::shortId(plan_.target.id), bound.count()));
    if (!rx_over_) rxFinish(ends_ == 0 && rx_bytes_ == 0 ? fmt::format("nothing received from peer {} within {} ms",
                                                                       wire::shortId(plan_.source.id), bound.count())
                                                         : std::string());
  });
  // Whoever can dial, dials (wire::opensLink): the target may open our sending side, and we the
  // source's, with kHelloReverse hellos.
  const bool dial_target = plan.has_target && !plan.target_dials;
  const bool accept_source = plan.has_source && !plan.dial_source;
  for (uint32_t i = 0; dial_target && i < plan.target_connections; ++i) dial(plan.target, false, i);
  for (uint32_t i = 0; plan.has_source && plan.dial_source && i < plan.source_connections; ++i) {
    dial(plan.source, true, i);
  }
  HelloAcceptor::Round round;
  round.id = plan.probe_id;
  round.accepts = accept_source || (plan.has_target && plan.target_dials);
  round.sender = plan.source.id;
  round.sender_key = plan.source.ring_key;
  round.connections = accept_source ? plan.source_connections : 0;
  if (plan.has_target && plan.target_dials) {
    round.more.push_back(
        HelloAcceptor::Sender{plan.target.id, plan.target.ring_key, plan.target_connections, true, "probe target"});
  }
  // Replays what came before the plan.
  acceptor_.open(round, [this, from_source = round.connections](uint32_t index, bool) {
    const auto& ch = acceptor_.channels()[index];
    if (index < from_source) return receiveOn(index, ch);
    sendOn(index - from_source, ch);
  });
  maybeReport();
}

// ---- send side -------------------------------------------------------------------------------------

void LinkProber::dial(const wire::MemberInfo& to, bool reverse, uint32_t index) {
  const uint64_t id = plan_.probe_id;
  HelloDial d = HelloDial::toMember(io_, to, wire::Role::kProbe, key_, identity_, handshake_timeout_,
                                    reverse ? "probe source" : "probe target");
  d.self = self_;
  d.epoch = id;
  d.index = index;
  if (reverse) d.flags = wire::kHelloReverse;  // it sends, we dial
  auto alive = alive_;
  auto stale = [this, alive, id, reverse] {
    return !*alive || !running_ || plan_.probe_id != id || (reverse ? rx_over_ : tx_over_);
  };
  dialWithHello(d, stale,
                [this, reverse](const Status& s) { reverse ? rxFinish(s.toString()) : txFinish(s.toString()); },
                [this, index, id, reverse, who = d.who](net::Link link, const wire::P2PAccept&) {
                  auto ch = std::make_shared<net::DataChannel>(std::move(link), id, who);
                  reverse ? receiveOn(index, ch) : sendOn(index, ch);
                });
}

void LinkProber::sendOn(uint32_t index, const std::shared_ptr<net::DataChannel>& ch) {
  if (index >= out_.size() || out_[index].ch) return ch->close(Status::ok());
  out_[index].ch = ch;
  // As the ring's striped connections: little unsent in the kernel, so that what was written was sent,
  // and the round ends soon after its budget.
  ch->setNotSentLowat(kProbeNotSentLowat);
  ch->start(this);
  if (++out_up_ == out_.size()) {
    pings_left_ = kPings;
    ping();
  }
}

void LinkProber::receiveOn(uint32_t index, const std::shared_ptr<net::DataChannel>& ch) {
  if (index >= in_.size() || in_[index]) return ch->close(Status::ok());
  in_[index] = ch;
  ch->start(this);
}

void LinkProber::ping() {
  ping_sent_ = Clock::now();
  wire::DataHeader h = wire::dataHeader(plan_.probe_id, kProbePing, 0, static_cast<uint64_t>(pings_left_));
  out_[0].ch->sendOwned(h, {});
}

void LinkProber::pump(size_t conn) {
  Out& o = out_[conn];
  while (o.ch && !o.ended && o.queued < kProbeDepth) {
    const bool more = tx_bytes_ < plan_.max_bytes && Clock::now() < send_until_;
    if (!more) {
      if (o.queued != 0) return;  // the end frame goes last
      o.ended = true;
      o.queued = 1;
      // A failure from here on is the receiver closing once it has every end frame: not a failure of the
      // link (a receiver that failed says so in its own report).
      o.ch->send(wire::dataHeader(plan_.probe_id, kProbeEnd, 0, 0), nullptr, 0,
                 [this, alive = alive_, id = plan_.probe_id, conn](const Status&) {
                   if (!*alive || !running_ || plan_.probe_id != id || tx_over_) return;
                   out_[conn].queued = 0;
                   if (std::all_of(out_.begin(), out_.end(), [](const Out& x) { return x.ended && x.queued == 0; })) {
                     txFinish("");
                   }
                 });
      return;
    }
    const uint32_t bytes = static_cast<uint32_t>(std::min<uint64_t>(kProbeFrameBytes, plan_.max_bytes - tx_bytes_));
    tx_bytes_ += bytes;
    ++o.queued;
    o.ch->send(wire::dataHeader(plan_.probe_id, kProbeData, 0, 0), zeros_.data(), bytes,
               [this, alive = alive_, id = plan_.probe_id, conn, bytes](const Status& s) {
                 if (!*alive || !running_ || plan_.probe_id != id || tx_over_) return;
                 --out_[conn].queued;
                 if (!s.isOk()) {
                   if (!budget_spent_) return txFinish(s.toString());
                   tx_bytes_ -= bytes;  // taken back when the budget ran out
                 }
                 pump(conn);
               });
  }
}

void LinkProber::txFinish(const std::string& error) {
  if (tx_over_) return;
  tx_over_ = true;
  tx_error_ = error;
  if (!error.empty()) rtt_us_ = 0;  // the link did not work: the master marks it unusable
  if (rx_over_ && plan_.target_dials) acceptor_.stop();  // the target's connections: no more wanted
  maybeReport();
}

// ---- receive side ----------------------------------------------------------------------------------

void LinkProber::adopt(net::Link link) { acceptor_.adopt(std::move(link)); }

bool LinkProber::isOut(const net::DataChannel& ch) const {
  return std::any_of(out_.begin(), out_.end(), [&](const Out& o) { return o.ch.get() == &ch; });
}

Result<net::Placement> LinkProber::place(net::DataChannel& ch, const wire::DataHeader& h, uint32_t bytes) {
  if (!running_ || h.op_id != plan_.probe_id || h.flags != 0 || h.phase > kProbePong) {
    return Status::protocol(fmt::format("unexpected frame on a probe connection (probe {}, phase {})", h.op_id, h.phase));
  }
  if (h.phase != kProbeData && bytes != 0) return Status::protocol("probe control frame with a payload");
  if ((h.phase == kProbePong) != isOut(ch)) return Status::protocol("probe frame in the wrong direction");
  if (h.phase != kProbeData) return net::Placement::stage();  // no payload
  // Measured, not kept: read and dropped in the channel's bounded discard chunks (discarded() below).
  if (bytes > kProbeFrameBytes) {
    return Status::protocol(fmt::format("probe data frame of {} bytes (at most {})", bytes, kProbeFrameBytes));
  }
  return net::Placement::discard();
}

Status LinkProber::discarded(net::DataChannel& ch, const wire::DataHeader& h, uint32_t bytes) {
  return deliver(ch, h, nullptr, bytes);
}

Status LinkProber::deliver(net::DataChannel& ch, const wire::DataHeader& h, const uint8_t*, uint32_t bytes) {
  const TimePoint now = Clock::now();
  switch (h.phase) {
    case kProbePing:
      ch.sendOwned(wire::dataHeader(h.op_id, kProbePong, 0, h.offset), {});
      return Status::ok();
    case kProbePong: {
      if (tx_over_ || sending_ || h.offset != static_cast<uint64_t>(pings_left_)) return Status::ok();
      const uint64_t rtt = micros(now - ping_sent_);
      rtt_us_ = rtt_us_ == 0 ? rtt : std::min(rtt_us_, rtt);
      if (--pings_left_ > 0) {
        ping();
        return Status::ok();
      }
      sending_ = true;
      send_until_ = now + Millis(plan_.budget_ms);
      // When the budget runs out, frames still queued are taken back: only the kernel's few unsent
      // bytes and those in flight remain, and each connection's end frame follows at once.
      stop_timer_.expires_at(send_until_);
      stop_timer_.async_wait([this, alive = alive_, id = plan_.probe_id](const asio::error_code& ec) {
        if (ec || !*alive || !running_ || plan_.probe_id != id || tx_over_) return;
        budget_spent_ = true;
        for (auto& o : out_) {
          if (o.ch) o.ch->cancelQueued(id, 0, Status::timeout("probe budget spent"));
        }
      });
      for (size_t i = 0; i < out_.size(); ++i) pump(i);
      return Status::ok();
    }
    case kProbeEnd:
      for (size_t i = 0; i < in_.size(); ++i) {
        if (in_[i].get() == &ch && !in_ended_[i]) {
          in_ended_[i] = true;
          ++ends_;
        }
      }
      if (ends_ == in_.size()) rxFinish("");
      return Status::ok();
    default:
      if (samples_.empty()) rx_start_ = now;
      rx_bytes_ += bytes;
      samples_.emplace_back(now, rx_bytes_);
      return Status::ok();
  }
}

void LinkProber::channelClosed(net::DataChannel& ch, const Status& why) {
  if (!running_) return;
  for (const Out& o : out_) {
    if (o.ch.get() != &ch) continue;
    if (!tx_over_ && !o.ended) txFinish(why.isOk() ? "probe connection closed" : why.toString());
    return;
  }
  // The sender closes its connections once it wrote every end frame: a connection whose end arrived may
  // close while another still delivers.
  for (size_t i = 0; i < in_.size(); ++i) {
    if (in_[i].get() == &ch && !in_ended_[i] && !rx_over_) {
      rxFinish(why.isOk() ? "probe connection closed before its end" : why.toString());
    }
  }
}

void LinkProber::rxFinish(const std::string& error) {
  if (rx_over_) return;
  rx_over_ = true;
  if (tx_over_ || !plan_.target_dials) acceptor_.stop();
  rx_error_ = error;
  maybeReport();
}

void LinkProber::maybeReport() {
  if (!running_ || !tx_over_ || !rx_over_) return;
  wire::ProbeReport r;
  r.probe_id = plan_.probe_id;
  if (plan_.has_target) {
    // The pings may wait behind another link's data in a queue of this round; the kernel's smallest round
    // trip of each connection (its handshake and first packets included) may have seen an emptier path.
    if (rtt_us_ != 0) {
      for (const Out& o : out_) {
        const uint64_t kernel = o.ch ? o.ch->minRttUs() : 0;
        if (kernel != 0) rtt_us_ = std::min(rtt_us_, kernel);
      }
    }
    r.target_id = plan_.target.id;
    r.rtt_us = rtt_us_;
    r.tx_bytes = tx_bytes_;
  }
  if (plan_.has_source) {
    r.source_id = plan_.source.id;
    r.rx_bytes = rx_bytes_;
    r.rx_rate = rx_error_.empty() ? steadyRate(samples_, rx_start_) : 0;
  }
  if (!tx_error_.empty()) r.detail = "sending: " + tx_error_;
  if (!rx_error_.empty()) r.detail += (r.detail.empty() ? "" : "; ") + std::string("receiving: ") + rx_error_;
  Report report = std::move(report_);
  running_ = false;
  acceptor_.idle();
  report_ = nullptr;
  deadline_.cancel();
  stop_timer_.cancel();
  closeAll();
  if (report) report(r);
}

}  // namespace pccl::peer
