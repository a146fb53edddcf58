#include "master/http_client.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>

#include "net/endpoint.hpp"

namespace pccl::master {

namespace {

constexpr size_t kReadChunk = 64u << 10;

// What one asynchronous operation reports; shared with its handler, so a handler that runs after the
// call gave up (a resolve past its deadline) writes into memory that still exists.
struct OpResult {
  bool done = false;
  asio::error_code ec;
  size_t bytes = 0;
  net::Tcp::resolver::results_type endpoints;
};

std::string toLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Whether the comma-separated header value lists `token` (case-insensitive).
bool hasToken(const std::string* value, std::string_view token) {
  if (value == nullptr) return false;
  std::string_view rest = *value;
  while (!rest.empty()) {
    size_t comma = rest.find(',');
    if (toLower(trim(rest.substr(0, comma))) == token) return true;
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return false;
}

// At most 200 bytes of a body for an error message, control characters replaced.
std::string excerpt(std::string_view body) {
  body = trim(body);
  while (!body.empty() && (body.back() == '\n' || body.back() == '\r')) body.remove_suffix(1);
  std::string out(body.substr(0, 200));
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  }
  if (body.size() > 200) out += "...";
  return out;
}

// "HTTP/1.1 200 OK" -> 200, and whether it is HTTP/1.0.
bool parseStatusLine(std::string_view line, int* status, bool* http10) {
  if (line.size() < 12 || line.substr(0, 7) != "HTTP/1." || line[8] != ' ') return false;
  if (line[7] != '0' && line[7] != '1') return false;
  *http10 = line[7] == '0';
  std::string_view code = line.substr(9, 3);
  if (!std::all_of(code.begin(), code.end(), [](char c) { return c >= '0' && c <= '9'; })) return false;
  if (line.size() > 12 && line[12] != ' ') return false;
  *status = (code[0] - '0') * 100 + (code[1] - '0') * 10 + (code[2] - '0');
  return true;
}

// A chunk-size line: hex digits, then optional extensions after ';'.
bool parseChunkSize(std::string_view line, size_t* size) {
  line = trim(line.substr(0, line.find(';')));
  if (line.empty() || line.size() > 15) return false;
  auto [ptr, ec] = std::from_chars(line.data(), line.data() + line.size(), *size, 16);
  return ec == std::errc() && ptr == line.data() + line.size();
}

}  // namespace

const std::string* HttpResponse::header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (k == name) return &v;
  }
  return nullptr;
}

std::string HttpUrl::toString() const {
  return "http://" + net::HostPort{host, port}.toString();
}

Result<HttpUrl> parseHttpUrl(const std::string& url) {
  std::string lower = toLower(url);
  if (lower.rfind("https://", 0) == 0) {
    return Status::invalidArgument("URL '" + url + "': https is not supported (TLS is not implemented); use http://HOST:PORT");
  }
  if (lower.rfind("http://", 0) != 0) return Status::invalidArgument("URL '" + url + "' is not http://HOST:PORT");
  std::string rest = url.substr(7);
  if (!rest.empty() && rest.back() == '/') rest.pop_back();
  if (rest.find_first_of("/?#@ ") != std::string::npos) {
    return Status::invalidArgument("URL '" + url + "' is not http://HOST:PORT (no path, query or user info)");
  }
  auto hp = net::parseHostPort(rest, "URL");
  if (!hp.isOk()) return hp.status();
  if (hp->port == 0) return Status::invalidArgument("URL '" + url + "': port 0");
  return HttpUrl{hp->host, hp->port};
}

Result<std::unique_ptr<HttpClient>> HttpClient::create(const std::string& url, std::string service) {
  auto parsed = parseHttpUrl(url);
  if (!parsed.isOk()) return parsed.status();
  return std::unique_ptr<HttpClient>(new HttpClient(std::move(parsed).value(), std::move(service)));
}

HttpClient::HttpClient(HttpUrl url, std::string service)
    : url_(std::move(url)), service_(std::move(service)), socket_(io_) {}

HttpClient::~HttpClient() { closeConnection(); }

