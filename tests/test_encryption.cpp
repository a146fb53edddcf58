// Encrypted runs (design.md §3, docs/security.md): whole runs with encrypt on (all-reduce, quantized
// and compressed all-reduce, shared-state sync), cipher negotiation between processes that prefer
// different ciphers, settings that must match, and a man in the middle on real connections: what
// crosses the wire is ciphertext, a flipped bit or a replayed frame closes the connection, a tampered
// ephemeral key fails the handshake, and a recording cannot be opened with the secret alone.
#include <catch2/catch.hpp>

#include <sodium.h>

#include <algorithm>
#include <condition_variable>
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
          arrived.notify_all();
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
  // True once `n` frames have arrived, false at the deadline.
  bool waitReceived(size_t n, int timeout_ms) {
    std::unique_lock<std::mutex> lk(mu);
    return arrived.wait_for(lk, std::chrono::milliseconds(timeout_ms), [&] { return messages.size() >= n; });
  }
  std::condition_variable arrived;
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
      {"encrypted, a payload byte flipped", true, {hs + 30, -1, -1, -1}, false},
      {"encrypted, the epoch in the clear header flipped", true, {hs + 10, -1, -1, -1}, false},
      {"encrypted, the first frame replayed", true, {-1, hs, hs + frame, -1}, true},
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
        REQUIRE(server.waitReceived(2, 5000));
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

// The frame at `at` in a recorded stream: its header bytes and its payload (with a sealed frame's tag).
struct Recorded {
  wire::HeaderBytes raw{};
  wire::FrameHeader header;
  std::vector<uint8_t> payload;
};
Recorded recordedFrame(const std::vector<uint8_t>& stream, size_t at) {
  Recorded f;
  REQUIRE(stream.size() >= at + wire::kHeaderSize);
  std::copy_n(stream.begin() + static_cast<std::ptrdiff_t>(at), wire::kHeaderSize, f.raw.begin());
  auto h = wire::decodeHeader(f.raw.data(), f.raw.size(), wire::kMaxControlPayload + net::kAeadTagBytes);
  REQUIRE(h.isOk());
  f.header = *h;
  const auto from = stream.begin() + static_cast<std::ptrdiff_t>(at + wire::kHeaderSize);
  REQUIRE(stream.end() - from >= static_cast<std::ptrdiff_t>(h->length));
  f.payload.assign(from, from + h->length);
  return f;
}

// Protocol version 2's key for the client's direction: BLAKE2b over public bytes, keyed with K.
net::AeadKey version2Key(const std::string& secret, uint8_t role, const wire::Nonce& cn, const wire::Nonce& sn) {
  net::AeadKey k{};
  crypto_generichash_state st;
  crypto_generichash_init(&st, nullptr, 0, k.size());
  crypto_generichash_update(&st, reinterpret_cast<const uint8_t*>("pccl/auth/v1"), 12);
  crypto_generichash_update(&st, reinterpret_cast<const uint8_t*>(secret.data()), secret.size());
  crypto_generichash_final(&st, k.data(), k.size());
  std::vector<uint8_t> in{'p', 'c', 'c', 'l', '/', 'e', 'n', 'c', '/', 'v', '1', '/', 'c', '2', 's', role};
  in.insert(in.end(), cn.begin(), cn.end());
  in.insert(in.end(), sn.begin(), sn.end());
  net::AeadKey out{};
  crypto_generichash(out.data(), out.size(), in.data(), in.size(), k.data(), k.size());
  return out;
}

}  // namespace

