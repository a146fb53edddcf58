// The C API's handles and failure details, through libpccl.so as a program links it: a freed handle
// never becomes valid again, calls racing the call that frees their handle complete or get
// pcclInvalidArgument (run under TSan/ASan to see that nothing is used after it is freed), a call
// still running on a destroyed communicator keeps it alive, pcclWaitFor gives up without aborting,
// and pcclGetLastError(comm) is per thread.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "pccl/pccl.h"

namespace {

constexpr auto kDeadline = std::chrono::seconds(60);  // for waits that end at once unless pccl is broken

// Threads meet here before going on, round after round. Every wait has a deadline: a thread that
// never arrives fails the round instead of hanging the test.
class Barrier {
 public:
  explicit Barrier(int parties) : parties_(parties) {}
  bool arriveAndWait() {
    std::unique_lock<std::mutex> lk(mu_);
    const uint64_t round = round_;
    if (++arrived_ == parties_) {
      arrived_ = 0;
      ++round_;
      cv_.notify_all();
      return true;
    }
    return cv_.wait_for(lk, kDeadline, [&] { return round_ != round; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  const int parties_;
  int arrived_ = 0;
  uint64_t round_ = 0;
};

bool contains(const char* text, const char* part) { return text != nullptr && std::strstr(text, part) != nullptr; }

// A master on 127.0.0.1:0 with test timings.
struct Master {
  pcclMaster_t handle = nullptr;
  std::string address;
  Master() {
    pcclMasterConfig_t c = PCCL_MASTER_CONFIG_INIT;
    c.listen_address = "127.0.0.1:0";
    c.heartbeat_interval_ms = 100;
    c.peer_timeout_ms = 2000;
    REQUIRE(pcclMasterCreate(&c, &handle) == pcclSuccess);
    REQUIRE(pcclMasterStart(handle) == pcclSuccess);
    uint16_t port = 0;
    REQUIRE(pcclMasterGetPort(handle, &port) == pcclSuccess);
    address = "127.0.0.1:" + std::to_string(port);
  }
  ~Master() { (void)pcclMasterDestroy(handle); }
};

pcclComm_t makeComm(const std::string& master_address, uint32_t op_timeout_ms = 60000,
                    uint32_t handshake_timeout_ms = 2000, uint32_t connect_timeout_ms = 20000) {
  pcclCommConfig_t c = PCCL_COMM_CONFIG_INIT;
  c.master_address = master_address.c_str();
  c.listen_address = "127.0.0.1:0";
  c.heartbeat_interval_ms = 100;
  c.peer_timeout_ms = 2000;
  c.connect_timeout_ms = connect_timeout_ms;
  c.handshake_timeout_ms = handshake_timeout_ms;
  c.op_timeout_ms = op_timeout_ms;
  pcclComm_t comm = nullptr;
  REQUIRE(pcclCommCreate(&c, &comm) == pcclSuccess);
  return comm;
}

// Two connected peers a and b of one run.
struct Pair {
  Master master;
  pcclComm_t a = nullptr;
  pcclComm_t b = nullptr;
  explicit Pair(uint32_t op_timeout_ms = 60000) {
    a = makeComm(master.address, op_timeout_ms);
    b = makeComm(master.address, op_timeout_ms);
    REQUIRE(pcclConnect(a) == pcclSuccess);
    auto joined = std::async(std::launch::async, [this] { return pcclConnect(b); });
    REQUIRE(pcclMasterWaitForPeers(master.handle, 1, 1, 20000) == pcclSuccess);
    REQUIRE(pcclUpdateTopology(a) == pcclSuccess);
    REQUIRE(joined.get() == pcclSuccess);
  }
  ~Pair() {
    (void)pcclCommDestroy(b);
    (void)pcclCommDestroy(a);
  }
};

pcclReduceOptions_t tagged(uint64_t tag) {
  pcclReduceOptions_t o = PCCL_REDUCE_OPTIONS_INIT;
  o.tag = tag;
  return o;
}

// b's side of an all-reduce of 4 floats (each 1) with `tag`, on another thread.
std::future<pcclResult_t> joinOnB(pcclComm_t b, uint64_t tag) {
  return std::async(std::launch::async, [b, tag] {
    float x[4] = {1, 1, 1, 1};
    const pcclReduceOptions_t o = tagged(tag);
    return pcclAllReduce(x, x, 4, pcclFloat32, pcclSum, &o, b, nullptr);
  });
}

// A TCP listener on 127.0.0.1 that accepts and never answers: a master that hangs.
class SilentServer {
 public:
  SilentServer() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(fd_, 4) == 0);
    REQUIRE(::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    port_ = ntohs(a.sin_port);
  }
  ~SilentServer() {
    closeClient();
    ::close(fd_);
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  bool acceptOne() {  // within the deadline
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(std::chrono::milliseconds(kDeadline).count())) != 1) return false;
    client_ = ::accept(fd_, nullptr, nullptr);
    return client_ >= 0;
  }
  void closeClient() {
    if (client_ >= 0) ::close(client_);
    client_ = -1;
  }

 private:
  int fd_ = -1;
  int client_ = -1;
  uint16_t port_ = 0;
};

// Whether 127.0.0.1:port can be bound now (false while a listener holds it).
bool portIsFree(int64_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

}  // namespace

TEST_CASE("capi: a freed handle stays invalid and never names a later object") {
  const std::string nowhere = "127.0.0.1:1";  // pcclCommCreate contacts nobody
  int64_t v = 0;
  pcclComm_t first = makeComm(nowhere);
  REQUIRE(pcclCommDestroy(first) == pcclSuccess);
  for (int i = 0; i < 20; ++i) {
    pcclComm_t c = makeComm(nowhere);
    CHECK(c != first);
    CHECK(pcclGetAttribute(c, PCCL_ATTR_PEER_GROUP, &v) == pcclSuccess);
    CHECK(pcclGetAttribute(first, PCCL_ATTR_PEER_GROUP, &v) == pcclInvalidArgument);
    CHECK(contains(pcclGetLastError(nullptr), "invalid communicator handle (never created, or already freed)"));
    REQUIRE(pcclCommDestroy(c) == pcclSuccess);
  }
  CHECK(pcclCommDestroy(first) == pcclInvalidArgument);

  pcclMasterConfig_t mc = PCCL_MASTER_CONFIG_INIT;
  pcclMaster_t old_master = nullptr;
  REQUIRE(pcclMasterCreate(&mc, &old_master) == pcclSuccess);
  REQUIRE(pcclMasterDestroy(old_master) == pcclSuccess);
  pcclMaster_t m = nullptr;
  REQUIRE(pcclMasterCreate(&mc, &m) == pcclSuccess);
  CHECK(m != old_master);
  uint16_t port = 0;
  CHECK(pcclMasterGetPort(old_master, &port) == pcclInvalidArgument);
  CHECK(pcclMasterGetPort(m, &port) == pcclInvalidUsage);  // live, not started
  CHECK(pcclMasterDestroy(old_master) == pcclInvalidArgument);
  REQUIRE(pcclMasterDestroy(m) == pcclSuccess);

  // A handle of another kind, or any other value, is refused by what it is.
  pcclComm_t c = makeComm(nowhere);
  int done = 0;
  CHECK(pcclTest(reinterpret_cast<pcclRequest_t>(c), &done) == pcclInvalidArgument);
  CHECK(contains(pcclGetLastError(nullptr), "invalid request handle (a communicator handle)"));
  CHECK(pcclGetAttribute(reinterpret_cast<pcclComm_t>(&v), PCCL_ATTR_RANK, &v) == pcclInvalidArgument);
  CHECK(pcclConnect(nullptr) == pcclInvalidArgument);
  CHECK(contains(pcclGetLastError(nullptr), "(NULL)"));
  REQUIRE(pcclCommDestroy(c) == pcclSuccess);
}

TEST_CASE("capi: a waited request stays invalid while new requests are made") {
  Master master;
  pcclComm_t c = makeComm(master.address);
  REQUIRE(pcclConnect(c) == pcclSuccess);  // alone: every all-reduce ends at once
  float x[4] = {1, 2, 3, 4};
  pcclRequest_t first = nullptr;
  REQUIRE(pcclAllReduceAsync(x, x, 4, pcclFloat32, pcclSum, nullptr, c, &first) == pcclSuccess);
  REQUIRE(pcclWait(first, nullptr) == pcclSuccess);
  for (int i = 0; i < 20; ++i) {
    pcclRequest_t r = nullptr;
    REQUIRE(pcclAllReduceAsync(x, x, 4, pcclFloat32, pcclSum, nullptr, c, &r) == pcclSuccess);
    CHECK(r != first);
    int done = 0;
    CHECK(pcclTest(first, &done) == pcclInvalidArgument);
    pcclRequest_t stale = first;
    CHECK(pcclWaitFor(&stale, 0, nullptr) == pcclInvalidArgument);
    CHECK(stale == first);  // left as it was
    CHECK(pcclWait(first, nullptr) == pcclInvalidArgument);
    CHECK(pcclWait(r, nullptr) == pcclSuccess);
  }
  CHECK(x[0] == 1);  // a ring of one: the sum is the input
  REQUIRE(pcclCommDestroy(c) == pcclSuccess);
}

TEST_CASE("capi: calls racing pcclCommDestroy complete or get pcclInvalidArgument") {
  constexpr int kThreads = 4;
  for (int round = 0; round < 10; ++round) {
    pcclComm_t comm = makeComm("127.0.0.1:1");
    Barrier start(kThreads + 1);
    std::atomic<bool> destroyed{false};
    std::atomic<int> unexpected{0};
    std::atomic<int> refused_after{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&] {
        auto calls = [&](bool after) {
          int64_t v = 0;
          int pending = 0;
          pcclCommStats_t s = PCCL_COMM_STATS_INIT;
          float x = 1;
          char region[PCCL_MAX_REGION_LEN + 1];
          size_t length = 0;
          const pcclResult_t r[5] = {pcclGetAttribute(comm, PCCL_ATTR_LISTEN_PORT, &v), pcclGetStats(comm, &s),
                                     pcclArePeersPending(comm, &pending),  // not connected: pcclInvalidUsage
                                     pcclAllReduce(&x, &x, 1, pcclFloat32, pcclSum, nullptr, comm, nullptr),
                                     pcclGetRegion(comm, 0, region, sizeof region, &length)};  // no ring yet
          (void)pcclGetLastError(comm);
          for (int i = 0; i < 5; ++i) {
            const bool live_ok = (i < 2 && r[i] == pcclSuccess) || (i >= 2 && r[i] == pcclInvalidUsage);
            if (r[i] == pcclInvalidArgument && after) refused_after.fetch_add(1);
            if (r[i] != pcclInvalidArgument && (after || !live_ok)) unexpected.fetch_add(1);
          }
        };
        if (!start.arriveAndWait()) unexpected.fetch_add(1000);
        while (!destroyed.load()) calls(false);
        calls(true);  // destroy has returned: only pcclInvalidArgument now
      });
    }
    const bool met = start.arriveAndWait();
    CHECK(pcclCommDestroy(comm) == pcclSuccess);
    destroyed.store(true);  // the threads end their loops whatever happened
    for (auto& t : threads) t.join();
    CHECK(met);
    CHECK(unexpected.load() == 0);
    CHECK(refused_after.load() == 5 * kThreads);
  }
}