std::string HttpClient::name() const { return service_ + " " + url_.toString(); }

Status HttpClient::statusError(const HttpResponse& response) const {
  return Status::systemError(fmt::format("{} answered HTTP {}: {}", name(), response.status, excerpt(response.body)));
}

Status HttpClient::ioError(const char* what, const asio::error_code& ec) const {
  return Status::systemError(fmt::format("{}: {} failed: {}", name(), what, ec.message()));
}

Status HttpClient::timeoutError(const char* what) const {
  return Status::timeout(fmt::format("{}: no answer within {} ms ({})", name(), timeout_.count(), what));
}

void HttpClient::closeConnection() {
  asio::error_code ignore;
  socket_.shutdown(net::Tcp::socket::shutdown_both, ignore);
  socket_.close(ignore);
  in_.clear();
}

bool HttpClient::runUntil(const bool& done, TimePoint deadline) {
  io_.restart();
  while (!done) {
    auto now = Clock::now();
    if (now >= deadline) break;
    io_.run_one_for(deadline - now);
  }
  if (done) return true;
  // Closing the socket completes its pending operation with operation_aborted; run that handler now.
  closeConnection();
  io_.restart();
  io_.poll();
  return false;
}

Status HttpClient::ensureConnected(TimePoint deadline) {
  if (socket_.is_open()) return Status::ok();
  std::vector<net::Tcp::endpoint> candidates;
  asio::error_code ec;
  auto address = asio::ip::make_address(url_.host, ec);
  if (!ec) {
    candidates.emplace_back(address, url_.port);
  } else {
    auto op = std::make_shared<OpResult>();
    net::Tcp::resolver resolver(io_);
    resolver.async_resolve(url_.host, std::to_string(url_.port),
                           [op](const asio::error_code& e, net::Tcp::resolver::results_type r) {
                             op->done = true;
                             op->ec = e;
                             op->endpoints = std::move(r);
                           });
    if (!runUntil(op->done, deadline)) {
      resolver.cancel();  // its handler may still run later, into *op
      return timeoutError("resolving the host");
    }
    if (op->ec) return ioError("resolving the host", op->ec);
    for (const auto& entry : op->endpoints) candidates.push_back(entry.endpoint());
  }
  Status last = Status::systemError(name() + ": the host resolved to no address");
  for (const auto& endpoint : candidates) {
    auto op = std::make_shared<OpResult>();
    socket_.async_connect(endpoint, [op](const asio::error_code& e) {
      op->done = true;
      op->ec = e;
    });
    if (!runUntil(op->done, deadline)) return timeoutError("connecting");
    if (!op->ec) {
      net::tuneSocket(socket_);
      return Status::ok();
    }
    asio::error_code ignore;
    socket_.close(ignore);
    last = ioError("connect", op->ec);
  }
  return last;
}

Status HttpClient::readMore(TimePoint deadline, bool* eof) {
  *eof = false;
  if (in_.size() > kMaxResponseBytes + kMaxResponseHeaderBytes) {
    return Status::protocol(fmt::format("{}: response larger than {} bytes", name(), kMaxResponseBytes));
  }
  size_t old = in_.size();
  in_.resize(old + kReadChunk);
  auto op = std::make_shared<OpResult>();
  socket_.async_read_some(asio::buffer(&in_[old], kReadChunk), [op](const asio::error_code& e, size_t n) {
    op->done = true;
    op->ec = e;
    op->bytes = n;
  });
  if (!runUntil(op->done, deadline)) return timeoutError("reading the response");  // in_ is cleared
  in_.resize(old + op->bytes);
  if (op->ec == asio::error::eof) {
    *eof = true;
    return Status::ok();
  }
  if (op->ec) return ioError("read", op->ec);
  return Status::ok();
}

