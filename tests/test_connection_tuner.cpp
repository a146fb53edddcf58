// The connection tuner (collective/connection_tuner.hpp, docs/algorithms.md §13) against model links:
// each test feeds it the samples a link of a given shape would give (rate as a function of the active
// count, with deterministic noise) and checks where it settles, what it ignores, and how it follows a
// path that changes.
#include <catch2/catch.hpp>

#include <atomic>
#include <cmath>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>
#include <cstdint>
#include <functional>
#include <map>

#include "collective/connection_tuner.hpp"
#include "collective/striper.hpp"
#include "io_support.hpp"
#include "net/data_channel.hpp"

using pccl::collective::ConnectionTuner;
using pccl::collective::TunerSample;
using pccl::test::onIo;

namespace {

// A link: bytes per second carried by k connections, its round trip, and whether k connections keep a
// standing queue at its bottleneck (the round trip then grows by a fifth).
struct Path {
  std::function<double(uint32_t)> rate;
  uint32_t srtt_us = 80000;
  std::function<bool(uint32_t)> full = [](uint32_t) { return true; };
};

// ±`noise` of deterministic jitter (a linear congruential sequence).
class Jitter {
 public:
  explicit Jitter(double noise) : noise_(noise) {}
  double next() {
    state_ = state_ * 6364136223846793005ULL + 1442695040888963407ULL;
    const double u = static_cast<double>(state_ >> 11) / static_cast<double>(1ULL << 53);  // 0..1
    return 1.0 + noise_ * (2 * u - 1);
  }

 private:
  double noise_;
  uint64_t state_ = 42;
};

TunerSample sampleOf(const Path& p, uint32_t k, Jitter& j, double busy = 1.0) {
  TunerSample s;
  s.seconds = ConnectionTuner::intervalUs(p.srtt_us) / 1e6;
  s.busy = busy;
  s.bytes = static_cast<uint64_t>(p.rate(k) * j.next() * s.seconds);
  s.min_rtt_us = p.srtt_us;
  s.srtt_us = p.full(k) ? p.srtt_us + p.srtt_us / 5 : p.srtt_us;
  return s;
}

// Feeds `n` samples; returns how many changes they caused.
int run(ConnectionTuner& t, const Path& p, int n, Jitter& j) {
  int changes = 0;
  for (int i = 0; i < n; ++i) changes += t.add(sampleOf(p, t.active(), j)) ? 1 : 0;
  return changes;
}

// Loss limits each flow: k flows carry k x per_flow up to the bottleneck's capacity (the
// transatlantic scenario: about 2.2 MB/s per flow at 80 ms and 0.01 % loss, 31 MB/s per rank).
Path lossLimited(double per_flow, double capacity, uint32_t srtt_us) {
  return Path{[=](uint32_t k) { return std::min(k * per_flow, capacity); }, srtt_us,
              [=](uint32_t k) { return k * per_flow >= capacity; }};
}

// Best at a few flows, worse with more (their bursts overflow the bottleneck's queue): the europe
// scenario's measured shape (share of the link bound at K = 1, 4, 16, 64: 58, 92, ~85, 75 %).
Path queueLimited() {
  const std::map<uint32_t, double> share = {{1, 0.58}, {2, 0.80}, {3, 0.88}, {4, 0.92}, {6, 0.92}, {8, 0.90},
                                            {12, 0.87}, {16, 0.85}, {24, 0.80}, {32, 0.75}};
  return Path{[share](uint32_t k) { return 31e6 * share.at(k); }, 20000, [](uint32_t k) { return k >= 2; }};
}

// The best rate any count gives on `p`, and the tuner's share of it.
double shareOfBest(const Path& p, const ConnectionTuner& t) {
  double best = 0;
  for (uint32_t k : {1u, 2u, 4u, 8u, 16u, 32u, 64u}) {
    if (k <= t.pool()) best = std::max(best, p.rate(k));
  }
  return p.rate(t.active()) / best;
}

// Feeds samples until the tuner carries `share` of `p`'s best rate, at most `limit`; returns how many.
// `kernel_min_rtt_us`: what TCP says is the least round trip (0: the path's own).
int samplesToReach(ConnectionTuner& t, const Path& p, double share, int limit, Jitter& j,
                   uint32_t kernel_min_rtt_us = 0) {
  int samples = 0;
  while (shareOfBest(p, t) < share && samples < limit) {
    TunerSample s = sampleOf(p, t.active(), j);
    if (kernel_min_rtt_us != 0) s.min_rtt_us = kernel_min_rtt_us;
    t.add(s);
    ++samples;
  }
  return samples;
}

// Feeds `n` samples; returns the mean share of the best rate over them (probes included).
double meanShare(ConnectionTuner& t, const Path& p, int n, Jitter& j) {
  double sum = 0;
  for (int i = 0; i < n; ++i) {
    sum += shareOfBest(p, t);
    t.add(sampleOf(p, t.active(), j));
  }
  return sum / n;
}

}  // namespace

