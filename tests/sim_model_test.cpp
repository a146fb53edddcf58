// pccl-sim's model: the engine's links, the library's schedules on them, and scenarios, against times
// and byte counts computed by hand (docs/sim.md).
#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine.hpp"
#include "operation.hpp"
#include "predict.hpp"
#include "scenario.hpp"
#include "schedules.hpp"

using namespace pccl::sim;

namespace {
// N peers in one region: every link `mbit` (0: unlimited) and `delay_ms` one way.
Scenario flat(uint32_t n, double mbit, double delay_ms) {
  RegionsSpec spec;
  spec.sizes = {n};
  spec.lan_mbit = mbit;
  spec.lan_delay_ms = delay_ms;
  return scenarioFromRegions(spec);
}

// The model with nothing but the network: no headers, payload at the IP rate, K lanes.
Model bare(uint32_t lanes) {
  Model m;
  m.goodput = 1;
  m.connections = lanes;
  m.engine.frame_overhead_bytes = 0;
  return m;
}

std::vector<uint32_t> indexOrder(uint32_t n) {
  std::vector<uint32_t> v;
  for (uint32_t i = 0; i < n; ++i) v.push_back(i);
  return v;
}

RunSpec once() {
  RunSpec r;
  r.warmup = 0;
  r.iterations = 1;
  r.line_up = false;
  return r;
}

CallSpec call(uint32_t world, uint64_t bytes) {
  CallSpec c;
  c.world = world;
  c.count = bytes / 4;
  c.elem_bytes = 4;
  return c;
}

// Records when each frame's send completed and when it arrived.
struct Recorder : Listener {
  std::vector<Time> sent_at, delivered_at;
  void sent(const Frame&, Time t) override { sent_at.push_back(t); }
  void delivered(const Frame&, Time t) override { delivered_at.push_back(t); }
  void timer(uint32_t, uint64_t, Time) override {}
};
}  // namespace

TEST_CASE("sim engine: K lanes share a link's rate, frames beyond K wait their turn") {
  const Scenario s = flat(2, 8, 10);  // 1 MB/s, 10 ms
  for (uint32_t lanes : {1u, 4u}) {
    const Model m = bare(lanes);
    ScenarioLinks ctx{&s, &m};
    Engine engine(2, m.engine, &ScenarioLinks::of, &ctx);
    Recorder rec;
    const uint32_t op = engine.add(&rec, {0, 1});
    for (int i = 0; i < 4; ++i) {
      Frame f;
      f.op = op;
      f.from = 0;
      f.to = 1;
      f.bytes = 100000;  // 0.1 s each at 1 MB/s
      engine.send(f);
    }
    engine.run();
    REQUIRE(rec.sent_at.size() == 4);
    for (size_t i = 0; i < 4; ++i) {
      // One lane: one after the other. Four: all four share the rate and finish together.
      const double want = lanes == 1 ? 0.1 * static_cast<double>(i + 1) : 0.4;
      CHECK(rec.sent_at[i] == Approx(want).epsilon(1e-12));
      CHECK(rec.delivered_at[i] == Approx(want + 0.010).epsilon(1e-12));
    }
    CHECK(engine.linkStats(0, 1).payload_bytes == 400000);
  }
}

// Sends one frame of `bytes` from peer 0 to 1 at each of `at` (seconds) and records when each was sent.
struct Sender : Listener {
  Engine* engine = nullptr;
  uint32_t op = 0;
  uint64_t bytes = 0;
  std::vector<Time> started, sent_at;
  void sent(const Frame&, Time t) override { sent_at.push_back(t); }
  void delivered(const Frame&, Time) override {}
  void timer(uint32_t, uint64_t, Time t) override {
    started.push_back(t);
    Frame f;
    f.op = op;
    f.from = 0;
    f.to = 1;
    f.bytes = bytes;
    engine->send(f);
  }
};

