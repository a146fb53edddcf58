// Shared-state sync between real peers on loopback (design.md §6): a new peer gets the state, only
// outdated tensors move and only to the peers that need them, striped across every holder; revision
// and majority rules; strategies; zstd; mismatched key sets, dtypes and counts; bad arguments; a
// frozen and a killed peer during a sync; the transfer layer against hostile responses.
#include <catch2/catch.hpp>

#include <signal.h>

#include <algorithm>
#include <cstring>
#include <future>
#include <numeric>

#include "net/handshake.hpp"
#include "net/listener.hpp"
#include "peer/state_transfer.hpp"
#include "test_support.hpp"
#include "wire/data.hpp"

using namespace pccl;
using namespace pccl::test;

namespace {

// One peer's state: tensors "w" (float32), "m" (float32), "step" (int64), owned here.
struct Model {
  std::vector<float> w;
  std::vector<float> m;
  int64_t step = 0;
  SharedState state;

  Model(size_t w_count, uint32_t w_seed, uint32_t m_seed, int64_t s, uint64_t revision) {
    w = randomFloats(w_seed, w_count);
    m = randomFloats(m_seed, 1000);
    step = s;
    state.revision = revision;
    state.tensors = {SharedTensor{"w", DataType::kFloat32, w.size(), w.data()},
                     SharedTensor{"m", DataType::kFloat32, m.size(), m.data()},
                     SharedTensor{"step", DataType::kInt64, 1, &step}};
  }
  bool sameAs(const Model& o) const { return w == o.w && m == o.m && step == o.step; }
};

struct Outcome {
  std::vector<Result<SyncInfo>> results;
  const SyncInfo& info(size_t i) const { return *results[i]; }
};

Outcome syncAll(LocalCluster& c, std::vector<Model*> models, std::vector<SyncStrategy> strategies = {}) {
  Outcome out;
  out.results.assign(models.size(), Status::internal("not run"));
  strategies.resize(models.size(), SyncStrategy::kEnforcePopular);
  c.onEach([&](size_t i) { out.results[i] = c.peers[i]->syncSharedState(models[i]->state, strategies[i]); });
  return out;
}

CommConfig stateConfig() {
  CommConfig c = fastCommConfig(0);
  c.op_timeout_ms = 30000;
  return c;
}

}  // namespace

TEST_CASE("shared state: a new peer gets the state, striped across both holders, and up-to-date peers receive 0 bytes",
          "[state]") {
  LocalCluster c = startCluster(3, stateConfig());
  REQUIRE(c.peers.size() == 3);
  // 12 MB of weights: twelve 1 MiB chunks, spread over 2 sources (K = 2: one connection to each).
  const size_t n = 3u << 20;
  Model a(n, 1, 2, 40, 5), b(n, 1, 2, 40, 5), fresh(n, 99, 2, 0, 0);
  Outcome o = syncAll(c, {&a, &b, &fresh});
  for (size_t i = 0; i < 3; ++i) {
    INFO("peer " << i);
    REQUIRE(o.results[i].isOk());
    CHECK(o.info(i).revision == 5);
  }
  CHECK(fresh.sameAs(a));
  CHECK(fresh.state.revision == 5);
  // Only "w" and "step" differed: "m" (same seed) did not move.
  CHECK(o.info(2).keys_received == 2);
  CHECK(o.info(2).rx_bytes == n * sizeof(float) + sizeof(int64_t));
  CHECK(o.info(0).rx_bytes == 0);
  CHECK(o.info(1).rx_bytes == 0);
  CHECK(o.info(0).tx_bytes > 0);  // striped: both holders served part of it
  CHECK(o.info(1).tx_bytes > 0);
  CHECK(o.info(0).tx_bytes + o.info(1).tx_bytes == o.info(2).rx_bytes);

  // Everybody is up to date now: nothing moves at all.
  Outcome again = syncAll(c, {&a, &b, &fresh});
  for (size_t i = 0; i < 3; ++i) {
    REQUIRE(again.results[i].isOk());
    CHECK(again.info(i).rx_bytes == 0);
    CHECK(again.info(i).tx_bytes == 0);
    CHECK(again.info(i).keys_received == 0);
  }
  // The ring still works for collectives afterwards.
  c.onEach([&](size_t i) {
    float x = 1.0f;
    CHECK(c.peers[i]->allReduce(&x, &x, 1, DataType::kFloat32, RedOp::kSum).isOk());
    CHECK(x == 3.0f);
  });
}

