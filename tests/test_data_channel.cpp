// The data channel's receive side (net/data_channel.hpp): a frame its sink discards is read and
// dropped in fixed-size chunks, so discarding a 48 MiB frame holds no buffer of that size, in clear and
// sealed, and the frame after it arrives intact (a sealed stream's nonces stay in step).
#include <catch2/catch.hpp>

#include <future>
#include <memory>
#include <thread>

#include "net/aead.hpp"
#include "net/data_channel.hpp"

using namespace pccl;

namespace {

// Discards every frame with op_id 1; places the others straight into `dst`. `outcome`: the first
// delivery (OK) or the channel's close (why).
struct Sink : net::DataSink {
  std::vector<uint8_t> dst;
  std::promise<Status> outcome;
  bool outcome_set = false;

  void settle(const Status& s) {
    if (!outcome_set) outcome.set_value(s);
    outcome_set = true;
  }

  Result<net::Placement> place(net::DataChannel&, const wire::DataHeader& h, uint32_t bytes) override {
    if (h.op_id == 1) return net::Placement::discard();
    dst.resize(bytes);
    return net::Placement::direct(dst.data());
  }
  Status deliver(net::DataChannel&, const wire::DataHeader&, const uint8_t*, uint32_t) override {
    settle(Status::ok());
    return Status::ok();
  }
  void channelClosed(net::DataChannel&, const Status& why) override {
    settle(why.isOk() ? Status::internal("closed") : why);
  }
};

// One direction's streams for both ends: the sender seals with `key`, the receiver opens with it.
net::SessionCrypto cryptoFor(bool sealed, bool sender) {
  net::SessionCrypto c;
  if (!sealed) return c;
  net::AeadKey key{};
  key.fill(0x42);
  net::AeadKey unused{};
  unused.fill(0x17);
  auto mine = std::make_unique<net::AeadStream>(net::Cipher::kChaCha20Poly1305, key);
  auto other = std::make_unique<net::AeadStream>(net::Cipher::kChaCha20Poly1305, unused);
  c.send = sender ? std::move(mine) : std::move(other);
  c.recv = sender ? std::move(other) : std::move(mine);
  return c;
}

}  // namespace

TEST_CASE("data channel: a discarded frame is dropped in bounded memory and the next one arrives intact",
          "[data_channel]") {
  for (const bool sealed : {false, true}) {
    SECTION(sealed ? "sealed" : "in clear") {
      asio::io_context io;
      net::Tcp::acceptor acceptor(io, net::Tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
      net::Tcp::socket a(io), b(io);
      a.connect(acceptor.local_endpoint());
      acceptor.accept(b);
      auto sender = std::make_shared<net::DataChannel>(net::Link{std::move(a), cryptoFor(sealed, true), {}}, 3, "tx");
      auto receiver =
          std::make_shared<net::DataChannel>(net::Link{std::move(b), cryptoFor(sealed, false), {}}, 3, "rx");
      Sink sink;
      const std::vector<uint8_t> big((48u << 20) + 5, 0xAB);  // a frame nobody wants, 48 MiB
      std::vector<uint8_t> small(1000);
      for (size_t i = 0; i < small.size(); ++i) small[i] = static_cast<uint8_t>(i * 13);
      receiver->start(&sink);
      wire::DataHeader h;
      h.op_id = 1;
      sender->send(h, big.data(), static_cast<uint32_t>(big.size()), [](const Status&) {});
      h.op_id = 2;
      sender->send(h, small.data(), static_cast<uint32_t>(small.size()), [](const Status&) {});
      std::thread loop([&] { io.run(); });
      auto outcome = sink.outcome.get_future();
      const bool settled = outcome.wait_for(std::chrono::seconds(30)) == std::future_status::ready;
      size_t held = 0;
      asio::post(io, [&] {
        held = receiver->receiveBufferBytes();
        sender->close(Status::ok());
        receiver->close(Status::ok());
      });
      loop.join();  // the work ends with both channels closed
      REQUIRE(settled);
      const Status got = outcome.get();
      INFO(got.toString());
      REQUIRE(got.isOk());
      CHECK(sink.dst == small);
      CHECK(receiver->bytesReceived() == big.size() + small.size());
      CHECK(held <= net::DataChannel::kDiscardChunk);
    }
  }
}