TEST_CASE("sim engine: TCP windows send a window at once, then double per round trip, and restart after idle") {
  const Scenario s = flat(2, 8000, 50);  // 1 GB/s: the window, not the rate, decides; RTT 100 ms
  Model m = bare(1);
  m.engine.tcp.windows = true;
  ScenarioLinks ctx{&s, &m};
  Engine engine(2, m.engine, &ScenarioLinks::of, &ctx);
  Sender snd;
  snd.engine = &engine;
  snd.op = engine.add(&snd, {0, 1});
  snd.bytes = 15 * 14480;  // slow start from 10 segments: 10 + 20 + 40 + 80, about three round trips
  engine.at(0, snd.op, 0, 0);
  engine.at(2.0, snd.op, 0, 0);    // after 1.7 s idle (RTO 0.3 s): the window restarts at 10 segments
  engine.at(2.5, snd.op, 0, 0);    // after less than an RTO: the window it had
  engine.run();
  REQUIRE(snd.sent_at.size() == 3);
  const double first = snd.sent_at[0] - snd.started[0];
  CHECK(first > 0.25);  // without windows: 0.2 ms
  CHECK(first < 0.32);
  CHECK(snd.sent_at[1] - snd.started[1] == Approx(first).epsilon(0.02));
  CHECK(snd.sent_at[2] - snd.started[2] < 0.1 * first);
  // A frame within the window goes at the link's rate at once.
  Engine small(2, m.engine, &ScenarioLinks::of, &ctx);
  Sender one;
  one.engine = &small;
  one.op = small.add(&one, {0, 1});
  one.bytes = 10000;
  small.at(0, one.op, 0, 0);
  small.run();
  REQUIRE(one.sent_at.size() == 1);
  CHECK(one.sent_at[0] == Approx(10000 / 1e9).epsilon(1e-9));  // no header bytes in bare()
}

TEST_CASE("sim: a 2-peer ring on one link takes size / rate plus its one-way delays, as by hand") {
  const double d = 0.020, rate = 1e6;  // 8 Mbit/s = 1 MB/s of payload
  const Scenario s = flat(2, 8, d * 1e3);
  SECTION("one segment per chunk: send, forward, commit") {
    // 128 KiB: chunks of 64 KiB, one segment each. Phase 0 leaves by S/2R and lands d later, phase 1
    // the same: every byte in at S/R + 2d (the hello came at d); the commit round of two is one hop.
    const uint64_t bytes = 128 << 10;
    const Prediction p = predict(s, indexOrder(2), bare(1), call(2, bytes), Algorithm::kRing, once());
    CHECK(p.data_in_s == Approx(static_cast<double>(bytes) / rate + 2 * d).epsilon(1e-9));
    CHECK(p.time_s == Approx(static_cast<double>(bytes) / rate + 3 * d).epsilon(1e-9));
    CHECK(p.max_sent_bytes == bytes);  // 2(N-1)/N S with N = 2
  }
  SECTION("16 segments per chunk: the link never idles, so the delay counts once, then the commit") {
    // 4 MiB: chunks of 2 MiB in 16 segments of 128 KiB (0.131 s each, longer than d): the first
    // phase-1 segment is back before phase 0 has left, and the link sends S without a pause.
    const uint64_t bytes = 4 << 20;
    const Prediction p = predict(s, indexOrder(2), bare(1), call(2, bytes), Algorithm::kRing, once());
    CHECK(p.data_in_s == Approx(static_cast<double>(bytes) / rate + d).epsilon(1e-9));
    CHECK(p.time_s == Approx(static_cast<double>(bytes) / rate + 2 * d).epsilon(1e-9));
  }
}

TEST_CASE("sim: the flat ring sends 2(N-1)/N of the buffer over every link") {
  for (uint32_t n : {3u, 5u, 9u}) {
    const Scenario s = flat(n, 1000, 1);
    const Model m = bare(4);
    ScenarioLinks ctx{&s, &m};
    Engine engine(n, m.engine, &ScenarioLinks::of, &ctx);
    const uint64_t bytes = uint64_t{n} * (1u << 20);  // divisible by N: equal chunks
    Operation op(engine, indexOrder(n), makeSchedule(Algorithm::kRing, call(n, bytes)));
    for (uint32_t r = 0; r < n; ++r) op.callAt(r, 0);
    engine.run();
    const uint64_t want = 2 * (uint64_t{n} - 1) * bytes / n;
    for (uint32_t r = 0; r < n; ++r) {
      CHECK(engine.linkStats(r, (r + 1) % n).payload_bytes == want);
      CHECK(op.sentBytes()[r] == want);
      CHECK(op.times()[r].end > 0);
    }
    for (const auto& l : engine.links()) CHECK((l.to == (l.from + 1) % n || l.to == (l.from + n - 1) % n));
  }
}

