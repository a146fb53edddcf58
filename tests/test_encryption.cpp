// Encrypted runs (design.md §3, docs/security.md): whole runs with encrypt on (all-reduce, quantized
// and compressed all-reduce, shared-state sync), cipher negotiation between processes that prefer
// different ciphers, settings that must match, and a man in the middle on real connections: what
// crosses the wire is ciphertext, and a flipped bit or a replayed frame closes the connection.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <future>
#include <string>

#include "net/aead.hpp"
#include "net/connection.hpp"
#include "net/data_channel.hpp"
#include "net/handshake.hpp"
#include "net/listener.hpp"
#include "tcp_proxy.hpp"
#include "test_support.hpp"

using namespace pccl;
using namespace pccl::test;

namespace {

constexpr char kSecret[] = "encryption-test-secret";

struct CleanEnv {
  CleanEnv() { clear(); }
  ~CleanEnv() { clear(); }
  static void clear() {
    for (const char* v : {"PCCL_SECRET", "PCCL_SECRET_FILE", "PCCL_ENCRYPT", "PCCL_CIPHER"}) unsetenv(v);
  }
};

MasterConfig encryptedMaster() {
  MasterConfig m = fastMasterConfig(kSecret);
  m.encrypt = true;
  return m;
}

CommConfig encryptedComm(uint16_t master_port) {
  CommConfig c = fastCommConfig(master_port, kSecret);
  c.encrypt = true;
  c.op_timeout_ms = 30000;
  return c;
}

bool contains(const std::vector<uint8_t>& hay, const std::string& needle) {
  return std::search(hay.begin(), hay.end(), needle.begin(), needle.end()) != hay.end();
}

// Client-to-server bytes of a handshake: Hello then AuthProof. Sealed frames start right after.
size_t handshakeBytes() {
  return wire::encodeFrame(wire::Hello{}, 0).size() + wire::encodeFrame(wire::AuthProof{}, 0).size();
}

// An io thread, a listener and a dialled connection between them (through `via`, a proxy port, if set).
// The server side gets whatever `serve` makes of the authenticated link.
struct NetPair {
  asio::io_context io;
  std::shared_ptr<net::AuthKey> key;
  std::shared_ptr<net::Listener> listener;
  std::thread thread;
  asio::executor_work_guard<asio::io_context::executor_type> work = asio::make_work_guard(io);

  NetPair(bool encrypt, std::function<void(net::Authenticated)> serve)
      : key(std::make_shared<net::AuthKey>(kSecret, encrypt)) {
    net::ListenerConfig lc;
    lc.address = net::HostPort{"127.0.0.1", 0};
    lc.key = key;
    lc.handshake_timeout = Millis(2000);
    lc.name = "test-server";
    listener = std::make_shared<net::Listener>(io, lc);
    REQUIRE(listener->open().isOk());
    listener->start(std::move(serve));
    thread = std::thread([this] { io.run(); });
  }
  ~NetPair() {
    asio::post(io, [this] { listener->close(); });
    work.reset();
    io.stop();
    thread.join();
  }
  // Runs `fn` on the io thread and returns when it has.
  void onIoThread(const std::function<void()>& fn) {
    std::promise<void> done;
    asio::post(io, [&] {
      fn();
      done.set_value();
    });
    done.get_future().wait();
  }
  // Dials `port` on the io thread; the link, or the failure, within 5 s.
  Result<net::Link> dial(uint16_t port, wire::Role role = wire::Role::kPeerToPeer) {
    auto done = std::make_shared<std::promise<Result<net::Link>>>();
    asio::post(io, [this, port, role, done] {
      net::ClientHandshake hs{role, key, Millis(2000), "test-server"};
      net::asyncDial(io, net::HostPort{"127.0.0.1", port}, hs, [done](Result<net::Link> r) { done->set_value(std::move(r)); });
    });
    auto f = done->get_future();
    if (f.wait_for(std::chrono::seconds(5)) != std::future_status::ready) return Status::timeout("dial");
    return f.get();
  }
};

// Control frames: what the server's Connection received, and why it closed.
struct ControlServer {
  std::mutex mu;
  std::vector<std::string> messages;
  std::promise<Status> closed;
  std::shared_ptr<net::Connection> conn;
  std::atomic<bool> closed_set{false};