TEST_CASE("capi: calls racing pcclMasterDestroy complete or get pcclInvalidArgument") {
  constexpr int kThreads = 4;
  for (int round = 0; round < 10; ++round) {
    pcclMasterConfig_t mc = PCCL_MASTER_CONFIG_INIT;
    mc.listen_address = "127.0.0.1:0";
    pcclMaster_t m = nullptr;
    REQUIRE(pcclMasterCreate(&mc, &m) == pcclSuccess);
    REQUIRE(pcclMasterStart(m) == pcclSuccess);
    Barrier start(kThreads + 1);
    std::atomic<bool> destroyed{false};
    std::atomic<int> unexpected{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&] {
        auto calls = [&](bool after) {
          uint16_t port = 0;
          pcclMasterStats_t s = PCCL_MASTER_STATS_INIT;
          const pcclResult_t r[3] = {pcclMasterGetPort(m, &port), pcclMasterGetStats(m, &s),
                                     pcclMasterWaitForPeers(m, 0, 0, 0)};
          for (pcclResult_t x : r) {
            if (x != pcclInvalidArgument && (after || x != pcclSuccess)) unexpected.fetch_add(1);
          }
        };
        if (!start.arriveAndWait()) unexpected.fetch_add(1000);
        while (!destroyed.load()) calls(false);
        calls(true);
      });
    }
    const bool met = start.arriveAndWait();
    CHECK(pcclMasterDestroy(m) == pcclSuccess);
    destroyed.store(true);  // the threads end their loops whatever happened
    for (auto& t : threads) t.join();
    CHECK(met);
    CHECK(unexpected.load() == 0);
  }
}