TEST_CASE("shared state: a late joiner admitted by updateTopology receives the model", "[state]") {
  LocalCluster c = startCluster(2, stateConfig());
  REQUIRE(c.peers.size() == 2);
  CommConfig cfg = stateConfig();
  cfg.master_address = "127.0.0.1:" + std::to_string(c.master->port());
  auto late = makeComm(cfg);
  REQUIRE(late);
  auto joined = std::async(std::launch::async, [&] { return late->connect(); });
  REQUIRE(c.master->waitFor([](const MasterStats& s) { return s.pending == 1; }, 10000));
  c.peers.push_back(std::move(late));
  std::vector<Status> st(3);
  std::thread t0([&] { st[0] = c.peers[0]->updateTopology(); });
  std::thread t1([&] { st[1] = c.peers[1]->updateTopology(); });
  t0.join();
  t1.join();
  REQUIRE(st[0].isOk());
  REQUIRE(st[1].isOk());
  REQUIRE(joined.get().isOk());
  Model a(100000, 7, 8, 12, 3), b(100000, 7, 8, 12, 3), fresh(100000, 0, 0, 0, 0);
  Outcome o = syncAll(c, {&a, &b, &fresh});
  for (const auto& r : o.results) REQUIRE(r.isOk());
  CHECK(fresh.sameAs(a));
  CHECK(o.info(2).keys_received == 3);
}

TEST_CASE("shared state: the highest revision wins, then the majority, and zstd shrinks what moves", "[state]") {
  LocalCluster c = startCluster(3, stateConfig());
  REQUIRE(c.peers.size() == 3);
  SECTION("a single peer at a higher revision beats a majority at a lower one") {
    Model newest(50000, 3, 3, 9, 8), old1(50000, 4, 4, 7, 7), old2(50000, 4, 4, 7, 7);
    Outcome o = syncAll(c, {&old1, &newest, &old2});
    for (const auto& r : o.results) REQUIRE(r.isOk());
    CHECK(old1.sameAs(newest));
    CHECK(old2.sameAs(newest));
    CHECK(old1.state.revision == 8);
    CHECK(o.info(1).rx_bytes == 0);
  }
  SECTION("at equal revisions the majority's content wins, per tensor") {
    Model x(50000, 5, 6, 1, 4), y(50000, 5, 6, 1, 4), z(50000, 5, 7, 2, 4);
    Outcome o = syncAll(c, {&x, &y, &z});
    for (const auto& r : o.results) REQUIRE(r.isOk());
    CHECK(z.sameAs(x));
    CHECK(o.info(2).keys_received == 2);  // "m" and "step"; "w" already agreed
    CHECK(o.info(2).rx_bytes == 1000 * sizeof(float) + sizeof(int64_t));
  }
  SECTION("compressible content travels compressed when the receiver asks for zstd") {
    Model a(1 << 20, 1, 1, 5, 2), b(1 << 20, 1, 1, 5, 2), fresh(1 << 20, 9, 9, 0, 0);
    for (size_t i = 0; i < a.w.size(); ++i) a.w[i] = b.w[i] = static_cast<float>(i % 64);  // compressible
    fresh.state.compress = 3;
    Outcome o = syncAll(c, {&a, &b, &fresh});
    for (const auto& r : o.results) REQUIRE(r.isOk());
    CHECK(fresh.sameAs(a));
    CHECK(o.info(2).rx_bytes < a.w.size() * sizeof(float) / 4);
    CHECK(o.info(0).tx_bytes + o.info(1).tx_bytes == o.info(2).rx_bytes);
  }
}

