// master/http_client (blocking HTTP/1.1 with deadlines, chunked bodies, keep-alive) against tiny local
// servers with canned answers: URLs, connect failures and timeouts, chunked and EOF-delimited bodies,
// kept-alive connections reopened, error statuses, malformed and oversized answers.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "master/http_client.hpp"
#include "net/asio.hpp"
#include "test_support.hpp"
#include "util/clock.hpp"

using namespace pccl;
using namespace pccl::test;
using pccl::master::HttpClient;

namespace {

// ---- a tiny HTTP server with canned answers ----

// Serves on 127.0.0.1:<ephemeral> from its own thread. Each request (headers + Content-Length body)
// gets the next canned response (the last one repeats), written in `piece`-byte writes; with
// close_after_each the connection is closed after each response; silent servers accept and never
// answer.
class CannedServer {
 public:
  struct Script {
    std::vector<std::string> responses;
    bool silent = false;
    bool close_after_each = false;
    size_t piece = 0;  // 0: the whole response in one write
  };

  explicit CannedServer(Script script) : script_(std::move(script)), acceptor_(io_) {
    asio::error_code ec;
    net::Tcp::endpoint ep(asio::ip::address_v4::loopback(), 0);
    acceptor_.open(ep.protocol(), ec);
    acceptor_.bind(ep, ec);
    acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    port_ = acceptor_.local_endpoint(ec).port();
    accept();
    thread_ = std::thread([this] { io_.run(); });
  }
  ~CannedServer() {
    io_.stop();
    thread_.join();
  }

  uint16_t port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int connections() const { return connections_.load(); }
  int requests() const { return requests_.load(); }
  std::string lastRequest() const {
    std::lock_guard<std::mutex> lock(mu_);
    return last_request_;
  }

 private:
  struct Session {
    explicit Session(asio::io_context& io) : socket(io) {}
    net::Tcp::socket socket;
    std::string in;
    std::string out;
    size_t written = 0;
    char buf[4096];
  };

  void accept() {
    auto s = std::make_shared<Session>(io_);
    acceptor_.async_accept(s->socket, [this, s](const asio::error_code& ec) {
      if (ec) return;
      ++connections_;
      sessions_.push_back(s);  // kept open until the server goes
      if (!script_.silent) readRequest(s);
      accept();
    });
  }

  void readRequest(const std::shared_ptr<Session>& s) {
    size_t end = s->in.find("\r\n\r\n");
    if (end != std::string::npos) {
      size_t length = 0;
      size_t cl = s->in.find("Content-Length: ");
      if (cl != std::string::npos && cl < end) length = std::stoul(s->in.substr(cl + 16));
      if (s->in.size() >= end + 4 + length) {
        {
          std::lock_guard<std::mutex> lock(mu_);
          last_request_ = s->in.substr(0, end + 4 + length);
        }
        s->in.erase(0, end + 4 + length);
        size_t i = static_cast<size_t>(requests_++);
        s->out = script_.responses[std::min(i, script_.responses.size() - 1)];
        s->written = 0;
        return writeResponse(s);
      }
    }
    s->socket.async_read_some(asio::buffer(s->buf), [this, s](const asio::error_code& ec, size_t n) {
      if (ec) return;
      s->in.append(s->buf, n);
      readRequest(s);
    });
  }

  void writeResponse(const std::shared_ptr<Session>& s) {
    if (s->written == s->out.size()) {
      if (script_.close_after_each) {
        asio::error_code ignore;
        s->socket.close(ignore);
        return;
      }
      return readRequest(s);
    }
    size_t n = script_.piece == 0 ? s->out.size() - s->written : std::min(script_.piece, s->out.size() - s->written);
    asio::async_write(s->socket, asio::buffer(s->out.data() + s->written, n), [this, s, n](const asio::error_code& ec, size_t) {
      if (ec) return;
      s->written += n;
      writeResponse(s);
    });
  }

  Script script_;
  asio::io_context io_;
  net::Tcp::acceptor acceptor_;
  uint16_t port_ = 0;
  std::vector<std::shared_ptr<Session>> sessions_;
  std::atomic<int> connections_{0};
  std::atomic<int> requests_{0};
  mutable std::mutex mu_;
  std::string last_request_;
  std::thread thread_;
};

std::string chunk(const std::string& data) {
  std::ostringstream o;
  o << std::hex << data.size() << "\r\n" << data << "\r\n";
  return o.str();
}

std::string lengthResponse(const std::string& body, const std::string& status = "200 OK") {
  return "HTTP/1.1 " + status + "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n\r\n" + body;
}

// A port nothing listens on (bound, then released).
uint16_t closedPort() {
  asio::io_context io;
  net::Tcp::acceptor a(io);
  asio::error_code ec;
  net::Tcp::endpoint ep(asio::ip::address_v4::loopback(), 0);
  a.open(ep.protocol(), ec);
  a.bind(ep, ec);
  return a.local_endpoint(ec).port();
}

}  // namespace