  void serve(net::Authenticated a) {
    conn = std::make_shared<net::Connection>(std::move(a.link), wire::kMaxControlPayload);
    conn->start(
        [this](const wire::FrameHeader&, const uint8_t* p, size_t n) {
          auto e = wire::decodePayload<wire::Error>(p, n);
          if (!e.isOk()) return e.status();
          std::lock_guard<std::mutex> lk(mu);
          messages.push_back(e->message);
          return Status::ok();
        },
        [this](const Status& why) {
          if (!closed_set.exchange(true)) closed.set_value(why);
        });
  }
  size_t received() {
    std::lock_guard<std::mutex> lk(mu);
    return messages.size();
  }
};

std::vector<uint8_t> marked(const std::string& text) {
  wire::Error e;
  e.code = 1;
  e.message = text;
  return wire::encodeFrame(e, 0);
}

}  // namespace

TEST_CASE("encryption: an encrypted run all-reduces exactly, quantizes bit-identically and syncs state",
          "[encryption]") {
  CleanEnv env;
  auto master = startMaster(encryptedMaster());
  REQUIRE(master);
  LocalCluster c;
  c.master = std::move(master);
  for (int i = 0; i < 3; ++i) c.peers.push_back(makeComm(encryptedComm(c.master->port())));
  for (auto& p : c.peers) REQUIRE(p);
  REQUIRE(c.peers[0]->connect().isOk());
  auto j1 = std::async(std::launch::async, [&] { return c.peers[1]->connect(); });
  auto j2 = std::async(std::launch::async, [&] { return c.peers[2]->connect(); });
  REQUIRE(c.master->waitFor([](const MasterStats& s) { return s.pending == 2; }, 10000));
  REQUIRE(c.peers[0]->updateTopology().isOk());
  REQUIRE(j1.get().isOk());
  REQUIRE(j2.get().isOk());
  CHECK(std::string(c.peers[0]->cipher()) == (net::aesGcmAvailable() ? "AES-256-GCM" : "ChaCha20-Poly1305"));

  // Exact float32 sums (small integers), 3 MiB: several segments striped over K = 2 connections.
  const size_t n = 3u << 18;
  std::vector<std::vector<float>> out(3, std::vector<float>(n));
  c.onEach([&](size_t r) {
    std::vector<float> in(n);
    for (size_t k = 0; k < n; ++k) in[k] = static_cast<float>((r + 1) * (k % 13));
    auto info = c.peers[r]->allReduce(in.data(), out[r].data(), n, DataType::kFloat32, RedOp::kSum);
    CHECK(info.isOk());
  });
  for (size_t k = 0; k < n; k += 997) REQUIRE(out[0][k] == static_cast<float>(6 * (k % 13)));
  CHECK(out[0] == out[1]);
  CHECK(out[0] == out[2]);

  // int8 + zstd on the encrypted wire: bit-identical on every peer.
  c.onEach([&](size_t r) {
    std::vector<float> in = randomFloats(r + 10, n);
    ReduceOptions o;
    o.quant = Quant::kInt8;
    o.compress = 1;
    CHECK(c.peers[r]->allReduce(in.data(), out[r].data(), n, DataType::kFloat32, RedOp::kSum, o).isOk());
  });
  CHECK(out[0] == out[1]);
  CHECK(out[0] == out[2]);

  // Shared state over encrypted state-fetch connections: peer 2 is stale and fetches from 0 and 1.
  std::vector<std::vector<float>> w = {randomFloats(7, n), randomFloats(7, n), std::vector<float>(n, 0.0f)};
  std::vector<Result<SyncInfo>> synced(3, Status::internal("not run"));
  c.onEach([&](size_t r) {
    SharedState s;
    s.revision = r == 2 ? 0 : 4;
    s.tensors = {SharedTensor{"w", DataType::kFloat32, n, w[r].data()}};
    synced[r] = c.peers[r]->syncSharedState(s);
  });
  for (auto& s : synced) REQUIRE(s.isOk());
  CHECK(synced[2]->rx_bytes == n * sizeof(float));
  CHECK(w[2] == w[0]);
}