TEST_CASE("capi: pcclCommDestroy during a blocked call: the call completes, then the communicator is freed") {
  SilentServer hung_master;
  // The silent master never answers the handshake; its deadline is far away, so pcclConnect stays
  // inside the call until the test closes the connection. After that it dials again until its
  // connect deadline: 5 s here, not the 20 s of the other tests (which the test spent waiting).
  pcclComm_t comm = makeComm(hung_master.address(), 60000, 60000, 5000);
  int64_t port = 0;
  REQUIRE(pcclGetAttribute(comm, PCCL_ATTR_LISTEN_PORT, &port) == pcclSuccess);
  auto connecting = std::async(std::launch::async, [comm] { return pcclConnect(comm); });
  REQUIRE(hung_master.acceptOne());  // pcclConnect is running and holds the communicator

  CHECK(pcclCommDestroy(comm) == pcclSuccess);  // returns without waiting for pcclConnect
  int64_t v = 0;
  CHECK(pcclGetAttribute(comm, PCCL_ATTR_RANK, &v) == pcclInvalidArgument);  // invalid at once
  CHECK(pcclCommDestroy(comm) == pcclInvalidArgument);
  CHECK_FALSE(portIsFree(port));  // ... but not freed under pcclConnect: its listener is still open

  hung_master.closeClient();  // the master "dies": pcclConnect fails by itself
  REQUIRE(connecting.wait_for(kDeadline) == std::future_status::ready);
  const pcclResult_t r = connecting.get();
  CHECK(r != pcclSuccess);
  CHECK(r != pcclInvalidArgument);  // it ran to its own end
  CHECK(portIsFree(port));          // and the last user freed the communicator on its way out
}