TEST_CASE("sim: latency of small all-reduces in one-way delays: gather ceil((N-1)/2), ring 2(N-1), commit ceil((N-1)/2)") {
  const double d = 0.040;
  for (uint32_t n : {2u, 3u, 4u, 5u, 8u, 9u}) {
    const Scenario s = flat(n, 0, d * 1e3);  // unlimited rate: only the delays count
    const double commit = ((n - 1 + 1) / 2) * d;
    const Prediction g = predict(s, indexOrder(n), bare(4), call(n, 4096), Algorithm::kGather, once());
    CHECK(g.data_in_s == Approx(((n - 1 + 1) / 2) * d).epsilon(1e-12));
    CHECK(g.time_s == Approx(g.data_in_s + commit).epsilon(1e-12));
    const Prediction r = predict(s, indexOrder(n), bare(4), call(n, 4096), Algorithm::kRing, once());
    CHECK(r.data_in_s == Approx(2 * (n - 1) * d).epsilon(1e-12));
    CHECK(r.time_s == Approx(r.data_in_s + commit).epsilon(1e-12));
    // The gather's bytes: each member sends its input both ways and forwards N - 3 others (N > 2).
    CHECK(g.max_sent_bytes == (n == 2 ? 4096u : 4096u * (n - 1)));
  }
}

TEST_CASE("sim: the engine is deterministic, the line-up included") {
  RegionsSpec spec;
  spec.sizes = {4, 3, 2};
  spec.lan_mbit = 500;
  spec.wan_mbit = 50;
  spec.pair_delay_ms = {{{0, 1}, 40}, {{0, 2}, 70}, {{1, 2}, 80}};
  const Scenario s = scenarioFromRegions(spec);
  Model m;
  m.connections = 16;
  std::vector<uint32_t> ring;
  std::string error;
  REQUIRE(ringOrder(s, m, "solver", &ring, &error));
  RunSpec run;
  run.warmup = 1;
  run.iterations = 2;
  run.gather_bytes = 1 << 20;
  for (uint64_t bytes : {uint64_t{4096}, uint64_t{16} << 20}) {
    for (Algorithm a : {Algorithm::kRing, Algorithm::kGather}) {
      if (!runnable(a, call(9, bytes))) continue;
      const Prediction x = predict(s, ring, m, call(9, bytes), a, run);
      const Prediction y = predict(s, ring, m, call(9, bytes), a, run);
      CHECK(x.times_s == y.times_s);  // bit for bit
      CHECK(x.events == y.events);
      CHECK(x.time_s > 0);
    }
  }
}

TEST_CASE("sim: the ring of three regions crosses each region boundary once, and the gather rule is the library's") {
  RegionsSpec spec;
  spec.sizes = {4, 3, 2};
  spec.lan_mbit = 500;
  spec.wan_mbit = 50;
  const Scenario s = scenarioFromRegions(spec);
  std::vector<uint32_t> ring;
  std::string error;
  for (const char* rule : {"solver", "regions"}) {
    REQUIRE(ringOrder(s, Model{}, rule, &ring, &error));
    REQUIRE(ring.size() == 9);
    int crossings = 0;
    for (size_t i = 0; i < 9; ++i) crossings += s.region[ring[i]] != s.region[ring[(i + 1) % 9]] ? 1 : 0;
    CHECK(crossings == 3);
  }
  CHECK_FALSE(ringOrder(s, Model{}, "0,1,2", &ring, &error));
  CHECK(libraryChoice(call(9, 128 << 10), 1 << 20) == Algorithm::kGather);  // 8 x 128 KiB = 1 MiB
  CHECK(libraryChoice(call(9, (128 << 10) + 4), 1 << 20) == Algorithm::kRing);
  CHECK(runnable(Algorithm::kGather, call(9, 512 << 10)));  // 8 x 512 KiB: the eager limit
  CHECK_FALSE(runnable(Algorithm::kGather, call(9, (512 << 10) + 4)));
}

