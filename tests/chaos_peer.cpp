// chaos_peer: one peer of the chaos test (tests/test_chaos.cpp). Joins, then loops in-place float32
// sum all-reduces until SIGTERM, surviving whatever happens to the others: on PeerLost, Timeout or
// TopologyChanged it calls updateTopology and goes on; when the master drops it (Kicked, e.g. after being
// frozen) or stays unreachable past master_reconnect_ms it builds a new communicator and joins again. A
// master that is killed and restarted takes it back (the ring goes on meanwhile).
//
// Every peer of epoch E contributes the same values to its k-th successful operation of that epoch
// (a function of E and k), so the correct result is world × value, bit for bit, and every peer of
// (E, k) must hold the same bytes. One line per event goes to the log file (appended, flushed):
//   ok epoch=E seq=K world=W wrong=N hash=H ms=T
//   err what=CALL code=NAME ms=T t=MS
//   overrun what=CALL start=MS end=MS limit=MS     (a call took longer than its deadline + 1 s;
//                                                   MS = CLOCK_REALTIME milliseconds, to compare with
//                                                   the driver's SIGSTOP intervals)
//   joined epoch=E world=W
// Once the file QUIET exists (the driver's quiet phase), each change of the world size of its
// successful operations is also printed on stdout, flushed: "quiet-ok world=W", so the driver can wait
// for the event "everyone is back in one ring" instead of sleeping for a guess.
//
//   chaos_peer --master HOST:PORT --log FILE [--count N] [--quiet-file QUIET] [--listen HOST:PORT]
// (--listen: the ring listener, 127.0.0.1:0 by default; another address where the peers are in network
// namespaces, tests/wanem_chaos.sh)
#include <signal.h>
#include <unistd.h>
#include <time.h>

#include <chrono>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "pccl/communicator.hpp"

namespace {

volatile sig_atomic_t g_stop = 0;
void onSignal(int) { g_stop = 1; }

constexpr uint32_t kHeartbeatMs = 200;
constexpr uint32_t kPeerTimeoutMs = 2000;
constexpr uint32_t kOpTimeoutMs = 8000;
constexpr uint32_t kConnectTimeoutMs = 8000;
constexpr int64_t kSlackMs = 1000;
constexpr int64_t kReconnectMs = 15000;

int64_t realMs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

class Log {
 public:
  explicit Log(const std::string& path) : f_(std::fopen(path.c_str(), "a")) {}
  ~Log() {
    if (f_ != nullptr) std::fclose(f_);
  }
  __attribute__((format(printf, 2, 3))) void line(const char* fmt, ...) {
    if (f_ == nullptr) return;
    va_list ap;
    va_start(ap, fmt);
    std::vfprintf(f_, fmt, ap);
    va_end(ap);
    std::fputc('\n', f_);
    std::fflush(f_);
  }

 private:
  std::FILE* f_;
};

// Times one pccl call and logs it when it overran its deadline.
template <typename F>
auto timed(Log& log, const char* what, int64_t limit_ms, F&& call) {
  const int64_t start = realMs();
  auto result = call();
  const int64_t end = realMs();
  if (end - start > limit_ms + kSlackMs) {
    log.line("overrun what=%s start=%lld end=%lld limit=%lld", what, static_cast<long long>(start),
             static_cast<long long>(end), static_cast<long long>(limit_ms));
  }
  return result;
}

template <typename T>
const pccl::Status& statusOf(const pccl::Result<T>& r) {
  return r.status();
}

uint64_t fnv1a(const void* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<const uint8_t*>(p)[i]) * 1099511628211ull;
  return h;
}

bool recoverable(pccl::Code c) {
  return c == pccl::Code::kPeerLost || c == pccl::Code::kTimeout || c == pccl::Code::kTopologyChanged ||
         c == pccl::Code::kTooFewPeers;
}

}  // namespace