TEST_CASE("capi: waits and tests racing on one request: exactly one wait gets the result") {
  Pair run;
  for (uint64_t tag = 1; tag <= 5; ++tag) {
    float x[4] = {1, 2, 3, 4};
    const pcclReduceOptions_t o = tagged(tag);
    pcclRequest_t req = nullptr;
    REQUIRE(pcclAllReduceAsync(x, x, 4, pcclFloat32, pcclSum, &o, run.a, &req) == pcclSuccess);
    Barrier start(5);
    std::atomic<int> results{0};
    std::atomic<int> refused{0};
    std::atomic<int> unexpected{0};
    auto account = [&](pcclResult_t r) {
      if (r == pcclSuccess) {
        results.fetch_add(1);
      } else if (r == pcclInvalidArgument) {
        refused.fetch_add(1);
      } else {
        unexpected.fetch_add(1);
      }
    };
    std::vector<std::thread> threads;
    for (int i = 0; i < 2; ++i) {
      threads.emplace_back([&] {
        if (start.arriveAndWait()) account(pcclWait(req, nullptr));
      });
    }
    threads.emplace_back([&] {  // waits in short slices until the request is freed
      if (!start.arriveAndWait()) return;
      const auto give_up = std::chrono::steady_clock::now() + kDeadline;
      pcclRequest_t mine = req;
      pcclResult_t r = pcclTimeout;
      while (r == pcclTimeout && mine != nullptr && std::chrono::steady_clock::now() < give_up) {
        r = pcclWaitFor(&mine, 5, nullptr);
      }
      account(r);
    });
    threads.emplace_back([&] {  // tests until the request is gone
      if (!start.arriveAndWait()) return;
      const auto give_up = std::chrono::steady_clock::now() + kDeadline;
      int done = 0;
      pcclResult_t r = pcclSuccess;
      while (r == pcclSuccess && std::chrono::steady_clock::now() < give_up) r = pcclTest(req, &done);
      if (r != pcclInvalidArgument) unexpected.fetch_add(1);
    });
    CHECK(start.arriveAndWait());  // if not, the threads have returned: b's operation still ends it
    auto b = joinOnB(run.b, tag);
    REQUIRE(b.wait_for(kDeadline) == std::future_status::ready);
    CHECK(b.get() == pcclSuccess);
    for (auto& t : threads) t.join();
    CHECK(results.load() == 1);
    CHECK(refused.load() == 2);
    CHECK(unexpected.load() == 0);
    CHECK((x[0] == 2 && x[3] == 5));
  }
}