TEST_CASE("sim: a pccl-wanem paths file gives regions, each pair's slowest rate and its delay") {
  const std::string path = "sim_model_test.paths";
  {
    std::ofstream f(path);
    f << "rank 0 eu\nrank 1 eu\nrank 2 us\nlink eu rate=500\nlink us rate=400\n"
         "path eu eu delay=0.5\npath eu us delay=40 rate=50\npath 2 -> 0 rate=20\n";
  }
  Scenario s;
  std::string error;
  REQUIRE(scenarioFromPaths(path, 0, 0, 0, &s, &error));
  std::remove(path.c_str());
  CHECK(s.peers == 3);
  CHECK(s.region == std::vector<std::string>{"eu", "eu", "us"});
  CHECK(s.rateMbit(0, 1) == 500);
  CHECK(s.rateMbit(0, 2) == 50);
  CHECK(s.rateMbit(2, 0) == 20);
  CHECK(s.rateMbit(2, 1) == 50);
  CHECK(s.delayMs(0, 1) == 0.5);
  CHECK(s.delayMs(2, 1) == 40);
  CHECK_FALSE(scenarioFromPaths("no-such-file.paths", 0, 0, 0, &s, &error));
  std::vector<uint32_t> sizes;
  REQUIRE(parseRegionSizes("8x128", &sizes, &error));
  CHECK(sizes == std::vector<uint32_t>(8, 128));
  REQUIRE(parseRegionSizes("4,3,2", &sizes, &error));
  CHECK(sizes == std::vector<uint32_t>{4, 3, 2});
  CHECK_FALSE(parseRegionSizes("4,,2", &sizes, &error));
  CHECK_FALSE(parseRegionSizes("0x3", &sizes, &error));
}

namespace {
// Regions of `sizes` (peers numbered region by region, the ring region by region): LAN `lan_mbit` (0:
// unlimited) and `lan_ms` one way, every pair across regions its own `wan_mbit` path `wan_ms` one way.
Scenario regions(std::vector<uint32_t> sizes, double lan_mbit, double lan_ms, double wan_mbit, double wan_ms) {
  RegionsSpec spec;
  spec.sizes = std::move(sizes);
  spec.lan_mbit = lan_mbit;
  spec.lan_delay_ms = lan_ms;
  spec.wan_mbit = wan_mbit;
  spec.wan_delay_ms = wan_ms;
  return scenarioFromRegions(spec);
}

// A call on the scenario's regions, the ring region by region, in a two-level group.
CallSpec twoLevelCall(const Scenario& s, uint64_t bytes) {
  CallSpec c = call(s.peers, bytes);
  c.regions = twoLevelRingOf(s.region);
  c.two_level_group = true;
  return c;
}

// One two-level all-reduce, every member calling at 0: payload per member across regions and within.
struct Payload {
  std::vector<uint64_t> wan, lan;
  std::vector<MemberTimes> times;
};
Payload twoLevelPayload(const Scenario& s, uint64_t bytes) {
  const Model m = bare(4);
  ScenarioLinks ctx{&s, &m};
  Engine engine(s.peers, m.engine, &ScenarioLinks::of, &ctx);
  Operation op(engine, indexOrder(s.peers), makeSchedule(Algorithm::kTwoLevel, twoLevelCall(s, bytes)));
  for (uint32_t r = 0; r < s.peers; ++r) op.callAt(r, 0);
  engine.run();
  Payload p;
  p.wan.assign(s.peers, 0);
  p.lan.assign(s.peers, 0);
  for (const auto& [pair, b] : op.pairBytes()) {
    const uint32_t from = static_cast<uint32_t>(pair / s.peers), to = static_cast<uint32_t>(pair % s.peers);
    (s.region[from] == s.region[to] ? p.lan : p.wan)[from] += b;
  }
  p.times = op.times();
  return p;
}
}  // namespace