Result<HttpResponse> HttpClient::readResponse(TimePoint deadline, bool* nothing_back) {
  HttpResponse r;
  bool http10 = false;
  // Status line and headers; informational (1xx) responses are skipped.
  for (;;) {
    size_t end;
    while ((end = in_.find("\r\n\r\n")) == std::string::npos) {
      if (in_.size() > kMaxResponseHeaderBytes) {
        return Status::protocol(fmt::format("{}: response headers longer than {} bytes", name(), kMaxResponseHeaderBytes));
      }
      bool eof;
      Status st = readMore(deadline, &eof);
      if (!in_.empty()) *nothing_back = false;
      PCCL_RETURN_IF_ERROR(st);
      if (eof) {
        if (in_.empty()) return Status::systemError(name() + ": connection closed before a response");
        return Status::protocol(name() + ": connection closed in the response headers");
      }
    }
    std::string_view head(in_.data(), end);
    size_t line_end = head.find("\r\n");
    std::string_view status_line = head.substr(0, line_end);
    if (!parseStatusLine(status_line, &r.status, &http10)) {
      return Status::protocol(fmt::format("{}: bad status line '{}'", name(), excerpt(status_line)));
    }
    r.headers.clear();
    while (line_end != std::string_view::npos) {
      head.remove_prefix(line_end + 2);
      line_end = head.find("\r\n");
      std::string_view line = head.substr(0, line_end);
      size_t colon = line.find(':');
      if (colon == 0 || colon == std::string_view::npos || line.front() == ' ' || line.front() == '\t' ||
          trim(line.substr(0, colon)).size() != colon) {
        return Status::protocol(fmt::format("{}: bad header line '{}'", name(), excerpt(line)));
      }
      r.headers.emplace_back(toLower(line.substr(0, colon)), std::string(trim(line.substr(colon + 1))));
    }
    in_.erase(0, end + 4);
    if (r.status >= 200) break;
    if (r.status == 101) return Status::protocol(name() + ": switched protocols unasked (HTTP 101)");
  }
  bool keep_alive = http10 ? hasToken(r.header("connection"), "keep-alive") : !hasToken(r.header("connection"), "close");
  Status body = readBody(r, deadline, &keep_alive);
  if (!body.isOk()) return body;
  if (!keep_alive || !in_.empty()) closeConnection();  // bytes after the body: the stream is out of step
  return r;
}

Status HttpClient::readBody(HttpResponse& r, TimePoint deadline, bool* keep_alive) {
  if (r.status == 204 || r.status == 304) return Status::ok();
  const std::string* te = r.header("transfer-encoding");
  if (te != nullptr) {
    if (toLower(*te) != "chunked") {
      return Status::protocol(fmt::format("{}: unsupported Transfer-Encoding '{}'", name(), excerpt(*te)));
    }
    return readChunkedBody(r, deadline);
  }
  const std::string* cl = r.header("content-length");
  if (cl == nullptr) {  // the body runs until the server closes
    *keep_alive = false;
    for (;;) {
      bool eof;
      PCCL_RETURN_IF_ERROR(readMore(deadline, &eof));
      if (in_.size() > kMaxResponseBytes) break;
      if (eof) break;
    }
    if (in_.size() > kMaxResponseBytes) {
      return Status::protocol(fmt::format("{}: response body larger than {} bytes", name(), kMaxResponseBytes));
    }
    r.body = std::move(in_);
    in_.clear();
    return Status::ok();
  }
  size_t length = 0;
  auto [ptr, ec] = std::from_chars(cl->data(), cl->data() + cl->size(), length);
  if (cl->empty() || ec != std::errc() || ptr != cl->data() + cl->size()) {
    return Status::protocol(fmt::format("{}: bad Content-Length '{}'", name(), excerpt(*cl)));
  }
  if (length > kMaxResponseBytes) {
    return Status::protocol(fmt::format("{}: response body of {} bytes exceeds the limit of {}", name(), length, kMaxResponseBytes));
  }
  PCCL_RETURN_IF_ERROR(fill(length, deadline, "in the response body"));
  r.body = in_.substr(0, length);
  in_.erase(0, length);
  return Status::ok();
}

Status HttpClient::fill(size_t bytes, TimePoint deadline, const char* where) {
  while (in_.size() < bytes) {
    bool eof;
    PCCL_RETURN_IF_ERROR(readMore(deadline, &eof));
    if (eof && in_.size() < bytes) return Status::protocol(fmt::format("{}: connection closed {}", name(), where));
  }
  return Status::ok();
}

