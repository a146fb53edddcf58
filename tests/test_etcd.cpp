// The etcd client for master leadership and what it stands on: util/json (strict parser, serializer,
// base64), master/http_client (HTTP/1.1 with deadlines, chunked bodies, keep-alive) against tiny local
// servers, and master/etcd_client against a real etcd on loopback (skipped with a warning when no
// etcd binary is installed).
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "master/etcd_client.hpp"
#include "master/http_client.hpp"
#include "net/asio.hpp"
#include "test_support.hpp"
#include "util/clock.hpp"
#include "util/json.hpp"

using namespace pccl;
using namespace pccl::test;
using pccl::master::EtcdClient;
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

// ---- a real etcd ----

std::optional<std::string> findEtcd() {
  std::vector<std::string> dirs;
  if (const char* path = std::getenv("PATH")) {
    std::stringstream ss(path);
    for (std::string d; std::getline(ss, d, ':');) {
      if (!d.empty()) dirs.push_back(d);
    }
  }
  dirs.push_back("/usr/bin");
  for (const auto& d : dirs) {
    std::string candidate = d + "/etcd";
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return std::nullopt;
}

std::string shellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// One etcd member on loopback in a fresh temporary directory (its data and its log); killed and the
// directory removed on destruction. Ready once a range request answers.
class EtcdServer {
 public:
  explicit EtcdServer(const std::string& binary) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "pccl-etcd-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) return;
    dir_ = tmpl;
    for (int attempt = 0; attempt < 3 && !ready_; ++attempt) start(binary);  // a port taken meanwhile: again
  }
  ~EtcdServer() {
    child_.reset();  // SIGKILL and reap
    if (!dir_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(dir_, ec);
    }
  }

  bool ready() const { return ready_; }
  const std::string& url() const { return url_; }
  std::string logTail() const {
    std::ifstream f(dir_ + "/etcd.log");
    std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    return all.size() > 3000 ? all.substr(all.size() - 3000) : all;
  }

 private:
  void start(const std::string& binary) {
    child_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_ + "/data", ec);
    const std::string client = "http://127.0.0.1:" + std::to_string(closedPort());
    const std::string peer = "http://127.0.0.1:" + std::to_string(closedPort());
    std::string cmd = "exec " + shellQuote(binary) + " --name t --data-dir " + shellQuote(dir_ + "/data") +
                      " --listen-client-urls " + client + " --advertise-client-urls " + client +
                      " --listen-peer-urls " + peer + " --initial-advertise-peer-urls " + peer +
                      " --initial-cluster t=" + peer + " >" + shellQuote(dir_ + "/etcd.log") + " 2>&1";
    child_ = std::make_unique<ChildProcess>(std::vector<std::string>{"/bin/sh", "-c", cmd});
    auto probe = EtcdClient::create(client, Millis(1000));
    if (!probe.isOk()) return;
    // Polls while the external process boots; a short pause between attempts.
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    while (Clock::now() < deadline) {
      if ((*probe)->get("pccl-ready-probe").isOk()) {
        ready_ = true;
        url_ = client;
        return;
      }
      if (child_->waitExit(0) >= 0) return;  // exited: a port clash, or a broken install
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

  std::string dir_;
  std::string url_;
  bool ready_ = false;
  std::unique_ptr<ChildProcess> child_;
};

// An etcd and a client for a test case, or nothing (and a warning) when etcd is not installed.
struct EtcdFixture {
  std::unique_ptr<EtcdServer> server;
  std::unique_ptr<EtcdClient> client;
};

std::optional<EtcdFixture> startEtcd() {
  auto binary = findEtcd();
  if (!binary) {
    WARN("etcd not installed: apt-get install etcd-server (skipping)");
    return std::nullopt;
  }
  EtcdFixture f;
  f.server = std::make_unique<EtcdServer>(*binary);
  INFO(f.server->logTail());
  REQUIRE(f.server->ready());
  auto c = EtcdClient::create(f.server->url(), Millis(5000));
  REQUIRE(c.isOk());
  f.client = std::move(c).value();
  return f;
}

}  // namespace

// ---- JSON ----

