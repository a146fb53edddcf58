// A small key-value rendezvous server for Gloo (Debian's Gloo has no TCP store), and its client, so
// that Gloo can join ranks across machines or network namespaces. Thread per connection; blocking
// sockets; a benchmark tool's needs only.
//   request: u8 op | u32 nkeys | nkeys × (u32 len, bytes) | SET: u32 len, value | WAIT: u32 timeout_ms
//   reply:   SET: u8 1 | GET: u8 ok, u32 len, value | WAIT: u8 ok      (little-endian)
#ifndef PCCL_BENCH_TCP_STORE_HPP_
#define PCCL_BENCH_TCP_STORE_HPP_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace pccl::bench {

class StoreServer {
 public:
  // Listens on `host`:0 (an ephemeral port). Null with *error set on failure.
  static std::unique_ptr<StoreServer> start(const std::string& host, std::string* error);
  ~StoreServer();
  uint16_t port() const { return port_; }

 private:
  StoreServer() = default;
  void acceptLoop();
  void serve(int fd);

  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread acceptor_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::vector<char>> kv_;
  std::vector<int> client_fds_;
  std::vector<std::thread> clients_;
};

// Blocking client; every call throws std::runtime_error on failure (Gloo's Store interface has no
// error values).
class StoreClient {
 public:
  // Connects, retrying for up to timeout_ms while the server starts.
  StoreClient(const std::string& host, uint16_t port, int timeout_ms);
  ~StoreClient();
  void set(const std::string& key, const std::vector<char>& value);
  std::vector<char> get(const std::string& key);
  void wait(const std::vector<std::string>& keys, int timeout_ms);

 private:
  void request(uint8_t op, const std::vector<std::string>& keys, const std::vector<char>* value, uint32_t timeout_ms);
  int fd_ = -1;
  std::mutex mu_;
};

}  // namespace pccl::bench

#endif  // PCCL_BENCH_TCP_STORE_HPP_
