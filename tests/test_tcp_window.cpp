// A connection's send room (net/tcp_window.hpp): the congestion window's free bytes as the kernel will
// see them at the next write, with the window restarted after idleness as Linux does it
// (tcp_slow_start_after_idle). The striper gives a frame to a connection whose room holds it, so
// after a pause a burst spreads over the connections instead of queueing behind one slow start. And the
// cap on the retransmission backoff (net/tcp_rto.hpp) every connection sets.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <memory>

#include "net/data_channel.hpp"
#include "net/tcp_rto.hpp"
#include "net/tcp_window.hpp"

using namespace pccl;

namespace {

net::TcpWindow window(uint32_t cwnd, uint32_t unacked, uint32_t idle_ms, uint32_t notsent = 0) {
  net::TcpWindow w;
  w.rto_us = 204000;  // Linux's 200 ms floor plus a short round trip
  w.mss = 1448;
  w.cwnd = cwnd;
  w.unacked = unacked;
  w.idle_ms = idle_ms;
  w.notsent_bytes = notsent;
  return w;
}

}  // namespace

TEST_CASE("tcp window: the room is the window's free segments less what waits unsent", "[tcp_window]") {
  CHECK(net::sendRoom(window(100, 0, 0), true) == 100 * 1448);
  CHECK(net::sendRoom(window(100, 40, 0), true) == 60 * 1448);
  CHECK(net::sendRoom(window(100, 40, 0, 8000), true) == 60 * 1448 - 8000);
  // Never negative: a full window, or more unsent than it holds.
  CHECK(net::sendRoom(window(10, 10, 0), true) == 0);
  CHECK(net::sendRoom(window(10, 12, 0), true) == 0);
  CHECK(net::sendRoom(window(10, 0, 0, 100000), true) == 0);
}

TEST_CASE("tcp window: after a retransmission timeout of idleness the window restarts as Linux's does",
          "[tcp_window]") {
  // Idle for less than one timeout: the window stands.
  CHECK(net::sendRoom(window(400, 0, 200), true) == 400 * 1448);
  // Each further timeout of idleness halves it (tcp_cwnd_restart), down to the initial 10 segments.
  CHECK(net::sendRoom(window(400, 0, 300), true) == 200 * 1448);
  CHECK(net::sendRoom(window(400, 0, 500), true) == 100 * 1448);
  CHECK(net::sendRoom(window(400, 0, 60000), true) == 10 * 1448);
  // A window already below the initial one is not raised.
  CHECK(net::sendRoom(window(4, 0, 60000), true) == 4 * 1448);
  // Nothing restarts while segments are in flight, nor where the restart is off (the sysctl, BBR).
  CHECK(net::sendRoom(window(400, 1, 60000), true) == 399 * 1448);
  CHECK(net::sendRoom(window(400, 0, 60000), false) == 400 * 1448);
  // An initial window's room holds one 8 KiB frame, not two, nor one 64 KiB frame (the WAN level's
  // segments are 8 KiB for this: docs/algorithms.md §12).
  const int64_t restarted = net::sendRoom(window(400, 0, 60000), true);
  CHECK(restarted >= (8 << 10) + 256);
  CHECK(restarted < 2 * ((8 << 10) + 256));
  CHECK(restarted < (64 << 10));
}

TEST_CASE("tcp window: a real connection's window is read from the kernel", "[tcp_window]") {
  asio::io_context io;
  net::Tcp::acceptor acceptor(io, net::Tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  net::Tcp::socket a(io), b(io);
  a.connect(acceptor.local_endpoint());
  acceptor.accept(b);
  net::TcpWindow w;
  REQUIRE(net::readTcpWindow(a.native_handle(), &w));
  CHECK(w.mss > 0);
  CHECK(w.cwnd >= 1);
  CHECK(w.rto_us > 0);
  CHECK(w.unacked == 0);  // nothing sent yet
  CHECK(w.min_rtt_us < 1000000);  // the handshake's sample on loopback, or 0 (none yet)
  const int fd = a.native_handle();
  auto channel = std::make_shared<net::DataChannel>(net::Link{std::move(a), {}, {}}, 1, "tx");
  // A fresh connection has its whole initial window free.
  const int64_t room = channel->sendRoom();
  CHECK(room == net::sendRoom(w, net::restartsAfterIdle(fd)));
  CHECK(room >= static_cast<int64_t>(w.mss));
  CHECK(room != net::kUnknownRoom);
  // A closed channel does not say.
  channel->close(Status::peerLost("test"));
  CHECK(channel->sendRoom() == net::kUnknownRoom);
  // Not a TCP socket: the kernel does not say.
  CHECK_FALSE(net::readTcpWindow(-1, &w));
}

TEST_CASE("tcp rto: every connection caps its retransmission backoff at 1 s where the kernel can", "[tcp_rto]") {
  // PCCL_TCP_RTO_MAX_MS unset (ctest): the default. A kernel before 6.15 has no such option: then the
  // socket keeps the kernel's cap and the option cannot be read either.
  CHECK(net::rtoMaxMs() == 1000);
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  net::capRetransmitBackoff(fd);
  int v = 0;
  socklen_t len = sizeof(v);
  if (::getsockopt(fd, IPPROTO_TCP, 44 /* TCP_RTO_MAX_MS */, &v, &len) == 0) {
    CHECK(v == 1000);
  } else {
    WARN("this kernel has no TCP_RTO_MAX_MS (Linux 6.15+): the cap is not applied here");
  }
  ::close(fd);
}