TEST_CASE("sim two-level: two regions of two, LAN unlimited: the busiest WAN path's bytes / rate + one delay") {
  // 256 KiB: blocks and pieces of 128 KiB, each piece's ring of R = 2 owners cuts it into two chunks of
  // 64 KiB, each in 8 segments of 8 KiB (the WAN level's floor). The LAN levels take no time; the WAN
  // level: phase 0 leaves by c = 64 KiB / rate, and phase 1's segments follow without a gap (each is
  // forwarded when its phase-0 segment lands, c/8 + d after it left, before the link is free: c/8 + d
  // <= c): every byte in at 2c + d, the path carrying 2(R-1)/R · S/m.
  const double d = 0.020, rate = 1e6;
  const Scenario s = regions({2, 2}, 0, 0, 8, d * 1e3);
  const uint64_t bytes = 256 << 10;
  const CallSpec c = twoLevelCall(s, bytes);
  REQUIRE(c.regions->pieces() == 2);
  REQUIRE(runnable(Algorithm::kTwoLevel, c));
  const Prediction p = predict(s, indexOrder(4), bare(1), c, Algorithm::kTwoLevel, once());
  const double path_bytes = 2.0 * (2 - 1) / 2 * static_cast<double>(bytes) / 2;
  REQUIRE(static_cast<double>(64 << 10) / 8 / rate + d <= static_cast<double>(64 << 10) / rate);
  CHECK(p.data_in_s == Approx(path_bytes / rate + d).epsilon(1e-9));
  CHECK(p.link_bound_s == Approx(path_bytes / rate).epsilon(1e-9));  // the LAN pairs have no rate
  CHECK(p.time_s > p.data_in_s);  // and the flat ring's commit round, which crosses the WAN
  CHECK(p.max_sent_bytes == static_cast<uint64_t>(path_bytes) + 2 * (bytes / 2));  // WAN + LAN (m = 2)
}

TEST_CASE("sim two-level: equal regions, every member's WAN payload is 2(R-1)/R · S/m, its LAN 2(m-1)/m · S") {
  const Scenario s = regions({3, 3, 3}, 1000, 0.5, 100, 20);
  const uint64_t count = 9 * (1u << 15);  // divisible by m · R: equal blocks and chunks
  const uint64_t bytes = count * 4;
  const Payload p = twoLevelPayload(s, bytes);
  for (uint32_t r = 0; r < 9; ++r) {
    CHECK(p.wan[r] == 2 * (3 - 1) * bytes / 3 / 3);
    CHECK(p.lan[r] == 2 * (3 - 1) * bytes / 3);
    CHECK(p.times[r].end > p.times[r].data_in);
  }
}

TEST_CASE("sim two-level: regions of 4 + 3 + 2, six pieces, each member's WAN link carries its own block") {
  const Scenario s = regions({4, 3, 2}, 500, 0.5, 50, 40);
  REQUIRE(twoLevelCall(s, 4).regions->pieces() == 6);  // boundaries 1/4, 1/3, 1/2, 2/3, 3/4
  const uint64_t count = 36 * (1u << 12);  // the pieces (twelfths) and their chunks (thirds) exact
  const uint64_t bytes = count * 4;
  const Payload p = twoLevelPayload(s, bytes);
  const std::vector<uint64_t> m = {4, 4, 4, 4, 3, 3, 3, 2, 2};
  for (uint32_t r = 0; r < 9; ++r) {
    CHECK(p.wan[r] == 2 * (3 - 1) * (bytes / m[r]) / 3);  // 2(R-1)/R of its block
    CHECK(p.lan[r] == 2 * (m[r] - 1) * bytes / m[r]);
  }
  // Large calls run in waves (twoLevelCallWaves): the same bytes, cut into 6 ranges (a few elements of rounding).
  const uint64_t big = uint64_t{36} * (1u << 20);
  REQUIRE(pccl::collective::twoLevelCallWaves(big) == 6);
  const Payload w = twoLevelPayload(s, big);
  for (uint32_t r = 0; r < 9; ++r) CHECK(static_cast<double>(w.wan[r]) == Approx(4.0 / 3 * static_cast<double>(big / m[r])).epsilon(1e-5));
}