TEST_CASE("encryption: a recorded connection cannot be opened by whoever learns the secret later",
          "[encryption]") {
  const std::string marker = "forward-secret-marker-0123456789";
  ControlServer server;
  NetPair pair(true, [&](net::Authenticated a) { server.serve(std::move(a)); });
  TcpProxy proxy(pair.listener->port(), TcpProxy::Tamper{});
  auto link = pair.dial(proxy.port());
  REQUIRE(link.isOk());
  auto client = std::make_shared<net::Connection>(std::move(link).value(), wire::kMaxControlPayload);
  pair.onIoThread([&] {
    client->start([](const wire::FrameHeader&, const uint8_t*, size_t) { return Status::ok(); }, [](const Status&) {});
    client->sendFrame(marked(marker));
  });
  REQUIRE(server.waitReceived(1, 5000));  // the two ends open it
  {
    std::lock_guard<std::mutex> lk(server.mu);
    CHECK(server.messages[0] == marker);
  }

  // The attacker holds both directions' bytes and the secret, but no ephemeral X25519 secret.
  const std::vector<uint8_t> up = proxy.clientBytes(), down = proxy.serverBytes();
  const Recorded hello_frame = recordedFrame(up, 0);
  const Recorded reply_frame = recordedFrame(down, 0);
  auto hello = wire::decodePayload<wire::Hello>(hello_frame.payload.data(), hello_frame.payload.size());
  auto reply = wire::decodePayload<wire::HelloReply>(reply_frame.payload.data(), reply_frame.payload.size());
  REQUIRE(hello.isOk());
  REQUIRE(reply.isOk());
  CHECK(hello->kx != wire::KxKey{});
  CHECK(reply->kx != wire::KxKey{});
  const Recorded sealed = recordedFrame(up, handshakeBytes());
  CHECK_FALSE(contains(sealed.payload, marker));
  net::Transcript t;
  t.client_role = hello->role;
  t.client_flags = hello->flags;
  t.server_flags = reply->flags;
  t.client_nonce = hello->nonce;
  t.server_nonce = reply->nonce;
  t.client_kx = hello->kx;
  t.server_kx = reply->kx;
  const net::AuthKey run_key(kSecret, true);
  std::vector<net::AeadKey> guesses = {version2Key(kSecret, hello->role, hello->nonce, reply->nonce)};
  net::SecretKey as_ikm[3];
  std::copy(hello->kx.begin(), hello->kx.end(), as_ikm[1].data());
  std::copy(reply->kx.begin(), reply->kx.end(), as_ikm[2].data());
  for (const net::SecretKey& ikm : as_ikm) guesses.push_back(run_key.sessionKeys(t, ikm).c2s.array());
  const auto cipher = (reply->flags & 4) != 0 ? net::Cipher::kAes256Gcm : net::Cipher::kChaCha20Poly1305;
  for (const net::AeadKey& key : guesses) {
    net::AeadStream rx(cipher, key);
    std::vector<uint8_t> p = sealed.payload;
    const size_t n = p.size() - net::kAeadTagBytes;
    net::AeadTag tag{};
    std::copy_n(p.begin() + static_cast<std::ptrdiff_t>(n), net::kAeadTagBytes, tag.begin());
    CHECK_FALSE(rx.open(sealed.raw.data(), sealed.raw.size(), p.data(), n, tag).isOk());
  }
  pair.onIoThread([&] {
    client->close(Status::ok());
    client.reset();
    if (server.conn) server.conn->close(Status::ok());
    server.conn.reset();
  });
}

TEST_CASE("encryption: a tampered ephemeral key or flag fails the handshake", "[encryption]") {
  // Offsets into the Hello frame (role, flags, nonce, kx) and the HelloReply frame (flags, nonce, kx).
  const int64_t hello_kx = static_cast<int64_t>(wire::kHeaderSize) + 2 + 32 + 7;
  const int64_t reply_kx = static_cast<int64_t>(wire::kHeaderSize) + 1 + 32 + 7;
  struct Case {
    const char* name;
    bool encrypt;
    TcpProxy::Tamper tamper;
  };
  const Case cases[] = {
      {"the client's ephemeral key", true, {hello_kx, -1, -1, -1}},
      {"the server's ephemeral key", true, {-1, -1, -1, reply_kx}},
      {"the client's (zero) key in a run without encryption", false, {hello_kx, -1, -1, -1}},
      // Bit 0 of the Hello's flags is informational (the server ignores it), yet the proofs cover it.
      {"an informational flag bit", true, {static_cast<int64_t>(wire::kHeaderSize) + 1, -1, -1, -1, 1}},
  };
  for (const Case& k : cases) {
    SECTION(k.name) {
      std::atomic<int> served{0};
      NetPair pair(k.encrypt, [&](net::Authenticated) { ++served; });
      TcpProxy proxy(pair.listener->port(), k.tamper);
      auto link = pair.dial(proxy.port());
      REQUIRE_FALSE(link.isOk());
      CHECK(link.status().code() == Code::kAuthFailed);
      CHECK(served == 0);
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
      TcpProxy proxy(pair.listener->port(), TcpProxy::Tamper{k.flip_at, -1, -1, -1});
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