TEST_CASE("json: parse and serialize round trip", "[etcd][json]") {
  const std::vector<std::string> texts = {
      "null", "true", "false", "0", "-0", "12", "-9223372036854775808", "1.5e+300", "2E-3", "0.25",
      R"("")", R"("a\"b\\c\n\t\u0001")", "[]", "{}", R"([1,"x",[true,null],{"k":{}}])",
      R"({"header":{"revision":"7"},"kvs":[{"key":"Zm9v","lease":"4111120266901442568"}],"count":"1"})"};
  for (const auto& t : texts) {
    INFO(t);
    auto v = json::parse(t);
    REQUIRE(v.isOk());
    CHECK(v->serialize() == t);
    auto again = json::parse(v->serialize());
    REQUIRE(again.isOk());
    CHECK(*again == *v);
  }
  auto spaced = json::parse(" \t\r\n{ \"a\" : [ 1 , 2 ] , \"b\" : null }\n ");
  REQUIRE(spaced.isOk());
  CHECK(spaced->serialize() == R"({"a":[1,2],"b":null})");
  CHECK(spaced->find("a")->at(1).asInt64() == 2);
  CHECK(spaced->find("b")->isNull());
  CHECK(spaced->find("c") == nullptr);

  auto big = json::parse("[9223372036854775807, 9223372036854775808, 1.0, 3e2, -17]");
  REQUIRE(big.isOk());
  CHECK(big->at(0).asInt64() == INT64_MAX);
  CHECK_FALSE(big->at(1).asInt64().has_value());  // out of range: the text survives
  CHECK(big->at(1).numberText() == "9223372036854775808");
  CHECK_FALSE(big->at(2).asInt64().has_value());
  CHECK(big->at(2).asDouble() == 1.0);
  CHECK(big->at(3).asDouble() == 300.0);
  CHECK(big->at(4).asInt64() == -17);

  json::Value built = json::Value::object();
  built.set("s", json::Value::string("line\nquote\"\x1f")).set("n", json::Value::integer(-5));
  built.set("d", json::Value::real(0.1)).set("inf", json::Value::real(std::numeric_limits<double>::infinity())).set("n", json::Value::integer(6));
  built.set("a", json::Value::array()).set("b", json::Value::boolean(true));
  CHECK(built.serialize() == R"({"s":"line\nquote\"\u001f","n":6,"d":0.1,"inf":null,"a":[],"b":true})");
  auto back = json::parse(built.serialize());
  REQUIRE(back.isOk());
  CHECK(*back == built);
  CHECK(back->find("s")->asString() == "line\nquote\"\x1f");
  CHECK(json::quote("\b\f\r\t/\x7f") == "\"\\b\\f\\r\\t/\x7f\"");
}

TEST_CASE("json: unicode escapes and surrogate pairs decode to UTF-8", "[etcd][json]") {
  auto v = json::parse(R"("\u0041\u00e9\u20ac\ud83d\ude00\/")");
  REQUIRE(v.isOk());
  CHECK(v->asString() == "A\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80/");
  auto raw = json::parse("\"\xc3\xa9\xf0\x9f\x98\x80\"");  // raw UTF-8 passes through
  REQUIRE(raw.isOk());
  CHECK(raw->asString() == "\xc3\xa9\xf0\x9f\x98\x80");
  CHECK(raw->serialize() == "\"\xc3\xa9\xf0\x9f\x98\x80\"");
}