TEST_CASE("shared state: strategies", "[state]") {
  LocalCluster c = startCluster(3, stateConfig());
  REQUIRE(c.peers.size() == 3);
  SECTION("send-only keeps its own content and never receives; receive-only is never a candidate") {
    // The receive-only peer has the highest revision, but it does not count.
    Model sender(20000, 1, 1, 1, 5), popular(20000, 2, 2, 2, 5), reader(20000, 3, 3, 3, 9);
    const Model sender_before = sender;
    Outcome o = syncAll(c, {&sender, &popular, &reader},
                        {SyncStrategy::kSendOnly, SyncStrategy::kEnforcePopular, SyncStrategy::kReceiveOnly});
    for (const auto& r : o.results) REQUIRE(r.isOk());
    CHECK(sender.w == sender_before.w);
    CHECK(sender.step == 1);
    CHECK(o.info(0).rx_bytes == 0);
    CHECK(o.info(0).revision == 5);
    // Two candidates at revision 5 disagree on every tensor: each ties, and the smaller digest wins.
    CHECK((reader.sameAs(sender) || reader.sameAs(popular) || reader.step == 1 || reader.step == 2));
    CHECK(reader.state.revision == 5);
    CHECK(o.info(2).keys_received == 3);
  }
  SECTION("nobody offering content is an error for everyone") {
    Model x(100, 1, 1, 1, 1), y(100, 2, 2, 2, 1), z(100, 3, 3, 3, 1);
    Outcome o = syncAll(c, {&x, &y, &z}, {SyncStrategy::kReceiveOnly, SyncStrategy::kReceiveOnly,
                                          SyncStrategy::kReceiveOnly});
    for (const auto& r : o.results) {
      REQUIRE_FALSE(r.isOk());
      CHECK(r.status().code() == Code::kInvalidUsage);
    }
    CHECK(x.step == 1);
  }
}

TEST_CASE("shared state: mismatched key sets, dtypes or counts fail the offending peer only (InvalidArgument)",
          "[state]") {
  LocalCluster c = startCluster(3, stateConfig());
  REQUIRE(c.peers.size() == 3);
  Model a(1000, 1, 1, 1, 3), b(1000, 1, 1, 1, 3), odd(1000, 2, 2, 2, 0);
  std::vector<double> extra(4, 1.0);
  SECTION("an extra tensor") {
    odd.state.tensors.push_back(SharedTensor{"extra", DataType::kFloat64, extra.size(), extra.data()});
  }
  SECTION("another dtype") { odd.state.tensors[2].dtype = DataType::kUint64; }
  SECTION("another count") { odd.state.tensors[0].count = 999; }
  SECTION("another name") { odd.state.tensors[1].name = "momentum"; }
  const Model odd_before = odd;
  Outcome o = syncAll(c, {&a, &b, &odd});
  REQUIRE(o.results[0].isOk());
  REQUIRE(o.results[1].isOk());
  REQUIRE_FALSE(o.results[2].isOk());
  CHECK(o.results[2].status().code() == Code::kInvalidArgument);  // fix the call: retrying cannot help
  CHECK_THAT(o.results[2].status().message(), Catch::Contains("differs"));
  CHECK(odd.w == odd_before.w);
  CHECK(odd.state.revision == 0);
  CHECK(c.peers[2]->lastError().find("InvalidArgument") != std::string::npos);
}