int main(int argc, char** argv) {
  std::string master, log_path, quiet_file, listen = "127.0.0.1:0";
  size_t count = 20000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--master") == 0) master = argv[i + 1];
    if (std::strcmp(argv[i], "--log") == 0) log_path = argv[i + 1];
    if (std::strcmp(argv[i], "--count") == 0) count = std::strtoull(argv[i + 1], nullptr, 10);
    if (std::strcmp(argv[i], "--quiet-file") == 0) quiet_file = argv[i + 1];
    if (std::strcmp(argv[i], "--listen") == 0) listen = argv[i + 1];
  }
  bool quiet = false;
  uint32_t reported_world = 0;
  if (master.empty() || log_path.empty()) {
    std::fprintf(stderr, "usage: chaos_peer --master HOST:PORT --log FILE [--count N] [--quiet-file F] [--listen HOST:PORT]\n");
    return 2;
  }
  signal(SIGTERM, onSignal);
  signal(SIGINT, onSignal);
  Log log(log_path);
  std::vector<float> data(count);

  while (!g_stop) {  // one communicator per pass; a new one after being dropped
    pccl::CommConfig c;
    c.master_address = master;
    c.listen_address = listen;
    c.connections_per_peer = 2;
    c.same_host_connections = 2;
    c.heartbeat_interval_ms = kHeartbeatMs;
    c.peer_timeout_ms = kPeerTimeoutMs;
    c.connect_timeout_ms = kConnectTimeoutMs;
    c.op_timeout_ms = kOpTimeoutMs;
    c.segment_bytes = 16384;
    c.master_reconnect_ms = kReconnectMs;  // the driver kills and restarts the master too
    auto created = pccl::Communicator::create(c);
    if (!created.isOk()) return 1;
    std::unique_ptr<pccl::Communicator> comm = std::move(created).value();
    pccl::Status joined = timed(log, "connect", kConnectTimeoutMs, [&] { return comm->connect(); });
    if (!joined.isOk()) {
      log.line("err what=connect code=%s ms=0 t=%lld", pccl::codeName(joined.code()), static_cast<long long>(realMs()));
      std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the master may be busy: try again
      continue;
    }
    log.line("joined epoch=%llu world=%u", static_cast<unsigned long long>(comm->topology().epoch),
             comm->topology().world_size);
    uint64_t epoch = comm->topology().epoch, seq = 0;
    bool rejoin = false;
    while (!g_stop && !rejoin) {
      // pccl.h: arePeersPending blocks at most twice the peer timeout.
      auto pending = timed(log, "pending", 2 * kPeerTimeoutMs, [&] { return comm->arePeersPending(); });
      pccl::Status st = statusOf(pending);
      if (st.isOk() && *pending) st = timed(log, "update", kConnectTimeoutMs, [&] { return comm->updateTopology(); });
      if (st.isOk()) {
        if (comm->topology().epoch != epoch) {
          epoch = comm->topology().epoch;
          seq = 0;
        }
        const float value = static_cast<float>((epoch * 7 + seq * 3) % 13 + 1);
        for (size_t i = 0; i < count; ++i) data[i] = value + static_cast<float>(i % 5);
        const auto t0 = std::chrono::steady_clock::now();
        auto r = timed(log, "allreduce", kOpTimeoutMs, [&] {
          return comm->allReduce(data.data(), data.data(), count, pccl::DataType::kFloat32, pccl::RedOp::kSum);
        });
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        if (r.isOk()) {
          size_t wrong = 0;
          for (size_t i = 0; i < count; ++i) {
            wrong += data[i] != (value + static_cast<float>(i % 5)) * static_cast<float>(r->world_size);
          }
          log.line("ok epoch=%llu seq=%llu world=%u wrong=%zu hash=%016llx ms=%.1f t=%lld hier=%d",
                   static_cast<unsigned long long>(epoch), static_cast<unsigned long long>(seq), r->world_size, wrong,
                   static_cast<unsigned long long>(fnv1a(data.data(), count * sizeof(float))), ms,
                   static_cast<long long>(realMs()), r->hierarchical ? 1 : 0);
          ++seq;
          quiet = quiet || (!quiet_file.empty() && access(quiet_file.c_str(), F_OK) == 0);
          if (quiet && r->world_size != reported_world) {
            reported_world = r->world_size;
            std::printf("quiet-ok world=%u\n", reported_world);
            std::fflush(stdout);
          }
          continue;
        }
        st = r.status();
        log.line("err what=allreduce code=%s ms=%.1f t=%lld", pccl::codeName(st.code()), ms,
                 static_cast<long long>(realMs()));
      } else {
        log.line("err what=membership code=%s ms=0 t=%lld", pccl::codeName(st.code()), static_cast<long long>(realMs()));
      }
      if (recoverable(st.code())) {
        // Re-form the ring; every survivor does the same. A failed vote is retried by the next pass.
        pccl::Status u = timed(log, "update", kConnectTimeoutMs, [&] { return comm->updateTopology(); });
        if (!u.isOk()) {
          log.line("err what=update code=%s ms=0 t=%lld", pccl::codeName(u.code()), static_cast<long long>(realMs()));
        }
        if (!u.isOk() && !recoverable(u.code())) rejoin = true;  // dropped, master gone, or unexpected
        continue;
      }
      rejoin = true;  // Kicked, MasterUnreachable, or something unexpected: start over
    }
  }
  log.line("left");
  return 0;
}
