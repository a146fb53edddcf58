// The ring pool's acceptor side (peer/ring_pool.hpp) against a hand-driven predecessor: a P2PHello is
// accepted only when signed with the ring key the master listed for our predecessor, over this very
// connection's session id; each inbound index is given out once, even while the first connection's
// P2PAccept is still being written. Real sockets on loopback, real libsodium.
#include <catch2/catch.hpp>

#include <future>
#include <memory>
#include <thread>

#include "net/auth.hpp"
#include "net/identity.hpp"
#include "peer/link_probe.hpp"
#include "peer/ring_pool.hpp"
#include "raw_socket.hpp"

using namespace pccl;
using namespace pccl::test;

namespace {

constexpr uint64_t kEpoch = 5;

wire::Uuid idOf(uint8_t v) {
  wire::Uuid id{};
  id.fill(v);
  return id;
}

// A ring pool on its own io thread, expecting `inbound` connections from predecessor idOf(1), whose
// ring key is `predecessor`.
struct Acceptor {
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work = asio::make_work_guard(io);
  std::unique_ptr<peer::RingPool> pool;
  RawListener listener;
  std::promise<Status> built;
  peer::RingPlan plan;
  std::thread thread;

  Acceptor(const net::SigningKey& predecessor, uint32_t inbound) {
    pool = std::make_unique<peer::RingPool>(io, std::make_shared<net::AuthKey>(""),
                                            std::make_shared<net::SigningKey>(), Millis(3000), Millis(3000));
    plan.epoch = kEpoch;
    plan.self = idOf(2);
    plan.alone = false;
    plan.predecessor = idOf(1);
    plan.predecessor_key = predecessor.publicKey();
    plan.predecessor_connections = inbound;
    thread = std::thread([this] { io.run(); });
  }
  ~Acceptor() {
    std::promise<void> gone;
    asio::post(io, [&] {
      pool.reset();
      gone.set_value();
    });
    gone.get_future().wait();
    work.reset();
    io.stop();
    thread.join();
  }

  // A connection as the pool sees it after a handshake with session id `session` (none is run: the
  // ring hello is what is under test), and the test's end of it.
  std::pair<net::Link, RawSocket> connection(const net::SessionId& session) {
    net::Tcp::socket s(io);
    s.connect(net::Tcp::endpoint(asio::ip::make_address("127.0.0.1"), listener.port()));
    RawSocket theirs = listener.accept(2000);
    REQUIRE(theirs.ok());
    return {net::Link{std::move(s), {}, session}, std::move(theirs)};
  }

  // On the io thread: adopts every link (their hellos already sent), then starts the build, so that
  // all hellos are handled while the first P2PAccept is still being written.
  void adoptThenBuild(std::vector<net::Link> links) {
    auto shared = std::make_shared<std::vector<net::Link>>(std::move(links));
    asio::post(io, [this, shared] {
      for (auto& l : *shared) pool->adopt(std::move(l));
      pool->build(plan, [this](uint64_t, const Status& s) { built.set_value(s); });
    });
  }
};

net::SessionId sessionOf(uint8_t v) {
  net::SessionId s{};
  s.fill(v);
  return s;
}

std::vector<uint8_t> helloFrame(const net::SigningKey& key, const net::SessionId& signed_session,
                                const wire::Uuid& sender, uint32_t index, uint64_t epoch = kEpoch, uint8_t flags = 0) {
  wire::P2PHello h;
  h.sender_id = sender;
  h.epoch = epoch;
  h.index = index;
  h.flags = flags;
  const std::vector<uint8_t> bytes = peer::ringHelloSigned(signed_session, h);
  h.signature = key.sign(bytes.data(), bytes.size());
  return wire::encodeFrame(h, epoch);
}

// The acceptor's answer: P2PAccept (OK) or the Error it sent, as a Status.
Status answer(RawSocket& s) {
  auto f = s.recvFrame(3000);
  if (!f) return Status::timeout("no answer");
  if (f->header.type == static_cast<uint16_t>(wire::MsgType::kP2PAccept)) return Status::ok();
  if (f->header.type != static_cast<uint16_t>(wire::MsgType::kError)) return Status::protocol("unexpected frame");
  auto e = wire::decodePayload<wire::Error>(f->payload.data(), f->payload.size());
  REQUIRE(e.isOk());
  return Status(wire::codeFromWire(e->code, Code::kProtocolError), e->message);
}

}  // namespace

