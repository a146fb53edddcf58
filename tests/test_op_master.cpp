// The collectives' master side (collective/op_reports.cpp) against a fake master (collective::MasterPort):
// two Collectives in this process, a ring of two over loopback connections, one io_context run by
// the test itself. No master process, no control connection: the test reads what each peer reports
// and answers as the master would. The commit round runs without the master; a ring lost in the
// commit round leaves the calls in doubt, and the master's outcome settles them either way; a master
// that is away is asked once it is back; a query fails a call still running; a lost master fails one
// in doubt.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "collective/buffer_pool.hpp"
#include "collective/collectives.hpp"
#include "collective/master_port.hpp"
#include "net/data_channel.hpp"

using namespace pccl;
using collective::Collectives;
using collective::ReduceOutcome;
using collective::ReduceRequest;

namespace {

constexpr uint64_t kEpoch = 1;
constexpr uint64_t kTag = 7;
constexpr size_t kCount = 1000;

// Records what a peer tells the master.
struct FakeMaster : collective::MasterPort {
  bool is_ready = true;
  std::vector<wire::OpAnnounce> announced;
  std::vector<wire::OpDone> done;
  std::vector<wire::OpFailed> failed;
  std::vector<wire::OpState> states;

  bool ready() const override { return is_ready; }
  bool remoteClosed() const override { return false; }
  void announce(const wire::OpAnnounce& m, uint64_t) override { announced.push_back(m); }
  void reportDone(const wire::OpDone& m, uint64_t) override { done.push_back(m); }
  void reportFailed(const wire::OpFailed& m, uint64_t) override { failed.push_back(m); }
  void reportState(const wire::OpState& m, uint64_t) override { states.push_back(m); }

  bool saidPrepared() const {
    return std::any_of(states.begin(), states.end(), [](const wire::OpState& s) {
      return s.tag == kTag && s.state == static_cast<uint8_t>(wire::OpPhase::kPrepared);
    });
  }
  bool heardOf() const {
    return std::any_of(announced.begin(), announced.end(), [](const wire::OpAnnounce& a) { return a.tag == kTag; });
  }
};

// One peer: its collectives, its fake master, its ends of the ring's connections.
struct Peer {
  explicit Peer(asio::io_context& io)
      : colls(std::make_unique<Collectives>(io, &buffers, [this](const Status& why) { closeRing(why); })) {
    colls->setMaster(&master);
  }
  ~Peer() { colls.reset(); }
  void closeRing(const Status& why) {
    for (auto& c : successor) c->close(why);
    for (auto& c : predecessor) c->close(why);
  }

