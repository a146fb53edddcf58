// A real etcd for a test: one etcd member on loopback, started from the installed binary in a fresh
// temporary directory (its data and its log), for the tests of master/etcd_client (test_etcd.cpp) and
// for tests that run pccl masters against one etcd (leadership, failover). A test that finds no etcd
// binary skips with a warning rather than failing (apt-get install etcd-server).
//
//   auto f = pccl::test::startEtcd();  // WARNs and returns nullopt when etcd is not installed
//   if (!f) return;
//   const std::string url = f->server->url();  // "http://127.0.0.1:PORT", ready for requests
//   f->client->get("/key");                    // a master::EtcdClient on it (5 s request timeout)
//   f->server->freeze(); ... f->server->resume();  // SIGSTOP / SIGCONT: an etcd that stops answering
//
// The server is killed (SIGKILL, reaped) and its directory removed when it is destroyed.
#ifndef PCCL_TESTS_ETCD_SUPPORT_HPP_
#define PCCL_TESTS_ETCD_SUPPORT_HPP_

#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "master/etcd_client.hpp"
#include "test_support.hpp"
#include "util/clock.hpp"

namespace pccl::test {

// The etcd binary: the first executable `etcd` on PATH, else /usr/bin/etcd; nullopt when none.
inline std::optional<std::string> findEtcd() {
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

// `s` as one word for /bin/sh: single-quoted, embedded quotes escaped.
inline std::string shellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// A loopback TCP port nothing listens on (bound to 127.0.0.1:0, then released); 0 on failure. Another
// process may take it meanwhile: callers retry (EtcdServer does).
inline uint16_t freePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  uint16_t port = 0;
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

// One etcd member on loopback in a fresh temporary directory (its data and its log); killed and the
// directory removed on destruction. Ready once a range request answers; up to 3 starts on fresh ports
// (a port taken meanwhile). etcd runs as `/bin/sh -c "exec etcd ..."`: the exec makes the child's pid
// etcd's own, so pid(), freeze() and resume() act on etcd itself.
class EtcdServer {
 public:
  explicit EtcdServer(const std::string& binary) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "pccl-etcd-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) return;
    dir_ = tmpl;
    for (int attempt = 0; attempt < 3 && !ready_; ++attempt) start(binary);  // a port taken meanwhile: again
  }
  ~EtcdServer() {
    child_.reset();  // SIGCONT (if frozen), SIGKILL and reap
    if (!dir_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(dir_, ec);
    }
  }
  EtcdServer(const EtcdServer&) = delete;
  EtcdServer& operator=(const EtcdServer&) = delete;

  bool ready() const { return ready_; }
  // The client URL, "http://127.0.0.1:PORT" (empty unless ready()).
  const std::string& url() const { return url_; }
  // The last 3000 bytes of etcd's log (stdout and stderr), for a failure's INFO.
  std::string logTail() const {
    std::ifstream f(dir_ + "/etcd.log");
    std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    return all.size() > 3000 ? all.substr(all.size() - 3000) : all;
  }
  // etcd's pid (-1 when it was never started).
  pid_t pid() const { return child_ ? child_->pid() : -1; }
  // SIGSTOP, returning once etcd has actually stopped: it holds its connections and answers nothing
  // (requests time out, leases are not renewed) until resume().
  void freeze() {
    if (child_) child_->freeze();
  }
  // SIGCONT after freeze(): etcd answers again (its leases' TTLs may have lapsed meanwhile).
  void resume() {
    if (child_) child_->signal(SIGCONT);
  }

 private:
  void start(const std::string& binary) {
    child_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_ + "/data", ec);
    const std::string client = "http://127.0.0.1:" + std::to_string(freePort());
    const std::string peer = "http://127.0.0.1:" + std::to_string(freePort());
    std::string cmd = "exec " + shellQuote(binary) + " --name t --data-dir " + shellQuote(dir_ + "/data") +
                      " --listen-client-urls " + client + " --advertise-client-urls " + client +
                      " --listen-peer-urls " + peer + " --initial-advertise-peer-urls " + peer +
                      " --initial-cluster t=" + peer + " >" + shellQuote(dir_ + "/etcd.log") + " 2>&1";
    child_ = std::make_unique<ChildProcess>(std::vector<std::string>{"/bin/sh", "-c", cmd});
    auto probe = master::EtcdClient::create(client, Millis(1000));
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

// An etcd and a client on it for a test case.
struct EtcdFixture {
  std::unique_ptr<EtcdServer> server;
  std::unique_ptr<master::EtcdClient> client;  // 5 s request timeout
};

// A ready etcd and a client on it (REQUIREs both, with etcd's log as INFO), or nullopt after a WARN
// when no etcd binary is installed: the caller returns, and the test case passes as skipped.
inline std::optional<EtcdFixture> startEtcd() {
  auto binary = findEtcd();
  if (!binary) {
    WARN("etcd not installed: apt-get install etcd-server (skipping)");
    return std::nullopt;
  }
  EtcdFixture f;
  f.server = std::make_unique<EtcdServer>(*binary);
  INFO(f.server->logTail());
  REQUIRE(f.server->ready());
  auto c = master::EtcdClient::create(f.server->url(), Millis(5000));
  REQUIRE(c.isOk());
  f.client = std::move(c).value();
  return f;
}

}  // namespace pccl::test

#endif  // PCCL_TESTS_ETCD_SUPPORT_HPP_