TEST_CASE("capi: pcclWaitFor gives up with pcclTimeout, keeps the request valid and does not abort") {
  Pair run;
  float x[4] = {1, 2, 3, 4};
  pcclReduceOptions_t o = tagged(11);
  pcclRequest_t req = nullptr;
  REQUIRE(pcclAllReduceAsync(x, x, 4, pcclFloat32, pcclSum, &o, run.a, &req) == pcclSuccess);
  const pcclRequest_t original = req;
  pcclReduceInfo_t info{};
  CHECK(pcclWaitFor(&req, 0, &info) == pcclTimeout);  // b has not joined: it cannot have ended
  CHECK(pcclWaitFor(&req, 20, &info) == pcclTimeout);
  CHECK(req == original);
  CHECK(contains(pcclGetLastError(run.a), "tag 11 has not ended within 20 ms"));
  int done = 1;
  CHECK(pcclTest(req, &done) == pcclSuccess);
  CHECK(done == 0);

  auto b = joinOnB(run.b, 11);  // the operation went on: it completes now
  CHECK(pcclWaitFor(&req, 60000, &info) == pcclSuccess);
  CHECK(req == nullptr);  // freed
  CHECK(info.world_size == 2);
  CHECK((x[0] == 2 && x[1] == 3 && x[2] == 4 && x[3] == 5));
  CHECK(b.get() == pcclSuccess);
  CHECK(pcclWaitFor(&req, 0, &info) == pcclInvalidArgument);
  CHECK(pcclWaitFor(nullptr, 0, &info) == pcclInvalidArgument);

  // After a pcclTimeout the request may also be finished with pcclWait.
  o = tagged(12);
  REQUIRE(pcclAllReduceAsync(x, x, 4, pcclFloat32, pcclSum, &o, run.a, &req) == pcclSuccess);
  CHECK(pcclWaitFor(&req, 1, nullptr) == pcclTimeout);
  b = joinOnB(run.b, 12);
  CHECK(pcclWait(req, nullptr) == pcclSuccess);
  CHECK(b.get() == pcclSuccess);
  CHECK(x[0] == 3);
}

TEST_CASE("capi: pcclWaitFor on an operation that failed by its own deadline frees the request") {
  Pair run(/*op_timeout_ms=*/300);
  float x[4] = {1, 2, 3, 4};
  const pcclReduceOptions_t o = tagged(21);
  pcclRequest_t req = nullptr;
  REQUIRE(pcclAllReduceAsync(x, x, 4, pcclFloat32, pcclSum, &o, run.a, &req) == pcclSuccess);
  // b never joins: the operation ends with its own pcclTimeout, which *req == NULL tells apart.
  const pcclResult_t r = pcclWaitFor(&req, 60000, nullptr);  // ends long before 60 s
  CHECK(r == pcclTimeout);
  CHECK(req == nullptr);
  CHECK_FALSE(contains(pcclGetLastError(run.a), "has not ended within"));
  CHECK((x[0] == 1 && x[3] == 4));  // the input is intact
}