TEST_CASE("tuner: a loss-limited path climbs to the count that fills the bottleneck", "[tuner]") {
  ConnectionTuner t(32, 4);
  REQUIRE(t.active() == 4);
  Jitter j(0.05);
  const Path p = lossLimited(2.2e6, 31e6, 80000);
  run(t, p, 40, j);
  CHECK(t.active() >= 16);
  CHECK(shareOfBest(p, t) >= 0.95);
  // It stays there: a probe now and then, always back.
  const uint64_t before = t.changes();
  CHECK(meanShare(t, p, 200, j) >= 0.95);
  CHECK(t.changes() - before <= 2 * (200 / ConnectionTuner::kProbeEvery + 1));
}

TEST_CASE("tuner: a path where more connections overflow the queue stays at the best few", "[tuner]") {
  ConnectionTuner t(32, 4);
  Jitter j(0.02);
  const Path p = queueLimited();
  run(t, p, 30, j);
  // Mostly at 4, the best; a probe now and then to 2 (13 % less).
  CHECK(meanShare(t, p, 300, j) >= 0.95);
  CHECK(t.active() <= 8);
}

TEST_CASE("tuner: where more connections carry less, it goes down to one", "[tuner]") {
  ConnectionTuner t(16, 4);
  Jitter j(0.01);
  const Path p{[](uint32_t k) { return 100e6 / (1 + 0.1 * k); }, 20000};  // each flow adds to the losses
  run(t, p, 40, j);
  CHECK(t.active() == 1);
}

TEST_CASE("tuner: samples when the link was not the bottleneck, or carried nothing, change nothing", "[tuner]") {
  ConnectionTuner t(32, 4);
  Jitter j(0.0);
  const Path p = lossLimited(2.2e6, 31e6, 80000);
  for (int i = 0; i < 100; ++i) CHECK_FALSE(t.add(sampleOf(p, t.active(), j, 0.5)));  // waiting half the time
  TunerSample nothing;
  nothing.seconds = 0.5;
  nothing.busy = 1.0;
  for (int i = 0; i < 100; ++i) CHECK_FALSE(t.add(nothing));  // an outage: nothing acknowledged
  for (int i = 0; i < 100; ++i) {  // the link's first slow start: its rate says nothing of the path's losses
    TunerSample warm = sampleOf(p, t.active(), j);
    warm.warming = true;
    CHECK_FALSE(t.add(warm));
  }
  CHECK(t.active() == 4);
  CHECK(t.changes() == 0);
}

TEST_CASE("tuner: a short outage while holding does not move the count", "[tuner]") {
  ConnectionTuner t(32, 4);
  Jitter j(0.03);
  const Path p = lossLimited(2.2e6, 31e6, 80000);
  run(t, p, 60, j);
  const uint32_t settled = t.active();
  const Path dark{[&](uint32_t k) { return p.rate(k) * 0.05; }, 80000, p.full};
  run(t, dark, 2, j);  // two samples at 5 %: a blackout's retransmissions
  CHECK(t.active() == settled);
  run(t, p, 5, j);
  CHECK(t.active() == settled);
}

TEST_CASE("tuner: a reroute that doubles the round trip is followed to its new best count", "[tuner]") {
  ConnectionTuner t(64, 4);
  Jitter j(0.05);
  const Path before = lossLimited(2.2e6, 31e6, 80000);
  run(t, before, 60, j);
  REQUIRE(shareOfBest(before, t) >= 0.95);
  // Twice the round trip: each loss-limited flow carries half as much.
  const Path after = lossLimited(1.1e6, 31e6, 160000);
  const int samples = samplesToReach(t, after, 0.95, 40, j);
  CHECK(shareOfBest(after, t) >= 0.95);
  CHECK(samples < 40);
  CHECK(meanShare(t, after, 200, j) >= 0.95);  // its probes cost little
  // And back: the path heals, and fewer connections do again (more would only add queue pressure).
  const Path healed = lossLimited(2.2e6, 31e6, 80000);
  run(t, healed, 30, j);
  CHECK(meanShare(t, healed, 200, j) >= 0.95);
}

TEST_CASE("tuner: the ladder stops at the pool, and a new pool keeps the count where it can", "[tuner]") {
  ConnectionTuner t(10, 4);
  Jitter j(0.0);
  run(t, lossLimited(1e6, 1e9, 20000), 60, j);  // more always pays: up to the pool
  CHECK(t.active() == 10);
  t.setPool(6);
  CHECK(t.pool() == 6);
  CHECK(t.active() == 6);
  ConnectionTuner one(1, 4);
  CHECK(one.active() == 1);
  CHECK_FALSE(one.add(sampleOf(lossLimited(1e6, 1e9, 20000), 1, j)));
}