TEST_CASE("sim two-level: a region of one member runs its pieces alone, from its input") {
  const Scenario s = regions({3, 1, 2}, 1000, 0.5, 100, 20);
  const uint64_t bytes = 12 * 4096;
  const CallSpec c = twoLevelCall(s, bytes);
  REQUIRE(runnable(Algorithm::kTwoLevel, c));
  const Payload p = twoLevelPayload(s, bytes);
  CHECK(p.lan[3] == 0);
  CHECK(p.wan[3] == 2 * (3 - 1) * bytes / 3);  // its block is the whole buffer
  for (const MemberTimes& t : p.times) CHECK(t.end > 0);
  // One member per region, or one region: nothing for two levels.
  CHECK_FALSE(runnable(Algorithm::kTwoLevel, twoLevelCall(regions({1, 1, 1}, 1000, 0.5, 100, 20), bytes)));
  CHECK_FALSE(runnable(Algorithm::kTwoLevel, twoLevelCall(regions({5}, 1000, 0.5, 100, 20), bytes)));
}

TEST_CASE("sim two-level gather: a tiny call takes ceil((m-1)/2) LAN + ceil((R-1)/2) WAN + (m-1) LAN delays, then the commit round") {
  const double l = 0.001, d = 0.040;
  for (uint32_t m : {2u, 3u, 4u}) {
    const Scenario s = regions({m, m, m}, 0, l * 1e3, 0, d * 1e3);  // unlimited rates: delays only
    const CallSpec c = twoLevelCall(s, 4096);
    REQUIRE(runnable(Algorithm::kTwoLevelGather, c));
    const Prediction g = predict(s, indexOrder(3 * m), bare(4), c, Algorithm::kTwoLevelGather, once());
    CHECK(g.data_in_s == Approx((m / 2) * l + d + (m - 1) * l).epsilon(1e-12));
    CHECK(g.time_s == Approx(g.data_in_s + g.commit_s).epsilon(1e-12));
    // The commit round is the flat ring's: it crosses the WAN at least once, at most ceil((N-1)/2) times.
    CHECK(g.commit_s >= d);
    CHECK(g.commit_s <= ((3 * m) / 2) * d + 1e-12);
    // The flat gather's farthest inputs cross two region boundaries.
    const Prediction f = predict(s, indexOrder(3 * m), bare(4), c, Algorithm::kGather, once());
    CHECK(f.data_in_s > g.data_in_s);
  }
}

TEST_CASE("sim two-level: the library's choice in a two-level group, and determinism") {
  const Scenario s = regions({4, 3, 2}, 500, 0.5, 50, 40);
  CallSpec c = twoLevelCall(s, 256 << 10);  // 2 x 256 KiB within 1 MiB, 8 x 256 KiB within 4 MiB
  CHECK(libraryChoice(c, 1 << 20) == Algorithm::kTwoLevelGather);
  c.two_level_group = false;
  CHECK(libraryChoice(c, 1 << 20) == Algorithm::kRing);  // the flat gather: 8 x 256 KiB > 1 MiB
  c = twoLevelCall(s, (512 << 10) + 4);
  CHECK(libraryChoice(c, 1 << 20) == Algorithm::kTwoLevel);
  CHECK_FALSE(runnable(Algorithm::kTwoLevelGather, c));
  Model m;
  m.connections = 16;
  RunSpec run;
  run.warmup = 1;
  run.iterations = 2;
  run.gather_bytes = 1 << 20;
  for (uint64_t bytes : {uint64_t{4096}, uint64_t{16} << 20}) {
    const CallSpec x = twoLevelCall(s, bytes);
    const Algorithm a = libraryChoice(x, run.gather_bytes);
    for (bool windows : {false, true}) {
      m.engine.tcp.windows = windows;
      const Prediction p = predict(s, indexOrder(9), m, x, a, run);
      const Prediction q = predict(s, indexOrder(9), m, x, a, run);
      CHECK(p.times_s == q.times_s);  // bit for bit
      CHECK(p.events == q.events);
      CHECK(p.time_s > 0);
    }
  }
}