Result<std::string> HttpClient::readLine(TimePoint deadline) {
  constexpr size_t kMaxLine = 4096;
  size_t end;
  while ((end = in_.find("\r\n")) == std::string::npos) {
    if (in_.size() > kMaxLine) return Status::protocol(name() + ": chunked framing line too long");
    PCCL_RETURN_IF_ERROR(fill(in_.size() + 1, deadline, "in the chunked framing"));
  }
  std::string line = in_.substr(0, end);
  in_.erase(0, end + 2);
  return line;
}

Status HttpClient::readChunkedBody(HttpResponse& r, TimePoint deadline) {
  for (;;) {
    PCCL_ASSIGN_OR_RETURN(std::string line, readLine(deadline));
    size_t size = 0;
    if (!parseChunkSize(line, &size)) {
      return Status::protocol(fmt::format("{}: bad chunk size line '{}'", name(), excerpt(line)));
    }
    if (size == 0) break;
    if (size > kMaxResponseBytes - r.body.size()) {
      return Status::protocol(fmt::format("{}: response body larger than {} bytes", name(), kMaxResponseBytes));
    }
    PCCL_RETURN_IF_ERROR(fill(size + 2, deadline, "in a chunk"));
    if (in_.compare(size, 2, "\r\n") != 0) return Status::protocol(name() + ": chunk not followed by CRLF");
    r.body.append(in_, 0, size);
    in_.erase(0, size + 2);
  }
  // Trailers (etcd's gateway sends Grpc-Trailer-* here), up to the empty line; skipped.
  for (size_t trailers = 0;; ++trailers) {
    if (trailers > 64) return Status::protocol(name() + ": too many trailer lines");
    PCCL_ASSIGN_OR_RETURN(std::string line, readLine(deadline));
    if (line.empty()) return Status::ok();
  }
}

Result<HttpResponse> HttpClient::attempt(const std::string& request, TimePoint deadline, bool* reused,
                                         bool* nothing_back) {
  *reused = socket_.is_open();
  *nothing_back = true;
  PCCL_RETURN_IF_ERROR(ensureConnected(deadline));
  in_.clear();
  auto op = std::make_shared<OpResult>();
  asio::async_write(socket_, asio::buffer(request), [op](const asio::error_code& e, size_t) {
    op->done = true;
    op->ec = e;
  });
  if (!runUntil(op->done, deadline)) return timeoutError("sending the request");
  if (op->ec) return ioError("write", op->ec);
  return readResponse(deadline, nothing_back);
}

Result<HttpResponse> HttpClient::request(const std::string& path, const std::string& json_body, Millis timeout) {
  if (path.empty() || path.front() != '/' || path.find_first_of(" \r\n") != std::string::npos) {
    return Status::invalidArgument("HTTP path '" + path + "' must start with '/' and hold no spaces or line breaks");
  }
  timeout_ = timeout;
  TimePoint deadline = Clock::now() + timeout;
  std::string request = fmt::format(
      "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json\r\n"
      "Content-Length: {}\r\n\r\n",
      path, net::HostPort{url_.host, url_.port}.toString(), json_body.size());
  request += json_body;
  bool reused = false;
  bool nothing_back = false;
  auto r = attempt(request, deadline, &reused, &nothing_back);
  // A kept-alive connection the server has closed meanwhile fails before any answer: once more on a
  // fresh one. (A timeout is not retried: the deadline is spent.)
  if (!r.isOk() && reused && nothing_back && r.status().code() == Code::kSystemError) {
    closeConnection();
    r = attempt(request, deadline, &reused, &nothing_back);
  }
  if (!r.isOk()) closeConnection();
  return r;
}

Result<HttpResponse> HttpClient::post(const std::string& path, const std::string& json_body, Millis timeout) {
  auto r = request(path, json_body, timeout);
  if (!r.isOk()) return r;
  if (r->status < 200 || r->status > 299) return statusError(*r);
  return r;
}

}  // namespace pccl::master