TEST_CASE("shared state: bad arguments are refused before anything is sent", "[state]") {
  LocalCluster c = startCluster(1, stateConfig());
  REQUIRE(c.peers.size() == 1);
  Model a(10, 1, 1, 1, 1);
  auto refused = [&](SharedState s, SyncStrategy st = SyncStrategy::kEnforcePopular) {
    auto r = c.peers[0]->syncSharedState(s, st);
    return !r.isOk() && r.status().code() == Code::kInvalidArgument;
  };
  SharedState s = a.state;
  s.tensors[1].name = "w";
  CHECK(refused(s));  // duplicate name
  s = a.state;
  s.tensors[0].name = "";
  CHECK(refused(s));
  s.tensors[0].name = std::string(257, 'x');
  CHECK(refused(s));
  s = a.state;
  s.tensors[0].data = nullptr;
  CHECK(refused(s));
  s = a.state;
  s.tensors[0].dtype = static_cast<DataType>(42);
  CHECK(refused(s));
  s = a.state;
  s.compress = 20;
  CHECK(refused(s));
  CHECK(refused(a.state, static_cast<SyncStrategy>(7)));
  s = a.state;  // too many tensors for the sync's control messages
  std::vector<std::string> names(4000);
  for (size_t i = 0; i < names.size(); ++i) {
    names[i] = "t" + std::to_string(i);
    s.tensors.push_back(SharedTensor{names[i], DataType::kFloat32, 1, a.w.data()});
  }
  CHECK(refused(s));
  CHECK_THAT(c.peers[0]->lastError(), Catch::Contains("fewer tensors"));
  // Alone in its group, a peer syncs with itself: nothing moves, its revision stands.
  auto r = c.peers[0]->syncSharedState(a.state);
  REQUIRE(r.isOk());
  CHECK(r->rx_bytes == 0);
  CHECK(r->revision == 1);
  // Not before connect().
  CommConfig cfg = stateConfig();
  cfg.master_address = "127.0.0.1:" + std::to_string(c.master->port());
  auto idle = makeComm(cfg);
  REQUIRE(idle);
  auto n = idle->syncSharedState(a.state);
  REQUIRE_FALSE(n.isOk());
  CHECK(n.status().code() == Code::kInvalidUsage);
}

// A frozen (SIGSTOP) or killed (SIGKILL) member during a sync: the others get an error within the
// master's peer timeout, re-form the ring without it and sync again.
TEST_CASE("shared state: a frozen or killed peer fails the sync for the others, who then recover", "[state][fault]") {
  const int sig = GENERATE(SIGSTOP, SIGKILL);
  INFO("signal " << sig);
  LocalCluster c = startCluster(2, stateConfig());
  REQUIRE(c.peers.size() == 2);
  ChildProcess child(memberArgs(c.master->port(), "syncer"));
  REQUIRE(c.master->waitFor([](const MasterStats& s) { return s.pending == 1; }, 10000));
  std::vector<Status> st(2);
  c.onEach([&](size_t i) { st[i] = c.peers[i]->updateTopology(); });
  REQUIRE(st[0].isOk());
  REQUIRE(st[1].isOk());
  REQUIRE(child.waitForLine("connected", 10000));
  child.signal(sig);  // before or while it would sync: the group cannot finish without it
  Model a(200000, 1, 1, 1, 4), fresh(200000, 2, 2, 0, 0);
  Outcome o = syncAll(c, {&a, &fresh});
  for (const auto& r : o.results) {
    REQUIRE_FALSE(r.isOk());
    CHECK((r.status().code() == Code::kPeerLost || r.status().code() == Code::kMismatch));
  }
  CHECK(fresh.state.revision == 0);
  REQUIRE(c.updateAll());  // the failure came from the master removing the peer: it is gone by now
  Outcome again = syncAll(c, {&a, &fresh});
  for (const auto& r : again.results) REQUIRE(r.isOk());
  CHECK(fresh.sameAs(a));
}

// ---- the transfer layer on its own, against a hostile source -------------------------------------

namespace {

// A source that authenticates like a peer, then answers every request with what `respond` writes.
struct HostileSource {
  asio::io_context io;
  std::shared_ptr<net::AuthKey> key = std::make_shared<net::AuthKey>("");
  std::shared_ptr<net::Listener> listener;
  std::function<void(net::Tcp::socket&, const wire::DataHeader&)> respond;
  std::vector<std::shared_ptr<net::Tcp::socket>> sockets;