TEST_CASE("http client: URLs other than http://HOST:PORT are refused", "[http]") {
  auto https = HttpClient::create("https://127.0.0.1:2379");
  REQUIRE_FALSE(https.isOk());
  CHECK(https.status().code() == Code::kInvalidArgument);
  CHECK_THAT(https.status().message(), Catch::Contains("https is not supported"));
  for (const char* bad : {"127.0.0.1:2379", "http://127.0.0.1", "http://127.0.0.1:2379/v3", "http://:2379", "http://h:99999",
                          "ftp://h:1", "http://u@h:1"}) {
    INFO(bad);
    auto r = HttpClient::create(bad);
    REQUIRE_FALSE(r.isOk());
    CHECK(r.status().code() == Code::kInvalidArgument);
  }
  auto ok = master::parseHttpUrl("HTTP://[::1]:2379/");
  REQUIRE(ok.isOk());
  CHECK(ok->host == "::1");
  CHECK(ok->toString() == "http://[::1]:2379");
}

TEST_CASE("http client: a closed port fails quickly, naming the endpoint", "[http]") {
  const uint16_t port = closedPort();
  auto c = HttpClient::create("http://127.0.0.1:" + std::to_string(port), "etcd");
  REQUIRE(c.isOk());
  const auto start = Clock::now();
  auto r = (*c)->post("/v3/kv/range", "{}", Millis(20000));
  CHECK(secondsSince(start) < 10.0);  // refused, not timed out
  REQUIRE_FALSE(r.isOk());
  CHECK(r.status().code() == Code::kSystemError);
  CHECK_THAT(r.status().message(), Catch::Contains("etcd http://127.0.0.1:" + std::to_string(port)) && Catch::Contains("connect"));
}

TEST_CASE("http client: a server that accepts and never answers times out at the deadline", "[http]") {
  CannedServer::Script script;
  script.silent = true;
  CannedServer server(script);
  auto c = HttpClient::create(server.url(), "etcd");
  REQUIRE(c.isOk());
  for (int i = 0; i < 2; ++i) {  // the second call on a fresh connection: the timed-out one was closed
    const auto start = Clock::now();
    auto r = (*c)->post("/v3/kv/range", "{}", Millis(300));
    CHECK(secondsSince(start) >= 0.29);
    CHECK(secondsSince(start) < 10.0);
    REQUIRE_FALSE(r.isOk());
    CHECK(r.status().code() == Code::kTimeout);
    CHECK_THAT(r.status().message(), Catch::Contains(server.url()) && Catch::Contains("300 ms"));
    CHECK_FALSE((*c)->connected());
  }
  CHECK(server.connections() == 2);
}

TEST_CASE("http client: a connect that never completes (full accept queue) times out", "[http]") {
  // A listener with a backlog of 0 that never accepts: once its queue holds a connection, further
  // SYNs are dropped. Whether the client's connect hangs or its request does, the call times out.
  asio::io_context io;
  net::Tcp::acceptor a(io);
  asio::error_code ec;
  net::Tcp::endpoint ep(asio::ip::address_v4::loopback(), 0);
  a.open(ep.protocol(), ec);
  a.bind(ep, ec);
  a.listen(0, ec);
  const uint16_t port = a.local_endpoint(ec).port();
  struct Filler {  // a non-blocking connect left in progress (asio's connect() would wait for it)
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    ~Filler() {
      if (fd >= 0) ::close(fd);
    }
  };
  std::vector<std::unique_ptr<Filler>> fillers;
  for (int i = 0; i < 3; ++i) {
    fillers.push_back(std::make_unique<Filler>());
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(port);
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    (void)!::connect(fillers.back()->fd, reinterpret_cast<sockaddr*>(&to), sizeof(to));
  }
  auto c = HttpClient::create("http://127.0.0.1:" + std::to_string(port));
  REQUIRE(c.isOk());
  const auto start = Clock::now();
  auto r = (*c)->post("/", "{}", Millis(500));
  CHECK(secondsSince(start) < 10.0);
  REQUIRE_FALSE(r.isOk());
  INFO(r.status().message());
  CHECK(r.status().code() == Code::kTimeout);
}