TEST_CASE("encryption: a master offering only ChaCha20-Poly1305 meets peers offering AES-256-GCM", "[encryption]") {
  CleanEnv env;
  const std::string secret_file = "/tmp/pccl-test-secret-" + std::to_string(getpid());
  { std::ofstream(secret_file) << kSecret << "\n"; }
  ChildProcess master({PCCL_MASTER_BIN, "--listen", "127.0.0.1:0", "--secret-file", secret_file, "--encrypt",
                       "--heartbeat-ms", "100", "--peer-timeout-ms", "1000"},
                      {"PCCL_CIPHER=chacha20poly1305", "PCCL_LOG_LEVEL=info"}, /*merge_stderr=*/true);
  auto line = master.waitForLine("listening on", 10000);
  std::remove(secret_file.c_str());
  REQUIRE(line);
  const uint16_t port = static_cast<uint16_t>(std::stoi(line->substr(line->rfind(':') + 1)));
  auto a = makeComm(encryptedComm(port));
  auto b = makeComm(encryptedComm(port));
  REQUIRE(a->connect().isOk());
  REQUIRE(master.waitForLine("pending admission", 5000));  // a's join
  auto jb = std::async(std::launch::async, [&] { return b->connect(); });
  REQUIRE(master.waitForLine("pending admission", 5000));  // b's join
  REQUIRE(a->updateTopology().isOk());
  REQUIRE(jb.get().isOk());
  float x = 1.0f, y = 2.0f;
  auto rb = std::async(std::launch::async, [&] { return b->allReduce(&y, &y, 1, DataType::kFloat32, RedOp::kSum); });
  CHECK(a->allReduce(&x, &x, 1, DataType::kFloat32, RedOp::kSum).isOk());
  CHECK(rb.get().isOk());
  CHECK(x == 3.0f);
  CHECK(y == 3.0f);
}

TEST_CASE("encryption: every process of a run must agree on it", "[encryption]") {
  CleanEnv env;
  SECTION("master encrypts, peer does not: AuthFailed naming the mismatch; the run carries on") {
    auto master = startMaster(encryptedMaster());
    REQUIRE(master);
    auto good = makeComm(encryptedComm(master->port()));
    REQUIRE(good->connect().isOk());
    auto plain = makeComm(fastCommConfig(master->port(), kSecret));
    Status s = plain->connect();
    CHECK(s.code() == Code::kAuthFailed);
    CHECK_THAT(s.message(), Catch::Contains("encryption setting mismatch"));
    CHECK(master->stats().accepted == 1);
    REQUIRE(good->updateTopology().isOk());
    float x = 2.0f;
    CHECK(good->allReduce(&x, &x, 1, DataType::kFloat32, RedOp::kSum).isOk());
  }
  SECTION("peer encrypts, master does not") {
    auto master = startMaster(fastMasterConfig(kSecret));
    auto peer = makeComm(encryptedComm(master->port()));
    Status s = peer->connect();
    CHECK(s.code() == Code::kAuthFailed);
    CHECK_THAT(s.message(), Catch::Contains("encryption setting mismatch"));
  }
  SECTION("encryption without a secret is refused at create") {
    CommConfig c = fastCommConfig(1, "");
    c.encrypt = true;
    auto comm = Communicator::create(c);
    REQUIRE_FALSE(comm.isOk());
    CHECK(comm.status().code() == Code::kInvalidArgument);
    CHECK_THAT(comm.status().message(), Catch::Contains("needs a shared secret"));
    MasterConfig m = fastMasterConfig("");
    m.encrypt = true;
    auto master = Master::create(m);
    REQUIRE_FALSE(master.isOk());
    CHECK(master.status().code() == Code::kInvalidArgument);
  }
  SECTION("PCCL_ENCRYPT turns it on; a bad value is an error") {
    auto master = startMaster(encryptedMaster());
    setenv("PCCL_ENCRYPT", "1", 1);
    auto peer = makeComm(fastCommConfig(master->port(), kSecret));
    REQUIRE(peer);
    CHECK(std::string(peer->cipher()) != "none");
    CHECK(peer->connect().isOk());
    setenv("PCCL_ENCRYPT", "maybe", 1);
    auto bad = Communicator::create(fastCommConfig(master->port(), kSecret));
    REQUIRE_FALSE(bad.isOk());
    CHECK_THAT(bad.status().message(), Catch::Contains("PCCL_ENCRYPT"));
  }
}

