#include "link_model.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace pccl::sim {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kLn2 = 0.6931471805599453;
constexpr double kBeta = 0.7;  // cubic's multiplicative decrease
}  // namespace

LinkModel::LinkModel(const LinkParams& p, const TcpParams& tcp)
    : p_(p), tcp_(tcp), conns_(std::max<uint32_t>(1, p.lanes)) {
  for (Conn& c : conns_) {
    c.cwnd = c.tokens = tcp_.initial_segments * tcp_.mss;
    c.ssthresh = kInf;
  }
}

void LinkModel::enqueue(uint32_t slot, double bytes) { waiting_.emplace_back(slot, bytes); }

Time LinkModel::update(Time t, std::vector<uint32_t>* done) {
  advance(t);
  for (Conn& c : conns_) {
    if (c.slot < 0) continue;
    // Done, or so nearly done that the clock cannot tell (a few bytes' rounding late in a long run).
    if (c.left <= 1e-6 || (c.rate > 0 && t + c.left / c.rate <= t)) {
      done->push_back(static_cast<uint32_t>(c.slot));
      c.slot = -1;
      c.left = 0;
      c.rate = 0;
      c.last_sent = t;
    }
  }
  assign(t);
  share();
  Time next = kInf;
  for (const Conn& c : conns_) {
    if (c.slot < 0 || c.rate <= 0) continue;
    next = std::min(next, t + c.left / c.rate);
    // Sending faster than acknowledgements refill the window: it is held when the tokens run out.
    const double refill = refillRate(c);
    if (windowed() && c.tokens > 0 && c.rate > refill) next = std::min(next, t + c.tokens / (c.rate - refill));
  }
  // A window-limited connection's rate grows with its window: look again an eighth of a round trip on.
  if (window_limited_) next = std::min(next, t + p_.rtt / 8);
  return next;
}

void LinkModel::advance(Time t) {
  const Time dt = t - last_;
  last_ = std::max(last_, t);
  if (dt <= 0) return;
  double windows = 0;
  for (Conn& c : conns_) {
    if (c.slot < 0) continue;
    const double sent = std::min(c.left, c.rate * dt);
    c.left = std::max(0.0, c.left - c.rate * dt);
    if (!windowed()) continue;
    c.tokens = std::clamp(c.tokens + (refillRate(c) - c.rate) * dt, 0.0, c.cwnd);
    if (c.tokens < 1) c.tokens = 0;  // less than a byte: the window is full
    // Every byte acknowledged grows the window: slow start doubles it per round trip, congestion
    // avoidance adds a segment per window.
    c.cwnd += c.cwnd < c.ssthresh ? sent * kLn2 : tcp_.mss * sent / c.cwnd;
    windows += c.cwnd;
  }
  // More in flight than the path and its queue hold: the queue overflowed and every busy connection
  // lost a segment.
  if (windowed() && p_.bytes_per_s > 0 && windows > p_.bytes_per_s * p_.rtt + p_.queue_bytes) {
    for (Conn& c : conns_) {
      if (c.slot < 0) continue;
      c.cwnd = c.ssthresh = std::max(2 * tcp_.mss, kBeta * c.cwnd);
      c.tokens = std::min(c.tokens, c.cwnd);
    }
  }
}

// Linux's tcp_cwnd_restart: after idling longer than the RTO, the window halves per RTO idle, down to
// the initial window (or what it was, if less), and ssthresh keeps at least 3/4 of the old window.
void LinkModel::restartAfterIdle(Conn& c, Time t) const {
  if (!windowed() || c.last_sent < 0) return;
  const Time rto = p_.rtt + tcp_.rto_min;
  Time idle = t - c.last_sent;
  // What it sent before is acknowledged meanwhile (a round trip's worth of it per round trip).
  c.tokens = std::min(c.cwnd, c.tokens + idle * refillRate(c));
  if (idle <= rto) return;
  const double restart = std::min(tcp_.initial_segments * tcp_.mss, c.cwnd);
  c.ssthresh = std::max(c.ssthresh, 0.75 * c.cwnd);
  double cwnd = c.cwnd;
  while ((idle -= rto) > 0 && cwnd > restart) cwnd /= 2;
  c.cwnd = c.tokens = std::max(cwnd, restart);
}

void LinkModel::assign(Time t) {
  while (!waiting_.empty()) {
    // The striper's choice: the idle connection used most recently whose window has room for the whole
    // frame, else the one with the most room (the window as it restarts after idleness).
    const double need = waiting_.front().second;
    Conn *fits = nullptr, *roomiest = nullptr;
    double most = -1;
    for (Conn& c : conns_) {
      if (c.slot >= 0) continue;
      double room = kInf;
      if (windowed()) {
        Conn after = c;
        restartAfterIdle(after, t);
        room = after.tokens;
      }
      if (room >= need && (fits == nullptr || c.used > fits->used)) fits = &c;
      if (room > most || (room == most && c.used > roomiest->used)) {
        most = room;
        roomiest = &c;
      }
    }
    Conn* best = fits != nullptr ? fits : roomiest;
    if (best == nullptr) return;
    restartAfterIdle(*best, t);
    best->slot = waiting_.front().first;
    best->left = waiting_.front().second;
    best->used = ++clock_;
    waiting_.pop_front();
  }
}

// Max-min fair shares of the rate among the busy connections, each capped by its window per round trip.
void LinkModel::share() {
  window_limited_ = false;
  std::vector<Conn*> busy;
  for (Conn& c : conns_) {
    if (c.slot >= 0) busy.push_back(&c);
  }
  // A connection with tokens sends at its share; one without, at most as fast as they come back.
  auto cap = [this](const Conn* c) { return windowed() && c->tokens <= 0 ? refillRate(*c) : kInf; };
  std::stable_sort(busy.begin(), busy.end(), [&](const Conn* a, const Conn* b) { return cap(a) < cap(b); });
  double left = p_.bytes_per_s > 0 ? p_.bytes_per_s : kInf;
  for (size_t i = 0; i < busy.size(); ++i) {
    const double fair = left / static_cast<double>(busy.size() - i);
    const double rate = std::min(cap(busy[i]), fair);
    if (cap(busy[i]) < fair) window_limited_ = true;
    busy[i]->rate = rate;
    left -= rate;
  }
}

}  // namespace pccl::sim