  explicit HostileSource(std::function<void(net::Tcp::socket&, const wire::DataHeader&)> r) : respond(std::move(r)) {
    net::ListenerConfig lc;
    lc.address = net::HostPort{"127.0.0.1", 0};
    lc.key = key;
    lc.handshake_timeout = Millis(2000);
    lc.name = "hostile";
    listener = std::make_shared<net::Listener>(io, lc);
  }
  void start() {
    REQUIRE(listener->open().isOk());
    listener->start([this](net::Authenticated a) {
      auto s = std::make_shared<net::Tcp::socket>(std::move(a.link.socket));
      sockets.push_back(s);
      readRequest(s);
    });
  }
  void readRequest(const std::shared_ptr<net::Tcp::socket>& s) {
    auto head = std::make_shared<std::array<uint8_t, wire::kHeaderSize + wire::kDataHeaderSize>>();
    asio::async_read(*s, asio::buffer(*head), [this, s, head](const asio::error_code& ec, size_t) {
      if (ec) return;
      auto h = wire::decodeHeader(head->data(), wire::kHeaderSize, 1 << 20);
      auto d = wire::decodeDataHeader(head->data() + wire::kHeaderSize, wire::kDataHeaderSize);
      auto body = std::make_shared<std::vector<uint8_t>>(h->length - wire::kDataHeaderSize);
      asio::async_read(*s, asio::buffer(*body), [this, s, d, body](const asio::error_code& ec2, size_t) {
        if (ec2) return;
        respond(*s, *d);
        readRequest(s);
      });
    });
  }
};

void writeResponse(net::Tcp::socket& s, wire::DataHeader h, const std::vector<uint8_t>& payload) {
  auto head = wire::encodeDataFrameHead(h, 1, static_cast<uint32_t>(payload.size()));
  asio::error_code ec;
  asio::write(s, asio::buffer(head), ec);
  asio::write(s, asio::buffer(payload), ec);
}

Status fetchFrom(HostileSource& src, std::vector<uint8_t>& into) {
  src.start();
  peer::FetchPlan plan;
  plan.sync_id = 7;
  plan.epoch = 1;
  plan.sources.push_back(peer::FetchSource{net::HostPort{"127.0.0.1", src.listener->port()}, "hostile", 1});
  plan.keys.push_back(peer::FetchKey{"w", into.data(), into.size(), {0}});
  plan.chunk_bytes = 1024;
  plan.redial_window = Millis(300);  // a source that hangs up is dialled again, briefly
  auto fetcher = std::make_shared<peer::StateFetcher>(src.io, src.key);
  std::promise<Status> done;
  fetcher->start(plan, [&](const Status& s, uint64_t) { done.set_value(s); });
  auto f = done.get_future();
  while (f.wait_for(std::chrono::seconds(0)) != std::future_status::ready) src.io.run_one_for(std::chrono::seconds(5));
  return f.get();
}

}  // namespace

TEST_CASE("shared state transfer: wrong, oversized, misplaced or corrupt responses fail the fetch cleanly",
          "[state][hostile]") {
  std::vector<uint8_t> into(4096, 0);
  using Respond = std::function<void(net::Tcp::socket&, const wire::DataHeader&)>;
  struct Case {
    const char* name;
    Respond respond;
    const char* expect;
  };
  std::vector<Case> cases = {
      {"a short response", [](net::Tcp::socket& s, const wire::DataHeader& h) {
         writeResponse(s, wire::dataHeader(h.op_id, h.phase, 0, h.offset), std::vector<uint8_t>(10));
       }, "bytes in answer"},
      {"another offset", [](net::Tcp::socket& s, const wire::DataHeader& h) {
         writeResponse(s, wire::dataHeader(h.op_id, h.phase, 0, h.offset + 1), std::vector<uint8_t>(1024));
       }, "does not answer"},
      {"another sync", [](net::Tcp::socket& s, const wire::DataHeader& h) {
         writeResponse(s, wire::dataHeader(h.op_id + 1, h.phase, 0, h.offset), std::vector<uint8_t>(1024));
       }, "does not answer"},
      {"a corrupt zstd frame", [](net::Tcp::socket& s, const wire::DataHeader& h) {
         writeResponse(s, wire::dataHeader(h.op_id, h.phase, wire::kDataCompressed, h.offset), std::vector<uint8_t>(50, 0xAB));
       }, ""},
      {"a request sent back", [](net::Tcp::socket& s, const wire::DataHeader& h) {
         writeResponse(s, wire::dataHeader(h.op_id, h.phase, wire::kDataRequest, h.offset), std::vector<uint8_t>(1024));
       }, "does not answer"},
      {"a hang-up", [](net::Tcp::socket& s, const wire::DataHeader&) { s.close(); }, "PeerLost: state source hostile"},
  };
  for (auto& k : cases) {
    INFO(k.name);
    HostileSource src(k.respond);
    Status s = fetchFrom(src, into);
    REQUIRE_FALSE(s.isOk());
    CHECK_THAT(s.toString(), Catch::Contains(k.expect));
  }
}