TEST_CASE("encryption: control frames cross the wire as ciphertext, and tampering and replay close the connection",
          "[encryption]") {
  const std::string marker = "plaintext-marker-0123456789-abcdefghij";
  const int64_t hs = static_cast<int64_t>(handshakeBytes());
  const int64_t frame = static_cast<int64_t>(marked(marker).size() + net::kAeadTagBytes);
  struct Case {
    const char* name;
    bool encrypt;
    TcpProxy::Tamper tamper;
    bool delivered;  // the first frame reaches the server
  };
  const Case cases[] = {
      {"encrypted, untouched", true, {}, true},
      {"plain, untouched (the marker is visible)", false, {}, true},
      {"encrypted, a payload byte flipped", true, {hs + 30, -1, -1}, false},
      {"encrypted, the epoch in the clear header flipped", true, {hs + 10, -1, -1}, false},
      {"encrypted, the first frame replayed", true, {-1, hs, hs + frame}, true},
  };
  for (const Case& k : cases) {
    SECTION(k.name) {
      ControlServer server;
      NetPair pair(k.encrypt, [&](net::Authenticated a) { server.serve(std::move(a)); });
      TcpProxy proxy(pair.listener->port(), k.tamper);
      auto link = pair.dial(proxy.port());
      REQUIRE(link.isOk());
      CHECK(link->crypto.on() == k.encrypt);
      auto client = std::make_shared<net::Connection>(std::move(link).value(), wire::kMaxControlPayload);
      pair.onIoThread([&] {
        client->start([](const wire::FrameHeader&, const uint8_t*, size_t) { return Status::ok(); },
                      [](const Status&) {});
        client->sendFrame(marked(marker));
        client->sendFrame(marked("second"));
      });
      const bool tampered = k.tamper.flip_at >= 0 || k.tamper.replay_to >= 0;
      auto closed = server.closed.get_future();
      if (tampered) {
        REQUIRE(closed.wait_for(std::chrono::seconds(5)) == std::future_status::ready);
        Status why = closed.get();
        CHECK(why.code() == Code::kProtocolError);
        CHECK_THAT(why.message(), Catch::Contains("failed authentication"));
        CHECK(server.received() == (k.delivered ? 1u : 0u));
      } else {
        // Both frames arrive (the close future stays unset until then).
        for (int i = 0; i < 50 && server.received() < 2; ++i) {
          closed.wait_for(std::chrono::milliseconds(100));
        }
        REQUIRE(server.received() == 2);
        std::lock_guard<std::mutex> lk(server.mu);
        CHECK(server.messages[0] == marker);
        CHECK(contains(proxy.clientBytes(), marker) == !k.encrypt);
      }
      // Closed and dropped on the io thread, before the io_context goes away.
      pair.onIoThread([&] {
        client->close(Status::ok());
        client.reset();
        if (server.conn) server.conn->close(Status::ok());
        server.conn.reset();
      });
    }
  }
}

namespace {

// A data sink placing every payload straight into `dst` (as the ring does with its output buffer).
struct DirectSink : net::DataSink {
  std::vector<uint8_t> dst;
  std::atomic<int> delivered{0};
  std::promise<Status> closed;
  std::atomic<bool> closed_set{false};
  std::shared_ptr<net::DataChannel> ch;