TEST_CASE("tuner: a link starts from one connection per 5 ms of round trip, a rung of the ladder", "[tuner]") {
  CHECK(ConnectionTuner::startFor(0) == ConnectionTuner::kUnknownStart);  // nothing measured yet
  CHECK(ConnectionTuner::startFor(300) == 16);     // a LAN: flows of a few segments, many of them
  CHECK(ConnectionTuner::startFor(4999) == 16);
  CHECK(ConnectionTuner::startFor(5000) == 4);     // the floor from 5 ms on
  CHECK(ConnectionTuner::startFor(20000) == 4);    // europe, 20 ms
  CHECK(ConnectionTuner::startFor(80000) == 16);   // transatlantic, 80 ms
  CHECK(ConnectionTuner::startFor(79000) == 8);    // just under: the rung below
  CHECK(ConnectionTuner::startFor(220000) == 16);  // eu-asia, 220 ms: the cap (32 filled the queues)
  // The pool still caps it.
  ConnectionTuner small(8, ConnectionTuner::startFor(220000));
  CHECK(small.active() == 8);
  ConnectionTuner pool(32, ConnectionTuner::startFor(80000));
  CHECK(pool.active() == 16);
}

TEST_CASE("tuner: a start from the path is held, probed only now and then, and left when the path moves",
          "[tuner]") {
  Jitter j(0.05);
  // Transatlantic: 16 fills the bottleneck. Held from the first sample on; a probe each kProbeEvery.
  const Path p = lossLimited(2.2e6, 31e6, 80000);
  ConnectionTuner t(32, ConnectionTuner::startFor(80000), true);
  REQUIRE(t.active() == 16);
  int changes = 0;
  for (uint32_t i = 0; i + 1 < ConnectionTuner::kProbeEvery; ++i) changes += t.add(sampleOf(p, t.active(), j)) ? 1 : 0;
  CHECK(changes == 0);
  CHECK(t.active() == 16);
  CHECK(meanShare(t, p, 400, j) >= 0.95);
  CHECK(t.changes() <= 2 * (400 / ConnectionTuner::kProbeEvery + 1));
  // Europe: 4 is best, more overflow the queue; held there.
  const Path q = queueLimited();
  ConnectionTuner e(32, ConnectionTuner::startFor(20000), true);
  REQUIRE(e.active() == 4);
  CHECK(meanShare(e, q, 400, j) >= 0.97);
  // A start that is wrong (a path with far more loss than its round trip says): found by the probes.
  const Path lossy = lossLimited(0.5e6, 31e6, 20000);
  ConnectionTuner w(64, ConnectionTuner::startFor(20000), true);
  run(w, lossy, 6 * ConnectionTuner::kProbeEvery, j);
  CHECK(w.active() >= 32);
  // A reroute that doubles the round trip: the rate falls, the link starts over and climbs.
  ConnectionTuner r(64, ConnectionTuner::startFor(80000), true);
  run(r, p, 20, j);
  const Path after = lossLimited(1.1e6, 31e6, 160000);
  const int samples = samplesToReach(r, after, 0.95, 40, j);
  CHECK(shareOfBest(after, r) >= 0.95);
  CHECK(samples < 40);
}

TEST_CASE("tuner: a reroute to a longer path is not read as a queue while the kernel keeps the old least",
          "[tuner]") {
  Jitter j(0.05);
  const Path before = lossLimited(2.2e6, 31e6, 80000);
  ConnectionTuner t(64, ConnectionTuner::startFor(80000), true);
  run(t, before, 20, j);
  REQUIRE(t.active() == 16);
  // Twice the round trip; the kernel's least stays at the old path's 80 ms (it keeps it for minutes).
  const Path after = lossLimited(1.1e6, 31e6, 160000);
  const int samples = samplesToReach(t, after, 0.95, 40, j, 80000);
  CHECK(t.active() >= 32);
  CHECK(samples < 40);
}

TEST_CASE("tuner: the sample interval follows the round trip within bounds", "[tuner]") {
  CHECK(ConnectionTuner::intervalUs(0) == 200000);
  CHECK(ConnectionTuner::intervalUs(100) == 150000);
  CHECK(ConnectionTuner::intervalUs(80000) == 1280000);
  CHECK(ConnectionTuner::intervalUs(1000000) == 2000000);
}

// ---- the striper hands frames only to the connections the tuner made active ----------------------