TEST_CASE("ring pool: a ring hello is accepted only when the listed predecessor signed it for this connection",
          "[ring]") {
  REQUIRE(net::initCrypto().isOk());
  const net::SigningKey predecessor;
  const net::SigningKey other_member;  // holds the run's secret too, but is not our predecessor
  struct Case {
    const char* name;
    const net::SigningKey* signer;
    uint8_t signed_session;  // the connection's own session is 7
    wire::Uuid sender;
    Code expected;
  };
  const Case cases[] = {
      {"signed by the predecessor for this connection", &predecessor, 7, idOf(1), Code::kOk},
      {"another member posing as the predecessor", &other_member, 7, idOf(1), Code::kAuthFailed},
      {"the predecessor's hello replayed from another connection", &predecessor, 8, idOf(1), Code::kAuthFailed},
      {"a validly signed hello from someone who is not our predecessor", &predecessor, 7, idOf(3),
       Code::kInvalidUsage},
  };
  for (const Case& k : cases) {
    SECTION(k.name) {
      Acceptor a(predecessor, 1);
      auto [link, theirs] = a.connection(sessionOf(7));
      REQUIRE(theirs.sendBytes(helloFrame(*k.signer, sessionOf(k.signed_session), k.sender, 0)));
      std::vector<net::Link> links;
      links.push_back(std::move(link));
      a.adoptThenBuild(std::move(links));
      const Status got = answer(theirs);
      CHECK(got.code() == k.expected);
      if (k.expected == Code::kAuthFailed) CHECK_THAT(got.message(), Catch::Contains("not signed"));
      auto built = a.built.get_future();
      if (k.expected == Code::kOk) {
        REQUIRE(built.wait_for(std::chrono::seconds(3)) == std::future_status::ready);
        CHECK(built.get().isOk());
      } else {
        CHECK(theirs.waitClosed(3000));
      }
    }
  }
}

TEST_CASE("ring pool: an index is given out once, even while its first P2PAccept is being written", "[ring]") {
  REQUIRE(net::initCrypto().isOk());
  const net::SigningKey predecessor;
  Acceptor a(predecessor, 2);
  // Two connections both say index 0 (each correctly signed for itself); a third says index 1.
  auto [l0, s0] = a.connection(sessionOf(10));
  auto [l1, s1] = a.connection(sessionOf(11));
  auto [l2, s2] = a.connection(sessionOf(12));
  REQUIRE(s0.sendBytes(helloFrame(predecessor, sessionOf(10), idOf(1), 0)));
  REQUIRE(s1.sendBytes(helloFrame(predecessor, sessionOf(11), idOf(1), 0)));
  REQUIRE(s2.sendBytes(helloFrame(predecessor, sessionOf(12), idOf(1), 1)));
  std::vector<net::Link> links;
  links.push_back(std::move(l0));
  links.push_back(std::move(l1));
  links.push_back(std::move(l2));
  a.adoptThenBuild(std::move(links));
  const Status first = answer(s0), second = answer(s1), third = answer(s2);
  CHECK(first.isOk() != second.isOk());  // exactly one of the two gets index 0
  const Status& refused = first.isOk() ? second : first;
  CHECK(refused.code() == Code::kInvalidUsage);
  CHECK_THAT(refused.message(), Catch::Contains("duplicate ring connection index 0"));
  CHECK(third.isOk());
  auto built = a.built.get_future();
  REQUIRE(built.wait_for(std::chrono::seconds(3)) == std::future_status::ready);
  CHECK(built.get().isOk());
  // The winner's connection is the one installed: it stays open, the loser's is closed.
  CHECK((first.isOk() ? s1 : s0).waitClosed(3000));
  std::promise<size_t> open_channels;
  asio::post(a.io, [&] {
    size_t n = 0;
    for (const auto& ch : a.pool->inbound()) n += ch && ch->isOpen() ? 1 : 0;
    open_channels.set_value(n);
  });
  CHECK(open_channels.get_future().get() == 2);
}

