// A blocking HTTP/1.1 client for small JSON POSTs to one endpoint (etcd's JSON gateway): one
// keep-alive connection, reused across calls and reopened once when a reused one turns out broken.
// Every call is bounded by its timeout (resolve, connect, write and read together): the sockets run on
// a private io_context driven by the calling thread, so a silent or blackholed server costs at most
// the timeout. Bodies come with Content-Length, chunked (trailers skipped), or until the server
// closes; at most kMaxResponseBytes.
// Thread: thread-compatible (one call at a time; no thread of its own).
#ifndef PCCL_MASTER_HTTP_CLIENT_HPP_
#define PCCL_MASTER_HTTP_CLIENT_HPP_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "net/asio.hpp"
#include "pccl/status.hpp"
#include "util/clock.hpp"

namespace pccl::master {

inline constexpr size_t kMaxResponseBytes = 4u << 20;       // body, after chunked decoding
inline constexpr size_t kMaxResponseHeaderBytes = 64u << 10;  // status line and headers (each block)

struct HttpResponse {
  int status = 0;                                            // e.g. 200
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased, in order
  std::string body;

  // The first header named `name` (lower case), or nullptr.
  const std::string* header(std::string_view name) const;
};

// "http://HOST:PORT" (a trailing '/' allowed; IPv6 as "[::1]"). https and paths are refused.
struct HttpUrl {
  std::string host;
  uint16_t port = 0;
  std::string toString() const;  // "http://HOST:PORT"
};
Result<HttpUrl> parseHttpUrl(const std::string& url);

class HttpClient {
 public:
  // `service` names the server in error messages ("etcd http://127.0.0.1:2379: ..."). Connects lazily.
  static Result<std::unique_ptr<HttpClient>> create(const std::string& url, std::string service = "HTTP server");
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // POSTs `json_body` (Content-Type: application/json) to `path` and returns a 2xx response. Errors:
  // Timeout (the whole call past `timeout`), SystemError (resolve/connect/I/O failures, and a non-2xx
  // answer: "<service> <url> answered HTTP 404: <body excerpt>"), ProtocolError (a malformed or
  // oversized response).
  Result<HttpResponse> post(const std::string& path, const std::string& json_body, Millis timeout);
  // As post(), but any complete response is returned, whatever its status.
  Result<HttpResponse> request(const std::string& path, const std::string& json_body, Millis timeout);

  const HttpUrl& url() const { return url_; }
  // "<service> http://HOST:PORT", the prefix of every error message.
  std::string name() const;
  // The error post() returns for a non-2xx response.
  Status statusError(const HttpResponse& response) const;
  // Whether a connection is open (kept alive from the last call).
  bool connected() const { return socket_.is_open(); }

 private:
  HttpClient(HttpUrl url, std::string service);

  // One attempt on the current (or a new) connection; *reused says whether the connection was open
  // before, *nothing_back whether the attempt failed before any response byte arrived.
  Result<HttpResponse> attempt(const std::string& request, TimePoint deadline, bool* reused, bool* nothing_back);
  Status ensureConnected(TimePoint deadline);
  Result<HttpResponse> readResponse(TimePoint deadline, bool* nothing_back);
  // The body after the headers: chunked, Content-Length, or up to EOF (then *keep_alive = false).
  Status readBody(HttpResponse& r, TimePoint deadline, bool* keep_alive);
  Status readChunkedBody(HttpResponse& r, TimePoint deadline);
  // The next CRLF-terminated line of in_ (reading as needed), without its CRLF.
  Result<std::string> readLine(TimePoint deadline);
  // Reads until in_ holds at least `bytes`; EOF before is a protocol error naming `where`.
  Status fill(size_t bytes, TimePoint deadline, const char* where);
  // Reads more bytes into in_; OK, or an I/O / timeout error (EOF is reported through *eof).
  Status readMore(TimePoint deadline, bool* eof);
  // Runs the io_context until `done` or the deadline; at the deadline the connection is closed, the
  // cancelled operation's handler run, and false returned.
  bool runUntil(const bool& done, TimePoint deadline);
  Status ioError(const char* what, const asio::error_code& ec) const;
  Status timeoutError(const char* what) const;
  void closeConnection();

  HttpUrl url_;
  std::string service_;
  asio::io_context io_;
  net::Tcp::socket socket_;
  std::string in_;       // bytes received and not yet consumed
  Millis timeout_{0};    // the current call's, for messages
};

}  // namespace pccl::master

#endif  // PCCL_MASTER_HTTP_CLIENT_HPP_
