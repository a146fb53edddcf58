// pccl-bench's phase marks for the WAN emulator (PCCL_WANEM_PHASES).
#ifndef PCCL_BENCH_PHASE_LOG_HPP_
#define PCCL_BENCH_PHASE_LOG_HPP_

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace pccl::bench {

// PCCL_WANEM_PHASES=FILE: "ROW:BACKEND:ALGORITHM:BYTES BEGIN_NS END_NS" per timed operation when it ends
// (and "begin ROW:BACKEND:BYTES:ITERATION BEGIN_NS" when it starts), appended
// with one write() per line (O_APPEND: the ranks' lines never interleave). BEGIN/END are this rank's
// steady_clock (CLOCK_MONOTONIC) nanoseconds of the operation, the same instants its time is taken
// from. A file that cannot be written costs one warning, never the run.
class PhaseLog {
 public:
  PhaseLog() {
    const char* path = std::getenv("PCCL_WANEM_PHASES");
    if (path == nullptr || *path == '\0') return;
    path_ = path;
    fd_ = ::open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) warn(errno);
  }
  ~PhaseLog() {
    if (fd_ >= 0) ::close(fd_);
  }
  PhaseLog(const PhaseLog&) = delete;
  PhaseLog& operator=(const PhaseLog&) = delete;

  // "begin INDEX:BACKEND:BYTES:ITERATION BEGIN_NS" when a timed operation starts (every rank writes one):
  // what pccl-wanem's `at phase+D` faults wait for (docs/wanem.md, "Faults"); readers of phases skip it.
  // Written just before the operation's clock starts, so that the write is not part of its time.
  void begin(size_t index, const std::string& backend, size_t bytes, int iteration,
             std::chrono::steady_clock::time_point t) {
    beginStep(std::to_string(index) + ":" + backend + ":" + std::to_string(bytes) + ":" + std::to_string(iteration), t);
  }
  // "begin LABEL BEGIN_NS" for an untimed step that faults may target too: the run's set-up writes
  // "setup:connect:RANK" (RANK: PCCL_WANEM_RANK, each rank its own) as it joins and "setup:optimize" as
  // it calls pcclOptimizeTopology (every rank the same label).
  void beginStep(const std::string& label, std::chrono::steady_clock::time_point t) {
    if (fd_ < 0) return;
    char line[256];
    const int n = std::snprintf(line, sizeof line, "begin %s %lld\n", label.c_str(),
                                static_cast<long long>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                    t.time_since_epoch()).count()));
    if (n <= 0 || static_cast<size_t>(n) >= sizeof line) return warn(EOVERFLOW);
    put(line, n);
  }

  void mark(size_t index, const std::string& backend, const std::string& algorithm, size_t bytes,
            std::chrono::steady_clock::time_point begin, std::chrono::steady_clock::time_point end) {
    if (fd_ < 0) return;
    const auto ns = [](std::chrono::steady_clock::time_point t) {
      return static_cast<long long>(std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count());
    };
    char line[256];
    const int n = std::snprintf(line, sizeof line, "%zu:%s:%s:%zu %lld %lld\n", index, backend.c_str(),
                                algorithm.c_str(), bytes, ns(begin), ns(end));
    if (n <= 0 || static_cast<size_t>(n) >= sizeof line) return warn(EOVERFLOW);
    put(line, n);
  }

 private:
  void put(const char* line, int n) {
    ssize_t w = -1;
    do {
      w = ::write(fd_, line, static_cast<size_t>(n));
    } while (w < 0 && errno == EINTR);
    if (w != n) warn(w < 0 ? errno : EIO);
  }
  void warn(int err) {
    std::fprintf(stderr, "pccl-bench: cannot write phase marks to %s (PCCL_WANEM_PHASES): %s; going on without them\n",
                 path_.c_str(), std::strerror(err));
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  std::string path_;
  int fd_ = -1;
};

}  // namespace pccl::bench

#endif  // PCCL_BENCH_PHASE_LOG_HPP_