// A resume hello (protocol 17) hands a broken connection a new one only for a connection of the
// current epoch that came up resumable, from its listed sender, signed for the new connection.
TEST_CASE("ring pool: a resume hello is refused for a connection that does not resume, and when not signed",
          "[ring][resume]") {
  REQUIRE(net::initCrypto().isOk());
  const net::SigningKey predecessor, other_member;
  Acceptor a(predecessor, 1);  // the pool's resuming is off: its connection comes up not resumable
  auto [link, theirs] = a.connection(sessionOf(20));
  REQUIRE(theirs.sendBytes(helloFrame(predecessor, sessionOf(20), idOf(1), 0, kEpoch, wire::kHelloResumable)));
  std::vector<net::Link> links;
  links.push_back(std::move(link));
  a.adoptThenBuild(std::move(links));
  REQUIRE(answer(theirs).isOk());
  auto built = a.built.get_future();
  REQUIRE(built.wait_for(std::chrono::seconds(3)) == std::future_status::ready);
  REQUIRE(built.get().isOk());
  const uint8_t resume = wire::kHelloResumable | wire::kHelloResume;
  struct Case {
    const char* name;
    const net::SigningKey* signer;
    uint32_t index;
    uint64_t epoch;
    Code code;
    const char* says;
  };
  const Case cases[] = {
      {"the connection was not made resumable", &predecessor, 0, kEpoch, Code::kInvalidUsage, "not made resumable"},
      {"no such connection", &predecessor, 3, kEpoch, Code::kInvalidUsage, "bad or duplicate"},
      {"an older epoch", &predecessor, 0, kEpoch - 1, Code::kInvalidUsage, "to resume here"},
      {"not signed by the listed sender", &other_member, 0, kEpoch, Code::kAuthFailed, "not signed"},
  };
  for (const Case& k : cases) {
    INFO(k.name);
    auto [l, s] = a.connection(sessionOf(21));
    REQUIRE(s.sendBytes(helloFrame(*k.signer, sessionOf(21), idOf(1), k.index, k.epoch, resume)));
    asio::post(a.io, [&a, l = std::make_shared<net::Link>(std::move(l))]() mutable { a.pool->adopt(std::move(*l)); });
    const Status got = answer(s);
    CHECK(got.code() == k.code);
    CHECK_THAT(got.message(), Catch::Contains(k.says));
  }
  // The connection that came up is untouched.
  std::promise<bool> open;
  asio::post(a.io, [&] { open.set_value(a.pool->inbound().at(0)->isOpen()); });
  CHECK(open.get_future().get());
}

// A dialler whose first connection broke after its hello, before our P2PAccept reached it, dials again
// with a resume hello (protocol 19): where we never took that connection in, the resume hello is taken
// in as the first (here it came before the round opened, and waited for it as a first hello does).
// Another hello for the slot is refused after that, and the connection taken in stays.
TEST_CASE("ring pool: a resume hello for a slot that holds no connection is taken in as its first", "[ring][resume]") {
  REQUIRE(net::initCrypto().isOk());
  const net::SigningKey predecessor;
  Acceptor a(predecessor, 1);
  const uint8_t resume = wire::kHelloResumable | wire::kHelloResume;
  auto [link, theirs] = a.connection(sessionOf(30));
  REQUIRE(theirs.sendBytes(helloFrame(predecessor, sessionOf(30), idOf(1), 0, kEpoch, resume)));
  std::vector<net::Link> links;
  links.push_back(std::move(link));
  a.adoptThenBuild(std::move(links));  // adopted before the round opens: parked, then taken in
  REQUIRE(answer(theirs).isOk());
  auto built = a.built.get_future();
  REQUIRE(built.wait_for(std::chrono::seconds(3)) == std::future_status::ready);
  REQUIRE(built.get().isOk());
  auto [l2, s2] = a.connection(sessionOf(31));
  REQUIRE(s2.sendBytes(helloFrame(predecessor, sessionOf(31), idOf(1), 0, kEpoch)));
  asio::post(a.io, [&a, l = std::make_shared<net::Link>(std::move(l2))]() mutable { a.pool->adopt(std::move(*l)); });
  CHECK(answer(s2).code() == Code::kInvalidUsage);
  std::promise<bool> open;
  asio::post(a.io, [&] { open.set_value(a.pool->inbound().at(0)->isOpen()); });
  CHECK(open.get_future().get());
}