  collective::BufferPool buffers;
  FakeMaster master;
  Collectives::Channels successor, predecessor;
  std::unique_ptr<Collectives> colls;
  std::vector<float> input, output;
  std::optional<ReduceOutcome> outcome;
  bool prepared = false;  // it reached the commit round
};

// Two connected loopback sockets as data channels: the first end writes into the second.
std::pair<std::shared_ptr<net::DataChannel>, std::shared_ptr<net::DataChannel>> channelPair(asio::io_context& io) {
  net::Tcp::acceptor acceptor(io, net::Tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  net::Tcp::socket a(io), b(io);
  a.connect(acceptor.local_endpoint());
  acceptor.accept(b);
  return {std::make_shared<net::DataChannel>(net::Link{std::move(a), {}, {}}, kEpoch, "to the successor"),
          std::make_shared<net::DataChannel>(net::Link{std::move(b), {}, {}}, kEpoch, "from the predecessor")};
}

// Runs the io_context until `done` holds, at most `limit`.
bool runUntil(asio::io_context& io, const std::function<bool()>& done, Millis limit = Millis(10000)) {
  const TimePoint deadline = Clock::now() + limit;
  while (!done()) {
    if (Clock::now() > deadline) return false;
    io.restart();
    io.run_for(std::chrono::milliseconds(2));
  }
  return true;
}

struct Ring {
  asio::io_context io;
  Peer a{io}, b{io};

  Ring() {
    auto [ab_a, ab_b] = channelPair(io);
    auto [ba_b, ba_a] = channelPair(io);
    a.successor = {ab_a};
    b.predecessor = {ab_b};
    b.successor = {ba_b};
    a.predecessor = {ba_a};
    a.colls->setRing(kEpoch, 0, 2, a.successor, a.predecessor, "b", "b", 0);
    b.colls->setRing(kEpoch, 1, 2, b.successor, b.predecessor, "a", "a", 0);
    a.colls->setSelf("a");
    b.colls->setSelf("b");
  }
  ~Ring() {
    a.closeRing(Status::ok());
    b.closeRing(Status::ok());
    io.restart();
    io.poll();
  }

  // Both peers reach the commit round, and no message of it gets through: they stay prepared.
  void holdCommitRound() {
    for (Peer* p : {&a, &b}) {
      p->colls->setCtlHook([p](uint64_t, uint8_t kind) {
        if (kind == wire::RingCtl::kPrepared) p->prepared = true;
        return kind != wire::RingCtl::kPrepared && kind != wire::RingCtl::kCommit;
      });
    }
  }

  // Peer p calls the all-reduce of kTag: in place when `in_place` (its input restored on failure).
  void call(Peer& p, float value, bool in_place = false) {
    p.input.assign(kCount, value);
    p.output.assign(kCount, -1.0f);
    ReduceRequest r;
    r.tag = kTag;
    r.count = kCount;
    r.timeout = Millis(30000);
    r.submitted = Clock::now();
    r.output = reinterpret_cast<uint8_t*>(in_place ? p.input.data() : p.output.data());
    r.input = reinterpret_cast<const uint8_t*>(p.input.data());
    if (in_place) {
      const size_t bytes = kCount * sizeof(float);
      r.saved = p.buffers.acquire(bytes);
      std::memcpy(r.saved.data.get(), p.input.data(), bytes);
      r.input = r.saved.data.get();
      r.restore_to = reinterpret_cast<uint8_t*>(p.input.data());
      r.restore_bytes = bytes;
    }
    p.colls->submit(std::move(r), [&p](const ReduceOutcome& o) { p.outcome = o; });
  }

  // Both peers prepared, then the ring breaks under them: both are in doubt and ask their master.
  void intoDoubt() {
    holdCommitRound();
    call(a, 1.0f, true);
    call(b, 2.0f, true);
    REQUIRE(runUntil(io, [&] { return a.prepared && b.prepared; }));
    a.closeRing(Status::peerLost("the test broke the ring"));
  }

  void answer(Peer& p, bool committed) {
    wire::OpOutcome m;
    m.epoch = kEpoch;
    m.tag = kTag;
    m.seq = 0;
    m.committed = committed ? 1 : 0;
    m.code = static_cast<uint16_t>(Code::kPeerLost);
    m.reason = "a peer was lost before it was prepared";
    p.colls->onOutcome(m);
  }
};

}  // namespace

TEST_CASE("op master: the commit round commits without the master, which hears only of what it knew",
          "[commit][unit]") {
  Ring ring;
  ring.call(ring.a, 1.0f);
  ring.call(ring.b, 2.0f);
  REQUIRE(runUntil(ring.io, [&] { return ring.a.outcome && ring.b.outcome; }));
  for (Peer* p : {&ring.a, &ring.b}) {
    INFO(p->outcome->status.toString());
    CHECK(p->outcome->status.isOk());
    CHECK(std::all_of(p->output.begin(), p->output.end(), [](float v) { return v == 3.0f; }));
    CHECK(p->master.failed.empty());
    CHECK(p->master.states.empty());
    CHECK(p->master.done.size() == p->master.announced.size());  // done only for a call it heard of
  }
}

TEST_CASE("op master: calls in doubt ask the master and commit when it says committed", "[commit][unit]") {
  Ring ring;
  ring.intoDoubt();
  REQUIRE(runUntil(ring.io, [&] { return ring.a.master.saidPrepared() && ring.b.master.saidPrepared(); }));
  CHECK_FALSE(ring.a.outcome);
  CHECK_FALSE(ring.b.outcome);
  for (Peer* p : {&ring.a, &ring.b}) {
    CHECK(p->master.heardOf());  // announced before it says prepared: the master must know the call
    CHECK(p->master.failed.empty());
    ring.answer(*p, true);
  }
  REQUIRE(runUntil(ring.io, [&] { return ring.a.outcome && ring.b.outcome; }));
  for (Peer* p : {&ring.a, &ring.b}) {
    INFO(p->outcome->status.toString());
    CHECK(p->outcome->status.isOk());
    CHECK(std::all_of(p->input.begin(), p->input.end(), [](float v) { return v == 3.0f; }));
    CHECK(p->master.done.size() == 1);
  }
}

TEST_CASE("op master: calls in doubt fail with the master's code and restore their input", "[commit][unit]") {
  Ring ring;
  ring.intoDoubt();
  REQUIRE(runUntil(ring.io, [&] { return ring.a.master.saidPrepared() && ring.b.master.saidPrepared(); }));
  ring.answer(ring.a, false);
  ring.answer(ring.b, false);
  REQUIRE(runUntil(ring.io, [&] { return ring.a.outcome && ring.b.outcome; }));
  CHECK(ring.a.outcome->status.code() == Code::kPeerLost);
  CHECK(ring.b.outcome->status.code() == Code::kPeerLost);
  CHECK(std::all_of(ring.a.input.begin(), ring.a.input.end(), [](float v) { return v == 1.0f; }));
  CHECK(std::all_of(ring.b.input.begin(), ring.b.input.end(), [](float v) { return v == 2.0f; }));
  CHECK(ring.a.master.done.empty());
}

TEST_CASE("op master: a call in doubt while the master is away is asked about once it is back",
          "[commit][unit]") {
  Ring ring;
  ring.a.master.is_ready = false;
  ring.intoDoubt();
  REQUIRE(runUntil(ring.io, [&] { return ring.b.master.saidPrepared(); }));
  ring.io.restart();
  ring.io.poll();
  CHECK(ring.a.master.states.empty());
  CHECK(ring.a.master.announced.empty());
  CHECK_FALSE(ring.a.outcome);
  ring.a.master.is_ready = true;
  ring.a.colls->masterBack();
  CHECK(ring.a.master.heardOf());
  CHECK(ring.a.master.saidPrepared());
  ring.answer(ring.a, true);
  REQUIRE(runUntil(ring.io, [&] { return ring.a.outcome.has_value(); }));
  CHECK(ring.a.outcome->status.isOk());
}

TEST_CASE("op master: a lost master fails a call in doubt with the loss, and every later call", "[commit][unit]") {
  Ring ring;
  ring.intoDoubt();
  REQUIRE(runUntil(ring.io, [&] { return ring.a.master.saidPrepared(); }));
  ring.a.colls->linkLost(Status::masterUnreachable("the test's master is gone"));
  REQUIRE(runUntil(ring.io, [&] { return ring.a.outcome.has_value(); }));
  CHECK(ring.a.outcome->status.code() == Code::kMasterUnreachable);
  CHECK(std::all_of(ring.a.input.begin(), ring.a.input.end(), [](float v) { return v == 1.0f; }));
  ring.a.outcome.reset();
  ring.call(ring.a, 1.0f);
  REQUIRE(ring.a.outcome.has_value());  // at once
  CHECK_THAT(ring.a.outcome->status.message(), Catch::Contains("the test's master is gone"));
}

TEST_CASE("op master: the master's query fails a call still running here, which answers failed",
          "[commit][unit]") {
  Ring ring;
  ring.call(ring.a, 1.0f);  // b never calls: a waits for its data
  ring.io.restart();
  ring.io.poll();
  REQUIRE_FALSE(ring.a.outcome);
  ring.a.colls->onQuery(wire::OpQuery{kEpoch, kTag, 0});
  REQUIRE(runUntil(ring.io, [&] { return ring.a.outcome.has_value(); }));
  CHECK(ring.a.outcome->status.code() == Code::kPeerLost);
  REQUIRE(ring.a.master.states.size() == 1);
  CHECK(ring.a.master.states[0].state == static_cast<uint8_t>(wire::OpPhase::kFailed));
  // A call the master asks about that this peer has not made yet fails when it is made.
  ring.b.colls->onQuery(wire::OpQuery{kEpoch, kTag, 0});
  REQUIRE(ring.b.master.states.size() == 1);
  CHECK(ring.b.master.states[0].state == static_cast<uint8_t>(wire::OpPhase::kFailed));
  ring.call(ring.b, 2.0f);
  REQUIRE(ring.b.outcome.has_value());
  CHECK(ring.b.outcome->status.code() == Code::kPeerLost);
}