TEST_CASE("json: the strict parser rejects malformed input and says where", "[etcd][json]") {
  struct Bad {
    std::string text;
    std::string why;
    size_t offset;
  };
  const std::vector<Bad> cases = {
      {"", "unexpected end", 0},
      {"[1,]", "unexpected character", 3},
      {"{\"a\":1,}", "expected a string key", 7},
      {"01", "leading zero", 1},
      {"1.", "digit after '.'", 2},
      {"-", "truncated number", 1},
      {"1e", "exponent", 2},
      {"+1", "unexpected character", 0},
      {"nul", "invalid literal", 0},
      {"'a'", "unexpected character", 0},
      {"[1] x", "trailing characters", 4},
      {"{} {}", "trailing characters", 3},
      {"\"abc", "unterminated string", 0},
      {"\"a\nb\"", "control character", 2},
      {"\"\\x\"", "invalid escape", 1},
      {"\"\\u12g4\"", "invalid hex digit", 5},
      {"\"\\ud800\"", "unpaired high surrogate", 1},
      {"\"\\ud800\\u0041\"", "not followed by a low", 1},
      {"\"\\udc00\"", "unpaired low surrogate", 1},
      {"\"\xc3", "truncated UTF-8", 1},
      {"\"\xc0\xaf\"", "invalid UTF-8", 1},
      {"\"\xe0\x80\xaf\"", "overlong", 1},
      {"\"\xed\xa0\x80\"", "invalid code point", 1},
      {"\"\xff\"", "invalid UTF-8", 1},
      {"{\"a\":1,\"a\":2}", "duplicate key", 0},
      {"[1 2]", "expected ',' or ']'", 3},
      {"{\"a\" 1}", "expected ':'", 5},
      {"/*c*/1", "unexpected character", 0},
  };
  for (const auto& c : cases) {
    INFO(c.text);
    auto r = json::parse(c.text);
    REQUIRE_FALSE(r.isOk());
    CHECK(r.status().code() == Code::kProtocolError);
    CHECK_THAT(r.status().message(), Catch::Contains(c.why) && Catch::EndsWith("at offset " + std::to_string(c.offset)));
  }
}

TEST_CASE("json: nesting beyond the depth limit is refused, at the limit accepted", "[etcd][json]") {
  json::ParseLimits limits;
  limits.max_depth = 16;
  CHECK(json::parse(std::string(16, '[') + std::string(16, ']'), limits).isOk());
  auto deep = json::parse(std::string(17, '[') + std::string(17, ']'), limits);
  REQUIRE_FALSE(deep.isOk());
  CHECK_THAT(deep.status().message(), Catch::Contains("nesting deeper than 16"));
  // The default limit guards the stack against a hostile answer.
  auto hostile = json::parse(std::string(100000, '['));
  REQUIRE_FALSE(hostile.isOk());
  CHECK_THAT(hostile.status().message(), Catch::Contains("nesting deeper"));
  limits.max_bytes = 4;
  CHECK_FALSE(json::parse("[1,2]", limits).isOk());
}

TEST_CASE("base64: RFC 4648 vectors, every byte value, strict decoding", "[etcd][json]") {
  const std::vector<std::pair<std::string, std::string>> vectors = {
      {"", ""}, {"f", "Zg=="}, {"fo", "Zm8="}, {"foo", "Zm9v"}, {"foob", "Zm9vYg=="}, {"fooba", "Zm9vYmE="}, {"foobar", "Zm9vYmFy"}};
  for (const auto& [plain, encoded] : vectors) {
    CHECK(base64Encode(plain) == encoded);
    auto d = base64Decode(encoded);
    REQUIRE(d.isOk());
    CHECK(*d == plain);
  }
  std::string all;
  for (int i = 0; i < 256; ++i) all.push_back(static_cast<char>(i));
  for (size_t n = 0; n <= all.size(); n += 37) {
    auto d = base64Decode(base64Encode(all.substr(0, n)));
    REQUIRE(d.isOk());
    CHECK(*d == all.substr(0, n));
  }
  CHECK(base64Encode("\xfb\xff") == "+/8=");
  for (const char* bad : {"Zg=", "Zg", "Z===", "Zm9v=", "Zm=v", "Zm9v Yg==", "Zh==", "Zm9=", "Zm-v", "====", "Zg==Zg=="}) {
    INFO(bad);
    auto d = base64Decode(bad);
    REQUIRE_FALSE(d.isOk());
    CHECK(d.status().code() == Code::kInvalidArgument);
  }
}

// ---- the HTTP client ----