// The dialling side of a build: a connection reset before its hello (a fault on the path) is dialled
// again, up to three times in all, and then the build fails with the reason.
TEST_CASE("ring pool: a build dials a connection reset before its hello again, three times in all", "[ring]") {
  REQUIRE(net::initCrypto().isOk());
  const net::SigningKey predecessor;
  Acceptor a(predecessor, 0);
  RawListener successor;
  a.plan.successor.id = idOf(3);
  a.plan.successor.host = "127.0.0.1";
  a.plan.successor.port = successor.port();
  a.plan.successor_connections = 1;
  a.adoptThenBuild({});
  for (int attempt = 0; attempt < 3; ++attempt) {
    INFO("attempt " << attempt);
    RawSocket s = successor.accept(5000);
    REQUIRE(s.ok());
    const linger reset{1, 0};
    REQUIRE(::setsockopt(s.fd(), SOL_SOCKET, SO_LINGER, &reset, sizeof reset) == 0);  // its close sends an RST
  }
  auto built = a.built.get_future();
  REQUIRE(built.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  const Status st = built.get();
  INFO(st.toString());
  CHECK_FALSE(st.isOk());
  CHECK_THAT(st.message(), Catch::Contains("ring successor"));
  CHECK_FALSE(successor.accept(500).ok());  // no fourth dial
}

namespace {
// A probe round in which we receive from `source` (member 1) on one connection.
wire::ProbePlan receivingPlan(const net::SigningKey& source, uint64_t probe, uint32_t budget_ms, uint64_t max_bytes) {
  wire::ProbePlan plan;
  plan.probe_id = probe;
  plan.budget_ms = budget_ms;
  plan.max_bytes = max_bytes;
  plan.has_source = true;
  plan.source.id = idOf(1);
  plan.source.ring_key = source.publicKey();
  plan.source_connections = 1;
  return plan;
}
}  // namespace

// Probe connections (peer/link_probe.hpp) are introduced the same way: the hello must be signed by the
// source the round's plan names, for this connection, and carry the round's probe id.
TEST_CASE("link probe: a probe hello is accepted only from the plan's source, signed, for its round",
          "[ring][optimize]") {
  REQUIRE(net::initCrypto().isOk());
  const net::SigningKey source;
  const net::SigningKey other_member;
  constexpr uint64_t kProbe = 9;
  struct Case {
    const char* name;
    const net::SigningKey* signer;
    uint8_t signed_session;  // the connection's own session is 7
    wire::Uuid sender;
    uint64_t probe;
    Code expected;
  };
  const Case cases[] = {
      {"signed by the source for this connection and round", &source, 7, idOf(1), kProbe, Code::kOk},
      {"another member posing as the source", &other_member, 7, idOf(1), kProbe, Code::kAuthFailed},
      {"the source's hello replayed from another connection", &source, 8, idOf(1), kProbe, Code::kAuthFailed},
      {"a member the plan does not name", &source, 7, idOf(3), kProbe, Code::kInvalidUsage},
      {"an earlier round", &source, 7, idOf(1), kProbe - 1, Code::kInvalidUsage},
  };
  for (const Case& k : cases) {
    SECTION(k.name) {
      Acceptor a(source, 1);
      auto prober = std::make_shared<peer::LinkProber>(a.io, std::make_shared<net::AuthKey>(""),
                                                       std::make_shared<net::SigningKey>(), Millis(3000));
      const wire::ProbePlan plan = receivingPlan(source, kProbe, 100, 1);
      auto [link, theirs] = a.connection(sessionOf(7));
      REQUIRE(theirs.sendBytes(helloFrame(*k.signer, sessionOf(k.signed_session), k.sender, 0, k.probe)));
      auto shared = std::make_shared<net::Link>(std::move(link));
      asio::post(a.io, [&, shared] {
        prober->start(idOf(2), plan, [](const wire::ProbeReport&) {});
        prober->adopt(std::move(*shared));
      });
      const Status got = answer(theirs);
      CHECK(got.code() == k.expected);
      if (k.expected == Code::kAuthFailed) CHECK_THAT(got.message(), Catch::Contains("probe hello"));
      std::promise<void> gone;
      asio::post(a.io, [&] {
        prober.reset();
        gone.set_value();
      });
      gone.get_future().wait();
    }
  }
}

// Issue 32 §4: a member measured against a peer chooses the size of its probe frames. Each data frame
// above kProbeFrameBytes is a protocol error (before its payload is read), and probe payloads are read
// into the channel's bounded discard chunk, never staged at their size.
TEST_CASE("link probe: an oversized probe frame is refused, and probe payloads are never staged", "[ring][optimize]") {
  REQUIRE(net::initCrypto().isOk());
  const net::SigningKey source;
  constexpr uint64_t kProbe = 9;
  Acceptor a(source, 1);
  auto prober = std::make_shared<peer::LinkProber>(a.io, std::make_shared<net::AuthKey>(""),
                                                   std::make_shared<net::SigningKey>(), Millis(3000));
  const wire::ProbePlan plan = receivingPlan(source, kProbe, 10000, 1u << 30);
  auto [link, theirs] = a.connection(sessionOf(7));
  REQUIRE(theirs.sendBytes(helloFrame(source, sessionOf(7), idOf(1), 0, kProbe)));
  auto shared = std::make_shared<net::Link>(std::move(link));
  std::promise<wire::ProbeReport> reported;
  asio::post(a.io, [&, shared] {
    prober->start(idOf(2), plan, [&](const wire::ProbeReport& r) { reported.set_value(r); });
    prober->adopt(std::move(*shared));
  });
  REQUIRE(answer(theirs).isOk());
  // Three frames of the largest allowed size are measured; then one of 1 MiB + 1 (of up to 64 MiB that
  // the frame limit would let through) ends the round with an error.
  const auto frame = [&](uint32_t bytes) {
    const auto head = wire::encodeDataFrameHead(wire::dataHeader(kProbe, peer::kProbeData, 0, 0), kProbe, bytes);
    std::vector<uint8_t> f(head.begin(), head.end());
    f.resize(f.size() + bytes, 0);
    return f;
  };
  for (int i = 0; i < 3; ++i) REQUIRE(theirs.sendBytes(frame(peer::kProbeFrameBytes)));
  const auto big_head = wire::encodeDataFrameHead(wire::dataHeader(kProbe, peer::kProbeData, 0, 0), kProbe, (1u << 20) + 1);
  REQUIRE(theirs.sendBytes(std::vector<uint8_t>(big_head.begin(), big_head.end())));
  auto f = reported.get_future();
  REQUIRE(f.wait_for(std::chrono::seconds(20)) == std::future_status::ready);
  const wire::ProbeReport r = f.get();
  CHECK(r.rx_bytes == 3 * peer::kProbeFrameBytes);
  CHECK(r.rx_rate == 0);
  CHECK_THAT(r.detail, Catch::Contains("probe data frame of 1048577 bytes"));
  CHECK(theirs.waitClosed(3000));
  std::promise<size_t> peak;
  asio::post(a.io, [&] {
    const size_t held = prober->receiveBufferPeak();
    prober.reset();  // on the io thread, before the main thread may go on
    peak.set_value(held);
  });
  const size_t held = peak.get_future().get();
  CHECK(held > 0);
  CHECK(held <= net::DataChannel::kDiscardChunk);
}