TEST_CASE("shared state transfer: a connection that breaks mid-fetch is dialled again and nothing is lost",
          "[state][fault]") {
  const uint32_t conns = GENERATE(1u, 2u);
  INFO(conns << " connection(s)");
  // The source answers with bytes that say where they belong, and hangs up once: on the third request.
  int answered = 0;
  auto byteAt = [](size_t i) { return static_cast<uint8_t>((i * 7 + 3) & 0xff); };
  HostileSource src([&](net::Tcp::socket& s, const wire::DataHeader& h) {
    if (++answered == 3) return s.close();
    std::vector<uint8_t> bytes(1024);
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = byteAt(h.offset + i);
    writeResponse(s, wire::dataHeader(h.op_id, h.phase, 0, h.offset), bytes);
  });
  src.start();
  std::vector<uint8_t> into(16 * 1024, 0);
  peer::FetchPlan plan;
  plan.sync_id = 7;
  plan.epoch = 1;
  plan.sources.push_back(peer::FetchSource{net::HostPort{"127.0.0.1", src.listener->port()}, "flaky", conns});
  plan.keys.push_back(peer::FetchKey{"w", into.data(), into.size(), {0}});
  plan.chunk_bytes = 1024;
  auto fetcher = std::make_shared<peer::StateFetcher>(src.io, src.key);
  std::promise<Status> done;
  std::vector<size_t> arrived;
  fetcher->start(plan, [&](const Status& st, uint64_t) { done.set_value(st); },
                 [&](size_t, size_t offset, size_t) { arrived.push_back(offset); });
  auto f = done.get_future();
  while (f.wait_for(std::chrono::seconds(0)) != std::future_status::ready) src.io.run_one_for(std::chrono::seconds(5));
  const Status st = f.get();
  REQUIRE(st.isOk());
  // One connection: dialled again; two: the other may have taken all that was left meanwhile.
  CHECK(src.sockets.size() >= 2u);
  std::sort(arrived.begin(), arrived.end());
  CHECK(arrived.size() == 16);  // every chunk arrived once
  CHECK(std::adjacent_find(arrived.begin(), arrived.end()) == arrived.end());
  size_t wrong = 0;
  for (size_t i = 0; i < into.size(); ++i) wrong += into[i] != byteAt(i) ? 1 : 0;
  CHECK(wrong == 0);
}

TEST_CASE("shared state transfer: request payloads round-trip and hostile ones are refused", "[state][wire]") {
  auto bytes = peer::encodeStateRequest(4096, 3, "layer.0.weight");
  auto r = peer::decodeStateRequest(bytes.data(), bytes.size());
  REQUIRE(r.isOk());
  CHECK(r->length == 4096);
  CHECK(r->level == 3);
  CHECK(r->name == "layer.0.weight");
  bytes.push_back(0);
  CHECK_FALSE(peer::decodeStateRequest(bytes.data(), bytes.size()).isOk());  // trailing byte
  CHECK_FALSE(peer::decodeStateRequest(bytes.data(), 5).isOk());            // truncated
  auto long_name = peer::encodeStateRequest(1, 0, std::string(300, 'n'));
  CHECK_FALSE(peer::decodeStateRequest(long_name.data(), long_name.size()).isOk());
}