TEST_CASE("http client: chunked bodies with extensions and trailers, over one kept-alive connection", "[http]") {
  const std::string chunked = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
                              "Trailer: Grpc-Trailer-Content-Type\r\n\r\n" +
                              chunk("{\"result\":") + "a;name=value\r\n{\"TTL\":\"5\"\r\n" + chunk("}\n") +
                              "0\r\nGrpc-Trailer-Content-Type: application/grpc\r\n\r\n";
  for (size_t piece : {size_t{0}, size_t{3}}) {  // whole, and dribbled in 3-byte writes
    INFO("piece " << piece);
    CannedServer::Script script;
    script.responses = {chunked, lengthResponse("{\"n\":1}"), chunked};
    script.piece = piece;
    CannedServer server(script);
    auto c = HttpClient::create(server.url(), "etcd");
    REQUIRE(c.isOk());
    for (int i = 0; i < 3; ++i) {
      auto r = (*c)->post("/v3/lease/keepalive", "{\"ID\":\"1\"}", Millis(10000));
      REQUIRE(r.isOk());
      CHECK(r->status == 200);
      CHECK(r->body == (i == 1 ? "{\"n\":1}" : "{\"result\":{\"TTL\":\"5\"}\n"));
      REQUIRE(r->header("content-type") != nullptr);
      CHECK(*r->header("content-type") == "application/json");
      CHECK((*c)->connected());
    }
    CHECK(server.connections() == 1);
    CHECK(server.requests() == 3);
    const std::string req = server.lastRequest();
    CHECK_THAT(req, Catch::StartsWith("POST /v3/lease/keepalive HTTP/1.1\r\n") && Catch::Contains("\r\nHost: 127.0.0.1:") &&
                        Catch::Contains("\r\nContent-Length: 10\r\n") && Catch::EndsWith("\r\n\r\n{\"ID\":\"1\"}"));
  }
}

TEST_CASE("http client: a kept-alive connection the server closed is reopened once", "[http]") {
  CannedServer::Script script;
  script.responses = {lengthResponse("{\"a\":1}"), lengthResponse("{\"a\":2}")};
  script.close_after_each = true;  // without saying Connection: close
  CannedServer server(script);
  auto c = HttpClient::create(server.url());
  REQUIRE(c.isOk());
  auto first = (*c)->post("/x", "{}", Millis(10000));
  REQUIRE(first.isOk());
  CHECK(first->body == "{\"a\":1}");
  auto second = (*c)->post("/x", "{}", Millis(10000));
  REQUIRE(second.isOk());
  CHECK(second->body == "{\"a\":2}");
  CHECK(server.connections() == 2);
}

TEST_CASE("http client: error statuses, Connection: close, malformed and oversized answers", "[http]") {
  SECTION("non-2xx: post() fails with the status and the body, request() returns it") {
    CannedServer::Script script;
    script.responses = {lengthResponse("{\"error\":\"boom\"}\n", "503 Service Unavailable")};
    CannedServer server(script);
    auto c = HttpClient::create(server.url(), "etcd");
    REQUIRE(c.isOk());
    auto r = (*c)->post("/x", "{}", Millis(10000));
    REQUIRE_FALSE(r.isOk());
    CHECK(r.status().code() == Code::kSystemError);
    CHECK(r.status().message() == "etcd " + server.url() + " answered HTTP 503: {\"error\":\"boom\"}");
    auto any = (*c)->request("/x", "{}", Millis(10000));
    REQUIRE(any.isOk());
    CHECK(any->status == 503);
    CHECK(server.connections() == 1);  // an error status keeps the connection
  }
  SECTION("Connection: close and a body up to EOF") {
    CannedServer::Script script;
    script.responses = {"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nConnection: close\r\n\r\n{\"eof\":true}"};
    script.close_after_each = true;
    CannedServer server(script);
    auto c = HttpClient::create(server.url());
    REQUIRE(c.isOk());
    auto r = (*c)->post("/x", "{}", Millis(10000));
    REQUIRE(r.isOk());
    CHECK(r->body == "{\"eof\":true}");
    CHECK_FALSE((*c)->connected());
  }
  SECTION("malformed answers are protocol errors") {
    for (const std::string& bad : {std::string("HTTP/2 200 OK\r\n\r\n"), std::string("HTTP/1.1 200 OK\r\nbad header\r\n\r\n"),
                                   std::string("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"),
                                   std::string("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX"),
                                   std::string("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n"),
                                   std::string("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n")}) {
      INFO(bad);
      CannedServer::Script script;
      script.responses = {bad};
      script.close_after_each = true;
      CannedServer server(script);
      auto c = HttpClient::create(server.url());
      REQUIRE(c.isOk());
      auto r = (*c)->post("/x", "{}", Millis(10000));
      REQUIRE_FALSE(r.isOk());
      CHECK(r.status().code() == Code::kProtocolError);
    }
  }
  SECTION("a body over the limit is refused") {
    CannedServer::Script script;
    script.responses = {"HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(master::kMaxResponseBytes + 1) + "\r\n\r\n",
                        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk(std::string(master::kMaxResponseBytes, 'x')) +
                            chunk("y") + "0\r\n\r\n"};
    CannedServer server(script);
    auto c = HttpClient::create(server.url());
    REQUIRE(c.isOk());
    for (int i = 0; i < 2; ++i) {
      auto r = (*c)->post("/x", "{}", Millis(20000));
      REQUIRE_FALSE(r.isOk());
      CHECK(r.status().code() == Code::kProtocolError);
      CHECK_THAT(r.status().message(), Catch::Contains("limit") || Catch::Contains("larger than"));
    }
  }
}