namespace {

// Counts the frames each receiving channel delivers.
struct Counter : pccl::net::DataSink {
  std::mutex mu;
  std::condition_variable cv;
  std::map<const pccl::net::DataChannel*, size_t> frames;
  size_t total = 0;
  std::vector<uint8_t> buf;
  pccl::Result<pccl::net::Placement> place(pccl::net::DataChannel&, const pccl::wire::DataHeader&, uint32_t bytes) override {
    buf.resize(bytes);
    return pccl::net::Placement::direct(buf.data());
  }
  pccl::Status deliver(pccl::net::DataChannel& ch, const pccl::wire::DataHeader&, const uint8_t*, uint32_t) override {
    std::lock_guard<std::mutex> lk(mu);
    ++frames[&ch];
    ++total;
    cv.notify_all();
    return pccl::Status::ok();
  }
  void channelClosed(pccl::net::DataChannel&, const pccl::Status&) override {}
};

struct Ignore : pccl::net::DataSink {
  pccl::Result<pccl::net::Placement> place(pccl::net::DataChannel&, const pccl::wire::DataHeader&, uint32_t) override {
    return pccl::net::Placement::discard();
  }
  pccl::Status deliver(pccl::net::DataChannel&, const pccl::wire::DataHeader&, const uint8_t*, uint32_t) override {
    return pccl::Status::ok();
  }
  void channelClosed(pccl::net::DataChannel&, const pccl::Status&) override {}
};

// K loopback connections, a striper over their sending ends, and a counter behind their receiving ends.
struct Links {
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work = asio::make_work_guard(io);
  std::vector<std::shared_ptr<pccl::net::DataChannel>> tx, rx;
  std::shared_ptr<pccl::collective::Striper> striper;
  Counter counter;
  Ignore ignore;
  std::thread loop;

  Links(size_t k, std::shared_ptr<ConnectionTuner> tuner) {
    pccl::net::Tcp::acceptor acceptor(io, pccl::net::Tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    for (size_t i = 0; i < k; ++i) {
      pccl::net::Tcp::socket a(io), b(io);
      a.connect(acceptor.local_endpoint());
      acceptor.accept(b);
      tx.push_back(std::make_shared<pccl::net::DataChannel>(pccl::net::Link{std::move(a), {}, {}}, 1, "tx"));
      rx.push_back(std::make_shared<pccl::net::DataChannel>(pccl::net::Link{std::move(b), {}, {}}, 1, "rx"));
    }
    striper = std::make_shared<pccl::collective::Striper>(tx);
    if (tuner) striper->setTuner(std::move(tuner), nullptr);
    striper->attach();
    for (auto& c : tx) c->start(&ignore);
    for (auto& c : rx) c->start(&counter);
    loop = std::thread([this] { io.run(); });
  }
  ~Links() {
    onIo(io, [&] {
      striper.reset();
      for (auto& c : tx) c->close(pccl::Status::ok());
      for (auto& c : rx) c->close(pccl::Status::ok());
    });
    work.reset();
    loop.join();
  }
  // Sends `n` frames of `bytes` and waits until all arrived; false when one failed.
  bool send(size_t n, size_t bytes) {
    payload.assign(bytes, 7);
    std::atomic<size_t> failed{0};
    const size_t before = counter.total;
    onIo(io, [&] {
      for (size_t i = 0; i < n; ++i) {
        const pccl::wire::DataHeader h = pccl::wire::dataHeader(1, 0, 0, i * bytes);
        striper->send(h, payload.data(), static_cast<uint32_t>(bytes), [&failed](const pccl::Status& s) {
          if (!s.isOk()) ++failed;
        });
      }
    });
    std::unique_lock<std::mutex> lk(counter.mu);
    const bool all = counter.cv.wait_for(lk, std::chrono::seconds(60), [&] { return counter.total == before + n; });
    return all && failed.load() == 0;
  }
  size_t on(size_t i) {
    std::lock_guard<std::mutex> lk(counter.mu);
    return counter.frames[rx[i].get()];
  }
  std::vector<uint8_t> payload;
};

}  // namespace

TEST_CASE("tuned striper: frames go only to the active connections, and to others when those close", "[tuner]") {
  auto tuner = std::make_shared<ConnectionTuner>(4, 2);
  Links l(4, tuner);
  REQUIRE(l.striper->active() == 2);
  REQUIRE(l.send(64, 64 << 10));
  CHECK(l.on(0) + l.on(1) == 64);
  CHECK(l.on(2) == 0);
  CHECK(l.on(3) == 0);
  // The two active connections close: the frames find the others rather than failing.
  onIo(l.io, [&] {
    l.tx[0]->close(pccl::Status::peerLost("closed by the test"));
    l.tx[1]->close(pccl::Status::peerLost("closed by the test"));
  });
  REQUIRE(l.send(16, 64 << 10));
  CHECK(l.on(2) + l.on(3) == 16);
}

TEST_CASE("untuned striper: every connection may take frames", "[tuner]") {
  Links l(3, nullptr);
  CHECK(l.striper->active() == 3);
  REQUIRE(l.send(8, 1024));
}
