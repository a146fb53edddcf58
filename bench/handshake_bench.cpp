// pccl-handshake-bench: what one authenticated handshake (net/handshake.hpp, docs/protocol.md §6) costs.
// Runs N handshakes over loopback, client and server on one io thread (so the time is both ends' CPU
// plus four loopback hops), for an open run, a run with a secret, and an encrypted run, and prints the
// median and the 10th/90th percentiles in microseconds. The TCP connect is not timed.
//   pccl-handshake-bench [N]      (default 2000)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "net/asio.hpp"
#include "net/auth.hpp"
#include "net/handshake.hpp"

using namespace pccl;

namespace {

using Clock = std::chrono::steady_clock;

// One handshake on a fresh loopback connection; its duration in µs, or a negative value on failure.
double timeOne(asio::io_context& io, net::Tcp::acceptor& acceptor, const std::shared_ptr<const net::AuthKey>& key) {
  net::Tcp::socket client(io), server(io);
  asio::error_code ec;
  client.connect(acceptor.local_endpoint(), ec);
  if (!ec) acceptor.accept(server, ec);
  if (ec) return -1;
  int done = 0;
  bool ok = true;
  const auto t0 = Clock::now();
  net::asyncClientHandshake(std::move(client), net::ClientHandshake{wire::Role::kPeerToPeer, key, Millis(5000), "bench"},
                            [&](Result<net::Link> r) {
                              ok = ok && r.isOk();
                              ++done;
                            });
  net::asyncServerHandshake(std::move(server), net::ServerHandshake{key, Millis(5000)},
                            [&](Result<net::Authenticated> r) {
                              ok = ok && r.isOk();
                              ++done;
                            });
  io.restart();
  while (done < 2 && io.run_one() > 0) {
  }
  const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  io.restart();
  io.poll();  // the handshakes' own timers and closes
  return ok && done == 2 ? us : -1;
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(p * static_cast<double>(v.size() - 1))];
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 2000;
  if (n < 1 || !net::initCrypto().isOk()) return 2;
  asio::io_context io;
  net::Tcp::acceptor acceptor(io, net::Tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  struct Mode {
    const char* name;
    std::shared_ptr<const net::AuthKey> key;
  };
  const Mode modes[] = {{"open", std::make_shared<net::AuthKey>("")},
                        {"secret", std::make_shared<net::AuthKey>("bench-secret")},
                        {"encrypted", std::make_shared<net::AuthKey>("bench-secret", true)}};
  std::printf("protocol version %u, %d handshakes per mode, client and server on one thread\n",
              static_cast<unsigned>(wire::kProtocolVersion), n);
  std::printf("%-10s %10s %10s %10s\n", "mode", "p10_us", "median_us", "p90_us");
  for (const Mode& m : modes) {
    for (int i = 0; i < n / 10 + 1; ++i) (void)timeOne(io, acceptor, m.key);  // warm-up
    std::vector<double> us;
    us.reserve(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      const double t = timeOne(io, acceptor, m.key);
      if (t < 0) {
        std::fprintf(stderr, "handshake failed (%s)\n", m.name);
        return 1;
      }
      us.push_back(t);
    }
    std::printf("%-10s %10.1f %10.1f %10.1f\n", m.name, percentile(us, 0.1), percentile(us, 0.5), percentile(us, 0.9));
  }
  return 0;
}
