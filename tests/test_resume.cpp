// Resumable ring connections (net/resend_log.hpp, net/data_channel.hpp, docs/protocol.md §5.4.3): the
// resend log's bookkeeping, and two DataChannels on real loopback sockets, in clear and sealed, whose
// connection breaks in the middle of a stream of frames and is replaced by a new one: every frame
// arrives exactly once, in order, intact; frames of an operation that ended meanwhile are skipped; a
// bad count or no new connection closes the channel with a reason.
#include <catch2/catch.hpp>

#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>

#include "net/aead.hpp"
#include "net/data_channel.hpp"
#include "net/resend_log.hpp"
#include "io_support.hpp"

using namespace pccl;
using pccl::test::onIo;

namespace {

net::ResendLog::Entry entry(uint64_t number, uint64_t op, const uint8_t* payload, uint32_t bytes, bool owned = false) {
  net::ResendLog::Entry e;
  e.number = number;
  e.op_id = op;
  e.payload = payload;
  e.bytes = bytes;
  if (owned) {
    e.owned = std::make_shared<std::vector<uint8_t>>(payload, payload + bytes);
    e.payload = e.owned->data();
  }
  return e;
}

}  // namespace

TEST_CASE("resend log: acknowledged and retired frames go, the rest come back as owned copies", "[resume]") {
  net::ResendLog log;
  std::vector<uint8_t> data(100);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i);
  for (uint64_t n = 1; n <= 6; ++n) {
    REQUIRE(log.assign() == n);
    log.written(entry(n, n <= 3 ? 7 : 8, data.data() + n * 10, 10, /*owned=*/n == 2));
  }
  CHECK(log.size() == 6);
  CHECK(log.keptBytes() == 60);
  REQUIRE(log.acked(1).isOk());
  CHECK(log.size() == 5);
  CHECK(log.acked(0).isOk());  // an older count changes nothing
  CHECK(log.acked(9).code() == Code::kProtocolError);
  log.retire(7, 0);  // frame 3 goes; frame 2 is owned (a control frame) and stays until acknowledged
  CHECK(log.size() == 4);
  CHECK(log.since(0).status().code() == Code::kProtocolError);  // below what was acknowledged
  CHECK(log.since(7).status().code() == Code::kProtocolError);  // above what was written
  auto back = log.since(4);
  REQUIRE(back.isOk());
  REQUIRE(back->size() == 2);
  CHECK((*back)[0].number == 5);
  CHECK((*back)[1].number == 6);
  for (const auto& e : *back) {
    REQUIRE(e.owned);
    CHECK(e.payload == e.owned->data());
    CHECK(std::memcmp(e.payload, data.data() + e.number * 10, 10) == 0);
  }
  CHECK(log.size() == 0);
  CHECK(log.ackedUpTo() == 4);
}

namespace {

// Records the frames a channel delivers; can break the channel at a chosen frame.
struct Recorder : net::DataSink {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::pair<uint64_t, uint64_t>> got;  // (op_id, offset) in arrival order
  std::vector<std::vector<uint8_t>> payloads;
  size_t abandoned_frames = 0;
  Status closed = Status::ok();
  bool is_closed = false;
  size_t break_at = 0;  // detach the channel when this many frames have arrived (0: never)
  bool hold = false;    // stop reading (pause) until the next connection
  std::vector<uint8_t> buf;