TEST_CASE("http client: URLs other than http://HOST:PORT are refused", "[etcd][http]") {
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

TEST_CASE("http client: a closed port fails quickly, naming the endpoint", "[etcd][http]") {
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

TEST_CASE("http client: a server that accepts and never answers times out at the deadline", "[etcd][http]") {
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

TEST_CASE("http client: a connect that never completes (full accept queue) times out", "[etcd][http]") {
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

TEST_CASE("http client: chunked bodies with extensions and trailers, over one kept-alive connection", "[etcd][http]") {
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

TEST_CASE("http client: a kept-alive connection the server closed is reopened once", "[etcd][http]") {
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

TEST_CASE("http client: error statuses, Connection: close, malformed and oversized answers", "[etcd][http]") {
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

// ---- against a real etcd ----

TEST_CASE("etcd: lease grant, keepalive and revoke, a leased key goes with its lease", "[etcd]") {
  auto f = startEtcd();
  if (!f) return;
  EtcdClient& c = *f->client;
  auto lease = c.grantLease(30);
  REQUIRE(lease.isOk());
  CHECK(*lease > 0);
  auto ttl = c.keepAlive(*lease);
  REQUIRE(ttl.isOk());
  CHECK(*ttl > 0);
  CHECK(*ttl <= 30);
  auto put = c.putIfAbsent("/pccl/leader", "master-a", *lease);
  REQUIRE(put.isOk());
  CHECK(put->succeeded);
  auto got = c.get("/pccl/leader");
  REQUIRE(got.isOk());
  REQUIRE(got->has_value());
  CHECK((*got)->value == "master-a");
  CHECK((*got)->lease == *lease);
  CHECK(c.revokeLease(*lease).isOk());
  auto gone = c.keepAlive(*lease);
  REQUIRE(gone.isOk());
  CHECK(*gone == 0);
  got = c.get("/pccl/leader");
  REQUIRE(got.isOk());
  CHECK_FALSE(got->has_value());
  CHECK(c.revokeLease(*lease).isOk());  // etcd answers 404 "lease not found": not an error here
  auto stale = c.putIfAbsent("/pccl/leader", "master-a", *lease);  // a put on a lease that is gone
  REQUIRE_FALSE(stale.isOk());
  CHECK(stale.status().code() == Code::kSystemError);
  CHECK_THAT(stale.status().message(), Catch::Contains("HTTP 404") && Catch::Contains("requested lease not found"));
  auto bad = c.keepAlive(0);
  REQUIRE_FALSE(bad.isOk());
  CHECK(bad.status().code() == Code::kInvalidArgument);
}

TEST_CASE("etcd: putIfAbsent twice, the second fails and names the holder", "[etcd]") {
  auto f = startEtcd();
  if (!f) return;
  EtcdClient& c = *f->client;
  auto first = c.putIfAbsent("/pccl/leader", "master-a", 0);
  REQUIRE(first.isOk());
  CHECK(first->succeeded);
  CHECK_FALSE(first->current.has_value());
  CHECK(first->revision > 1);
  CHECK(c.lastRevision() == first->revision);
  auto second = c.putIfAbsent("/pccl/leader", "master-b", 0);
  REQUIRE(second.isOk());
  CHECK_FALSE(second->succeeded);
  CHECK(second->revision == first->revision);
  REQUIRE(second->current.has_value());
  CHECK(second->current->key == "/pccl/leader");
  CHECK(second->current->value == "master-a");
  CHECK(second->current->create_revision == first->revision);
  CHECK(second->current->mod_revision == first->revision);
  CHECK(second->current->version == 1);
  CHECK(second->current->lease == 0);
  auto empty = c.get("");
  REQUIRE_FALSE(empty.isOk());
  CHECK(empty.status().code() == Code::kInvalidArgument);
}

TEST_CASE("etcd: putIfModRevision and deleteIfModRevision compare and set", "[etcd]") {
  auto f = startEtcd();
  if (!f) return;
  EtcdClient& c = *f->client;
  const std::string key = "/pccl/cas";
  auto created = c.putIfModRevision(key, "a", 0, 0);  // 0: only if absent
  REQUIRE(created.isOk());
  REQUIRE(created->succeeded);
  const int64_t rev1 = created->revision;
  auto moved = c.putIfModRevision(key, "b", rev1, 0);
  REQUIRE(moved.isOk());
  CHECK(moved->succeeded);
  const int64_t rev2 = moved->revision;
  CHECK(rev2 > rev1);
  auto stale = c.putIfModRevision(key, "c", rev1, 0);
  REQUIRE(stale.isOk());
  CHECK_FALSE(stale->succeeded);
  REQUIRE(stale->current.has_value());
  CHECK(stale->current->value == "b");
  CHECK(stale->current->mod_revision == rev2);
  CHECK(stale->current->create_revision == rev1);
  CHECK(stale->current->version == 2);
  auto exists = c.putIfModRevision(key, "c", 0, 0);
  REQUIRE(exists.isOk());
  CHECK_FALSE(exists->succeeded);
  auto stale_delete = c.deleteIfModRevision(key, rev1);
  REQUIRE(stale_delete.isOk());
  CHECK_FALSE(stale_delete->succeeded);
  REQUIRE(stale_delete->current.has_value());
  CHECK(stale_delete->current->value == "b");
  auto deleted = c.deleteIfModRevision(key, rev2);
  REQUIRE(deleted.isOk());
  CHECK(deleted->succeeded);
  auto got = c.get(key);
  REQUIRE(got.isOk());
  CHECK_FALSE(got->has_value());
  auto absent = c.putIfModRevision(key, "d", rev2, 0);  // the key is gone: fails, nobody holds it
  REQUIRE(absent.isOk());
  CHECK_FALSE(absent->succeeded);
  CHECK_FALSE(absent->current.has_value());
  // Arbitrary bytes in keys and values (base64 on the wire); an empty value comes back empty.
  std::string bytes;
  for (int i = 0; i < 256; ++i) bytes.push_back(static_cast<char>(i));
  const std::string binary_key = std::string("\0\xff/k", 4);
  auto put = c.putIfAbsent(binary_key, bytes, 0);
  REQUIRE(put.isOk());
  CHECK(put->succeeded);
  auto back = c.get(binary_key);
  REQUIRE(back.isOk());
  REQUIRE(back->has_value());
  CHECK((*back)->key == binary_key);
  CHECK((*back)->value == bytes);
  auto empty = c.putIfAbsent("/pccl/empty", "", 0);
  REQUIRE(empty.isOk());
  auto empty_back = c.get("/pccl/empty");
  REQUIRE(empty_back.isOk());
  REQUIRE(empty_back->has_value());
  CHECK((*empty_back)->value.empty());
}

TEST_CASE("etcd: a lease that is not kept alive expires and takes its key", "[etcd]") {
  auto f = startEtcd();
  if (!f) return;
  EtcdClient& c = *f->client;
  auto lease = c.grantLease(1);  // etcd raises it to its minimum TTL (2 s with the default timings)
  REQUIRE(lease.isOk());
  auto put = c.putIfAbsent("/pccl/leader", "master-a", *lease);
  REQUIRE(put.isOk());
  REQUIRE(put->succeeded);
  const auto start = Clock::now();
  bool gone = false;
  while (!gone && secondsSince(start) < 15.0) {
    auto got = c.get("/pccl/leader");
    REQUIRE(got.isOk());
    gone = !got->has_value();
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  CHECK(gone);
  auto ttl = c.keepAlive(*lease);
  REQUIRE(ttl.isOk());
  CHECK(*ttl == 0);
  // Someone else may take the key now.
  auto next = c.putIfAbsent("/pccl/leader", "master-b", 0);
  REQUIRE(next.isOk());
  CHECK(next->succeeded);
}

TEST_CASE("etcd: gateway errors come back as SystemError naming the endpoint", "[etcd]") {
  auto f = startEtcd();
  if (!f) return;
  auto http = HttpClient::create(f->server->url(), "etcd");
  REQUIRE(http.isOk());
  auto missing = (*http)->post("/v3/no/such/path", "{}", Millis(5000));
  REQUIRE_FALSE(missing.isOk());
  CHECK(missing.status().code() == Code::kSystemError);
  CHECK_THAT(missing.status().message(), Catch::Contains("etcd " + f->server->url() + " answered HTTP 404"));
  auto bad_key = (*http)->post("/v3/kv/range", "{\"key\":\"!!\"}", Millis(5000));
  REQUIRE_FALSE(bad_key.isOk());
  CHECK_THAT(bad_key.status().message(), Catch::Contains("answered HTTP 400") && Catch::Contains("base64"));
  // The client's connection survives error answers: the same one serves the next call.
  auto fine = (*http)->post("/v3/kv/range", "{\"key\":\"Zm9v\"}", Millis(5000));
  REQUIRE(fine.isOk());
  auto answer = json::parse(fine->body);
  REQUIRE(answer.isOk());
  CHECK(answer->find("header") != nullptr);
}
