// What the lending tests share (test_lending.cpp, test_lending_security.cpp): an io_context driven until
// an event, a sink that records deliveries, a socket pair, a lending channel whose remote the test
// drives by hand, and raw frame reads and writes on that remote.
#ifndef PCCL_TESTS_LENDING_SUPPORT_HPP_
#define PCCL_TESTS_LENDING_SUPPORT_HPP_

#include <catch2/catch.hpp>
#include <sodium.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <memory>

#include "net/aead.hpp"
#include "net/data_channel.hpp"
#include "net/lending.hpp"
#include "wire/data.hpp"

namespace pccl::test {

// Runs the io_context's handlers until `done()` holds. Each wait blocks on the next event (no
// sleeping); the deadline only ends a hang.
inline bool runUntil(asio::io_context& io, const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    if (io.stopped()) io.restart();
    io.run_one_for(std::chrono::milliseconds(200));
  }
  return true;
}

// Records every frame delivered to it (bytes, and whether they were read from the lender's memory).
struct Recorder : net::DataSink {
  struct Got {
    wire::DataHeader h;
    std::vector<uint8_t> bytes;
    bool lent;
  };
  std::vector<Got> got;
  std::vector<uint8_t> landing;
  bool closed = false;
  Status why;

  Result<net::Placement> place(net::DataChannel&, const wire::DataHeader&, uint32_t bytes) override {
    landing.assign(bytes, 0);
    return net::Placement::direct(landing.data());
  }
  Status deliver(net::DataChannel& ch, const wire::DataHeader& h, const uint8_t* data, uint32_t bytes) override {
    got.push_back(Got{h, std::vector<uint8_t>(data, data + bytes), ch.lentFrame()});
    return Status::ok();
  }
  void channelClosed(net::DataChannel&, const Status& s) override {
    closed = true;
    why = s;
  }
};

inline net::SessionCrypto cryptoFor(bool sealed, bool first) {
  net::SessionCrypto c;
  if (!sealed) return c;
  net::AeadKey ab{}, ba{};
  ab.fill(0x42);
  ba.fill(0x17);
  c.send = std::make_unique<net::AeadStream>(net::Cipher::kChaCha20Poly1305, first ? ab : ba);
  c.recv = std::make_unique<net::AeadStream>(net::Cipher::kChaCha20Poly1305, first ? ba : ab);
  return c;
}

struct SocketPair {
  asio::io_context io;
  net::Tcp::socket a{io}, b{io};
  SocketPair() {
    net::Tcp::acceptor acceptor(io, net::Tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    a.connect(acceptor.local_endpoint());
    acceptor.accept(b);
  }
};

inline std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 31 + seed + (i >> 12));
  return v;
}

inline constexpr uint64_t kEpoch = 7;

// A lending channel on one end of a socket pair, started; the test drives the other end (raw) by hand.
// The channel dialed (its role is kDialer); the raw end plays the acceptor of session `session`.
inline net::SessionId randomSession() {
  net::SessionId s{};
  randombytes_buf(s.data(), s.size());
  return s;
}

struct HandDriven {
  SocketPair sp;
  net::SessionId session = randomSession();
  std::shared_ptr<net::DataChannel> ch;
  Recorder sink;
  net::Tcp::socket& raw;
  HandDriven()
      : ch(std::make_shared<net::DataChannel>(net::Link{std::move(sp.a), {}, session}, kEpoch, "ch")), raw(sp.b) {
    ch->enableLending(net::LendRole::kDialer);
    ch->start(&sink);
  }
};

inline wire::LendRegion regionOf(const std::vector<uint8_t>& v) { return {reinterpret_cast<uintptr_t>(v.data()), v.size()}; }

// A whole frame from a raw (blocking) socket: its DataHeader and payload.
inline std::pair<wire::DataHeader, std::vector<uint8_t>> readFrame(net::Tcp::socket& s) {
  std::array<uint8_t, wire::kHeaderSize + wire::kDataHeaderSize> head{};
  asio::read(s, asio::buffer(head));
  auto h = wire::decodeHeader(head.data(), wire::kHeaderSize, 1u << 30);
  REQUIRE(h.isOk());
  auto d = wire::decodeDataHeader(head.data() + wire::kHeaderSize, wire::kDataHeaderSize);
  REQUIRE(d.isOk());
  std::vector<uint8_t> payload(h->length - wire::kDataHeaderSize);
  asio::read(s, asio::buffer(payload));
  return {*d, payload};
}

template <size_t N>
void writeFrame(net::Tcp::socket& s, uint32_t flags, const std::array<uint8_t, N>& payload, uint64_t op_id = 0,
                uint32_t seq = 0) {
  wire::DataHeader d = wire::dataHeader(op_id, 0, flags, 0);
  d.seq = seq;
  const auto head = wire::encodeDataFrameHead(d, kEpoch, N);
  asio::write(s, asio::buffer(head));
  asio::write(s, asio::buffer(payload));
}

inline void writeEmptyFrame(net::Tcp::socket& s, uint32_t flags) {
  const auto head = wire::encodeDataFrameHead(wire::dataHeader(0, 0, flags, 0), kEpoch, 0);
  asio::write(s, asio::buffer(head));
}

}  // namespace pccl::test

#endif  // PCCL_TESTS_LENDING_SUPPORT_HPP_