  explicit DirectSink(size_t n) : dst(n) {}
  Result<net::Placement> place(net::DataChannel&, const wire::DataHeader& h, uint32_t bytes) override {
    if (h.offset + bytes > dst.size()) return Status::protocol("out of range");
    return net::Placement::direct(dst.data() + h.offset);
  }
  Status deliver(net::DataChannel&, const wire::DataHeader&, const uint8_t*, uint32_t) override {
    ++delivered;
    return Status::ok();
  }
  void channelClosed(net::DataChannel&, const Status& why) override {
    if (!closed_set.exchange(true)) closed.set_value(why);
  }
};

}  // namespace

TEST_CASE("encryption: data frames are opened in their destination, and a flipped bit there or in the sealed "
          "DataHeader closes the channel", "[encryption]") {
  const size_t n = 300000;
  std::vector<uint8_t> payload(n);
  for (size_t i = 0; i < n; ++i) payload[i] = static_cast<uint8_t>(i * 7 + 3);
  const int64_t hs = static_cast<int64_t>(handshakeBytes());
  const int64_t data_header = hs + static_cast<int64_t>(wire::kHeaderSize);
  const int64_t first_payload = data_header + static_cast<int64_t>(wire::kDataHeaderSize + net::kAeadTagBytes);
  struct Case {
    const char* name;
    int64_t flip_at;
  };
  const Case cases[] = {{"untouched", -1}, {"a payload byte flipped", first_payload + 123456},
                        {"a DataHeader byte flipped", data_header + 9}, {"a tag byte flipped", first_payload + static_cast<int64_t>(n)}};
  for (const Case& k : cases) {
    SECTION(k.name) {
      DirectSink sink(2 * n);
      NetPair pair(true, [&](net::Authenticated a) {
        sink.ch = std::make_shared<net::DataChannel>(std::move(a.link), 5, "receiver");
        sink.ch->start(&sink);
      });
      TcpProxy proxy(pair.listener->port(), TcpProxy::Tamper{k.flip_at, -1, -1});
      auto link = pair.dial(proxy.port());
      REQUIRE(link.isOk());
      auto sender = std::make_shared<net::DataChannel>(std::move(link).value(), 5, "sender");
      std::promise<Status> second_sent;
      asio::post(pair.io, [&] {
        wire::DataHeader h;
        h.op_id = 1;
        sender->send(h, payload.data(), static_cast<uint32_t>(n), [](const Status&) {});
        h.offset = n;
        sender->send(h, payload.data(), static_cast<uint32_t>(n), [&](const Status& s) { second_sent.set_value(s); });
      });
      REQUIRE(second_sent.get_future().wait_for(std::chrono::seconds(5)) == std::future_status::ready);
      // The sender's buffer is never modified by sealing.
      CHECK(payload[5] == static_cast<uint8_t>(5 * 7 + 3));
      auto closed = sink.closed.get_future();
      if (k.flip_at < 0) {
        for (int i = 0; i < 50 && sink.delivered < 2; ++i) closed.wait_for(std::chrono::milliseconds(100));
        REQUIRE(sink.delivered == 2);
        CHECK(std::equal(payload.begin(), payload.end(), sink.dst.begin()));
        CHECK(std::equal(payload.begin(), payload.end(), sink.dst.begin() + n));
        CHECK_FALSE(contains(proxy.clientBytes(), std::string(payload.begin() + 1000, payload.begin() + 1064)));
      } else {
        REQUIRE(closed.wait_for(std::chrono::seconds(5)) == std::future_status::ready);
        Status why = closed.get();
        CHECK(why.code() == Code::kProtocolError);
        CHECK_THAT(why.message(), Catch::Contains("failed authentication"));
        CHECK(sink.delivered == 0);
      }
      pair.onIoThread([&] {
        sender->close(Status::ok());
        sender.reset();
        if (sink.ch) sink.ch->close(Status::ok());
        sink.ch.reset();
      });
    }
  }
}