TEST_CASE("capi: pcclGetLastError(comm) reports the calling thread's failures only") {
  pcclComm_t comm = makeComm("127.0.0.1:1");
  Barrier meet(2);
  std::atomic<int> wrong{0};
  // Each thread asks for a zstd level out of range, its own: the detail names the level it got.
  auto failRepeatedly = [&](int level) {
    const std::string mine = "got " + std::to_string(level);
    const std::string theirs = "got " + std::to_string(level == 25 ? 26 : 25);
    float x[4] = {};
    pcclReduceOptions_t o = PCCL_REDUCE_OPTIONS_INIT;
    o.compress = level;
    for (int i = 0; i < 200; ++i) {
      if (pcclAllReduce(x, x, 4, pcclFloat32, pcclSum, &o, comm, nullptr) != pcclInvalidArgument) wrong.fetch_add(1);
      if (!meet.arriveAndWait()) wrong.fetch_add(1000);  // both threads have failed
      const std::string detail = pcclGetLastError(comm);
      if (!contains(detail.c_str(), mine.c_str()) || contains(detail.c_str(), theirs.c_str())) wrong.fetch_add(1);
      if (!contains(pcclGetLastError(nullptr), mine.c_str())) wrong.fetch_add(1);
      if (!meet.arriveAndWait()) wrong.fetch_add(1000);  // both have read before either fails again
    }
  };
  std::thread other(failRepeatedly, 26);
  failRepeatedly(25);
  other.join();
  CHECK(wrong.load() == 0);

  // A thread that never failed on comm reads "", whatever the others did; a success does not clear.
  std::string fresh = "unset";
  std::thread([&] { fresh = pcclGetLastError(comm); }).join();
  CHECK(fresh.empty());
  int64_t v = 0;
  CHECK(pcclGetAttribute(comm, PCCL_ATTR_PEER_GROUP, &v) == pcclSuccess);
  CHECK(contains(pcclGetLastError(comm), "got 25"));

  // Once comm is destroyed its handle is not live: the thread's last failure of any call.
  REQUIRE(pcclCommDestroy(comm) == pcclSuccess);
  CHECK(pcclGetAttribute(comm, PCCL_ATTR_PEER_GROUP, &v) == pcclInvalidArgument);
  CHECK(contains(pcclGetLastError(comm), "invalid communicator handle"));
}

TEST_CASE("capi: a failed wait on a request sets the detail of the thread that waited") {
  Pair run;
  float x[4] = {1, 2, 3, 4}, y[4] = {1, 2, 3, 4};
  const pcclReduceOptions_t o = tagged(31);
  pcclRequest_t req = nullptr;
  REQUIRE(pcclAllReduceAsync(x, x, 4, pcclFloat32, pcclSum, &o, run.a, &req) == pcclSuccess);
  // At once, on one communicator: this thread's wait expires, and the other thread starts a second
  // operation with the tag still in flight.
  Barrier meet(2);
  std::string other_detail, other_any;
  pcclResult_t other_result = pcclSuccess;
  pcclRequest_t second = nullptr;
  std::thread other([&] {
    if (!meet.arriveAndWait()) return;
    other_result = pcclAllReduceAsync(y, y, 4, pcclFloat32, pcclSum, &o, run.a, &second);
    if (!meet.arriveAndWait()) return;  // both have failed
    other_detail = pcclGetLastError(run.a);
    other_any = pcclGetLastError(nullptr);
  });
  const bool met = meet.arriveAndWait();
  pcclRequest_t mine = req;
  CHECK(pcclWaitFor(&mine, 1, nullptr) == pcclTimeout);
  const bool met_again = met && meet.arriveAndWait();
  const std::string my_detail = pcclGetLastError(run.a);
  other.join();
  REQUIRE((met && met_again));
  CHECK(contains(my_detail.c_str(), "tag 31 has not ended within 1 ms"));
  CHECK(other_result == pcclInvalidUsage);
  CHECK(second == nullptr);
  CHECK(contains(other_detail.c_str(), "tag 31 is still in flight"));
  CHECK(contains(other_any.c_str(), "tag 31 is still in flight"));
  CHECK(contains(pcclGetLastError(run.a), "tag 31 has not ended within 1 ms"));  // unchanged by the other

  REQUIRE(pcclCommDestroy(run.b) == pcclSuccess);  // b leaves: a's operation fails
  run.b = nullptr;
  CHECK(pcclWait(req, nullptr) == pcclPeerLost);
  const std::string lost = pcclGetLastError(run.a);
  CHECK_FALSE(lost.empty());
  CHECK_FALSE(contains(lost.c_str(), "has not ended within"));
  CHECK((x[0] == 1 && x[3] == 4));
}
