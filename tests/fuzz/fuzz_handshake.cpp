// libFuzzer harness: the authenticated handshake (net/handshake.cpp) against a hostile remote, over a
// real loopback TCP connection. Byte 0 of the input picks the side under test and whether a secret is
// configured (bit 1) and encryption required (bit 2: the Hello/HelloReply flags must agree); the rest is everything the remote sends before it closes its side:
//   even: our server handshake reads the bytes as a client's Hello, AuthProof, ...
//   odd:  our client handshake (role peer-to-peer) reads them as the server's HelloReply, AuthOk, ...
// Invariants: the handshake always finishes (with an error for anything but a correct exchange, which
// random bytes cannot forge without the key), no out-of-bounds access, no undefined behaviour.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "net/asio.hpp"
#include "net/auth.hpp"
#include "net/handshake.hpp"

using namespace pccl;

namespace {

void require(bool ok) {
  if (!ok) std::abort();
}

struct Rig {
  asio::io_context io;
  net::Tcp::acceptor acceptor{io, net::Tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)};
  std::shared_ptr<const net::AuthKey> open = std::make_shared<net::AuthKey>("");
  std::shared_ptr<const net::AuthKey> secret = std::make_shared<net::AuthKey>("fuzz-secret");
  std::shared_ptr<const net::AuthKey> encrypted = std::make_shared<net::AuthKey>("fuzz-secret", true);
};

Rig& rig() {
  static Rig* r = [] {
    (void)net::initCrypto();
    return new Rig();
  }();
  return *r;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  Rig& r = rig();
  const bool test_client = (data[0] & 1) != 0;
  auto key = (data[0] & 4) != 0 ? r.encrypted : (data[0] & 2) != 0 ? r.secret : r.open;
  const std::vector<uint8_t> remote_bytes(data + 1, data + size);

  net::Tcp::socket ours(r.io), theirs(r.io);
  asio::error_code ec;
  ours.connect(r.acceptor.local_endpoint(), ec);
  require(!ec);
  r.acceptor.accept(theirs, ec);
  require(!ec);
  // The remote: everything at once, then end of stream (what it sends back is never read).
  asio::write(theirs, asio::buffer(remote_bytes), ec);
  theirs.shutdown(net::Tcp::socket::shutdown_send, ec);

  bool done = false;
  if (test_client) {
    net::ClientHandshake hs{wire::Role::kPeerToPeer, key, Millis(2000), "fuzzed server"};
    net::asyncClientHandshake(std::move(ours), hs, [&](Result<net::Link> res) {
      done = true;
      if (!res.isOk()) require(!res.status().message().empty());
    });
  } else {
    net::ServerHandshake hs{key, Millis(2000)};
    net::asyncServerHandshake(std::move(ours), hs, [&](Result<net::Authenticated> res) {
      done = true;
      if (!res.isOk()) require(!res.status().message().empty());
    });
  }
  r.io.restart();
  while (!done && r.io.run_one() > 0) {
  }
  require(done);
  // Let the handshake's own handlers (timers, closes) finish before the next input.
  r.io.restart();
  r.io.poll();
  return 0;
}