  Result<net::Placement> place(net::DataChannel&, const wire::DataHeader&, uint32_t bytes) override {
    {
      std::lock_guard<std::mutex> lk(mu);
      if (hold) return net::Placement::pause();
    }
    buf.resize(bytes);
    return net::Placement::direct(buf.data());
  }
  Status deliver(net::DataChannel& ch, const wire::DataHeader& h, const uint8_t* data, uint32_t bytes) override {
    std::lock_guard<std::mutex> lk(mu);
    got.emplace_back(h.op_id, h.offset);
    payloads.emplace_back(data, data + bytes);
    if (got.size() == break_at) ch.detach(Status::peerLost("the test broke it"));
    cv.notify_all();
    return Status::ok();
  }
  void abandoned(net::DataChannel&, const wire::DataHeader&) override {
    std::lock_guard<std::mutex> lk(mu);
    ++abandoned_frames;
  }
  void channelClosed(net::DataChannel&, const Status& why) override {
    std::lock_guard<std::mutex> lk(mu);
    is_closed = true;
    closed = why;
    cv.notify_all();
  }
  template <typename P>
  bool waitFor(P pred, int seconds = 60) {
    std::unique_lock<std::mutex> lk(mu);
    return cv.wait_for(lk, std::chrono::seconds(seconds), pred);
  }
};

struct Dropper : net::DataSink {  // the sender's side: nothing comes to it but acknowledgements
  Result<net::Placement> place(net::DataChannel&, const wire::DataHeader&, uint32_t) override {
    return net::Placement::discard();
  }
  Status deliver(net::DataChannel&, const wire::DataHeader&, const uint8_t*, uint32_t) override { return Status::ok(); }
  void channelClosed(net::DataChannel&, const Status&) override {}
};

// One connection's two ends, in clear or sealed with fresh streams (as a new handshake would give).
std::pair<net::Link, net::Link> connectedPair(asio::io_context& io, bool sealed, uint8_t key_byte) {
  net::Tcp::acceptor acceptor(io, net::Tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  net::Tcp::socket a(io), b(io);
  a.connect(acceptor.local_endpoint());
  acceptor.accept(b);
  net::Link la{std::move(a), {}, {}}, lb{std::move(b), {}, {}};
  if (sealed) {
    net::AeadKey k1{}, k2{};
    k1.fill(key_byte);
    k2.fill(static_cast<uint8_t>(key_byte + 1));
    la.crypto.send = std::make_unique<net::AeadStream>(net::Cipher::kChaCha20Poly1305, k1);
    la.crypto.recv = std::make_unique<net::AeadStream>(net::Cipher::kChaCha20Poly1305, k2);
    lb.crypto.send = std::make_unique<net::AeadStream>(net::Cipher::kChaCha20Poly1305, k2);
    lb.crypto.recv = std::make_unique<net::AeadStream>(net::Cipher::kChaCha20Poly1305, k1);
  }
  return {std::move(la), std::move(lb)};
}

struct Pair {
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work = asio::make_work_guard(io);
  std::shared_ptr<net::DataChannel> tx, rx;
  Recorder sink;
  Dropper drop;
  std::thread loop;
  bool sealed;

  Pair(bool sealed_, Millis wait) : sealed(sealed_) {
    auto [a, b] = connectedPair(io, sealed, 0x30);
    tx = std::make_shared<net::DataChannel>(std::move(a), 5, "tx");
    rx = std::make_shared<net::DataChannel>(std::move(b), 5, "rx");
    net::ResumeOptions o;
    o.wait = wait;
    tx->enableResume(o);
    rx->enableResume(o);
    tx->start(&drop);
    rx->start(&sink);
    loop = std::thread([this] { io.run(); });
  }
  ~Pair() {
    onIo(io, [&] {
      tx->close(Status::ok());
      rx->close(Status::ok());
    });
    work.reset();
    loop.join();
  }
  // A new connection takes over on both ends, each told what the other took in (as the P2PHello and
  // P2PAccept of a resume carry it).
  void resume(uint8_t key_byte) {
    auto [a, b] = connectedPair(io, sealed, key_byte);
    onIo(io, [&, a = std::move(a), b = std::move(b)]() mutable {
      {
        std::lock_guard<std::mutex> lk(sink.mu);
        sink.hold = false;
      }
      rx->detach(Status::peerLost("taken over"));
      tx->detach(Status::peerLost("taken over"));
      const uint64_t rx_has = rx->framesReceived(), tx_has = tx->framesReceived();
      REQUIRE(tx->resumeOn(std::move(a), rx_has).isOk());
      REQUIRE(rx->resumeOn(std::move(b), tx_has).isOk());
    });
  }
};

std::vector<uint8_t> pattern(size_t bytes, uint32_t seed) {
  std::vector<uint8_t> v(bytes);
  for (size_t i = 0; i < bytes; ++i) v[i] = static_cast<uint8_t>((i * 131 + seed * 7) >> 3);
  return v;
}

}  // namespace

TEST_CASE("resumable channel: a connection broken mid-stream is replaced and every frame arrives once, in order",
          "[resume]") {
  for (const bool sealed : {false, true}) {
    SECTION(sealed ? "sealed" : "in clear") {
      Pair p(sealed, Millis(60000));
      constexpr size_t kFrames = 120, kBytes = 256 << 10;
      std::vector<std::vector<uint8_t>> payloads;
      for (size_t i = 0; i < kFrames; ++i) payloads.push_back(pattern(kBytes, static_cast<uint32_t>(i)));
      p.sink.break_at = 30;  // the receiver gives the connection up after 30 frames
      onIo(p.io, [&] {
        for (size_t i = 0; i < kFrames; ++i) {
          wire::DataHeader h = wire::dataHeader(1, 0, 0, i);
          p.tx->send(h, payloads[i].data(), kBytes, [](const Status&) {});
        }
      });
      REQUIRE(p.sink.waitFor([&] { return p.sink.got.size() >= 30; }));
      p.resume(0x50);
      REQUIRE(p.sink.waitFor([&] { return p.sink.got.size() >= kFrames || p.sink.is_closed; }));
      std::lock_guard<std::mutex> lk(p.sink.mu);
      INFO(p.sink.closed.toString());
      REQUIRE_FALSE(p.sink.is_closed);
      REQUIRE(p.sink.got.size() == kFrames);
      for (size_t i = 0; i < kFrames; ++i) {
        INFO("frame " << i);
        CHECK(p.sink.got[i].second == i);
        CHECK(p.sink.payloads[i] == payloads[i]);
      }
      uint64_t reconnects = 0, resent = 0;
      onIo(p.io, [&] {
        reconnects = p.tx->reconnects();
        resent = p.tx->resentBytes();
      });
      CHECK(reconnects == 1);
      CHECK(resent % kBytes == 0);  // whole frames, the ones the receiver lacked
    }
  }
}

TEST_CASE("resumable channel: frames written in full but never taken in are written again", "[resume]") {
  Pair p(false, Millis(60000));
  constexpr size_t kFrames = 20, kBytes = 4096;  // all of them fit in the kernel's buffers
  std::vector<std::vector<uint8_t>> payloads;
  for (size_t i = 0; i < kFrames; ++i) payloads.push_back(pattern(kBytes, static_cast<uint32_t>(i)));
  p.sink.hold = true;  // the receiver reads nothing: the frames wait in the kernel's buffers
  std::mutex mu;
  std::condition_variable cv;
  size_t written = 0;
  onIo(p.io, [&] {
    for (size_t i = 0; i < kFrames; ++i) {
      p.tx->send(wire::dataHeader(1, 0, 0, i), payloads[i].data(), kBytes, [&](const Status& s) {
        std::lock_guard<std::mutex> lk(mu);
        if (s.isOk()) ++written;
        cv.notify_all();
      });
    }
  });
  {
    std::unique_lock<std::mutex> lk(mu);
    REQUIRE(cv.wait_for(lk, std::chrono::seconds(60), [&] { return written == kFrames; }));
  }
  p.resume(0x40);
  REQUIRE(p.sink.waitFor([&] { return p.sink.got.size() >= kFrames || p.sink.is_closed; }));
  uint64_t resent = 0;
  onIo(p.io, [&] { resent = p.tx->resentBytes(); });
  std::lock_guard<std::mutex> lk(p.sink.mu);
  REQUIRE(p.sink.got.size() == kFrames);
  for (size_t i = 0; i < kFrames; ++i) CHECK(p.sink.payloads[i] == payloads[i]);
  CHECK(resent == kFrames * kBytes);
}

TEST_CASE("resumable channel: frames of an operation that ended during the break are skipped, the rest arrive",
          "[resume]") {
  Pair p(false, Millis(60000));
  constexpr size_t kEach = 40, kBytes = 64 << 10;
  std::vector<std::vector<uint8_t>> payloads;
  for (size_t i = 0; i < 2 * kEach; ++i) payloads.push_back(pattern(kBytes, static_cast<uint32_t>(i)));
  p.sink.break_at = 5;  // in the middle of operation 7
  onIo(p.io, [&] {
    for (size_t i = 0; i < 2 * kEach; ++i) {
      wire::DataHeader h = wire::dataHeader(i < kEach ? 7 : 8, 0, 0, i % kEach);
      p.tx->send(h, payloads[i].data(), kBytes, [](const Status&) {});
    }
  });
  REQUIRE(p.sink.waitFor([&] { return p.sink.got.size() >= 5; }));
  // Operation 7 ends on the sender (as after a failure: what is queued is taken back, then it ends).
  onIo(p.io, [&] {
    p.tx->detach(Status::peerLost("the test broke it"));
    p.tx->cancelQueued(7, 0, Status::peerLost("op 7 failed"));
    p.tx->operationEnded(7, 0);
  });
  p.resume(0x60);
  REQUIRE(p.sink.waitFor([&] {
    return p.sink.is_closed ||
           std::count_if(p.sink.got.begin(), p.sink.got.end(), [](const auto& g) { return g.first == 8; }) ==
               static_cast<long>(kEach);
  }));
  std::lock_guard<std::mutex> lk(p.sink.mu);
  INFO(p.sink.closed.toString());
  REQUIRE_FALSE(p.sink.is_closed);
  size_t next7 = 0, next8 = 0;
  for (size_t i = 0; i < p.sink.got.size(); ++i) {
    const auto [op, offset] = p.sink.got[i];
    if (op == 7) {
      CHECK(offset == next7++);  // op 7: a prefix, never a frame twice
      continue;
    }
    CHECK(offset == next8);
    CHECK(p.sink.payloads[i] == payloads[kEach + next8]);
    ++next8;
  }
  CHECK(next7 >= 5);
  CHECK(next8 == kEach);
  // The counts still agree: another connection takes over, and nothing of operation 8 comes twice
  // before operation 9's frame.
  p.sink.mu.unlock();
  p.resume(0x62);
  std::vector<uint8_t> last = pattern(100, 9);
  onIo(p.io, [&] { p.tx->send(wire::dataHeader(9, 0, 0, 0), last.data(), 100, [](const Status&) {}); });
  REQUIRE(p.sink.waitFor([&] { return p.sink.is_closed || (!p.sink.got.empty() && p.sink.got.back().first == 9); }));
  p.sink.mu.lock();
  CHECK_FALSE(p.sink.is_closed);
  CHECK(std::count_if(p.sink.got.begin(), p.sink.got.end(), [](const auto& g) { return g.first == 8; }) ==
        static_cast<long>(kEach));
}

TEST_CASE("resumable channel: a broken connection not replaced within the wait closes the channel with the reason",
          "[resume]") {
  Pair p(false, Millis(300));
  onIo(p.io, [&] { p.rx->detach(Status::peerLost("the path went dark")); });
  REQUIRE(p.sink.waitFor([&] { return p.sink.is_closed; }, 30));
  std::lock_guard<std::mutex> lk(p.sink.mu);
  CHECK(p.sink.closed.code() == Code::kPeerLost);
  CHECK_THAT(p.sink.closed.message(), Catch::Contains("the path went dark") && Catch::Contains("within 300 ms"));
}

TEST_CASE("resumable channel: a count the sender could not have produced closes the channel", "[resume]") {
  Pair p(false, Millis(60000));
  std::vector<uint8_t> one = pattern(1000, 1);
  onIo(p.io, [&] { p.tx->send(wire::dataHeader(1, 0, 0, 0), one.data(), 1000, [](const Status&) {}); });
  REQUIRE(p.sink.waitFor([&] { return p.sink.got.size() == 1; }));
  auto [a, b] = connectedPair(p.io, false, 0x70);
  Status st;
  bool open = true;
  onIo(p.io, [&, a = std::move(a)]() mutable {
    st = p.tx->resumeOn(std::move(a), 5);  // it wrote one frame
    open = p.tx->isOpen();
  });
  CHECK(st.code() == Code::kProtocolError);
  CHECK_THAT(st.message(), Catch::Contains("took in 5 frames") && Catch::Contains("1 were written"));
  CHECK_FALSE(open);
}
