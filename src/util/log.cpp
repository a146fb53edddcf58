#include "util/log.hpp"

#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>

namespace pccl::log {
namespace {

Level levelFromEnv() {
  const char* env = std::getenv("PCCL_LOG_LEVEL");
  Level l = Level::kWarn;
  if (env != nullptr && !parseLevel(env, &l)) {
    std::fprintf(stderr, "pccl: ignoring unknown PCCL_LOG_LEVEL '%s' (use error|warn|info|debug|trace)\n", env);
  }
  return l;
}

// PCCL_LOG_FILE: append the lines to that file instead of stderr (opened once; stderr if it cannot be).
std::FILE* sink() {
  static std::FILE* file = [] {
    const char* path = std::getenv("PCCL_LOG_FILE");
    if (path == nullptr || *path == '\0') return stderr;
    std::FILE* f = std::fopen(path, "ae");
    if (f == nullptr) {
      std::fprintf(stderr, "pccl: cannot open PCCL_LOG_FILE '%s'; logging to stderr\n", path);
      return stderr;
    }
    std::setvbuf(f, nullptr, _IOLBF, 0);
    return f;
  }();
  return file;
}

std::atomic<int>& levelStore() {
  static std::atomic<int> store{static_cast<int>(levelFromEnv())};
  return store;
}

const char* levelTag(Level l) {
  switch (l) {
    case Level::kError: return "ERROR";
    case Level::kWarn: return "WARN ";
    case Level::kInfo: return "INFO ";
    case Level::kDebug: return "DEBUG";
    case Level::kTrace: return "TRACE";
  }
  return "?";
}

}  // namespace

Level level() { return static_cast<Level>(levelStore().load(std::memory_order_relaxed)); }
void setLevel(Level l) { levelStore().store(static_cast<int>(l), std::memory_order_relaxed); }

bool parseLevel(std::string_view text, Level* out) {
  std::string s;
  for (char c : text) s.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  static constexpr const char* kNames[] = {"error", "warn", "info", "debug", "trace"};
  for (int i = 0; i < 5; ++i) {
    if (s == kNames[i] || (s.size() == 1 && s[0] == '0' + i)) {
      *out = static_cast<Level>(i);
      return true;
    }
  }
  if (s == "warning") {
    *out = Level::kWarn;
    return true;
  }
  return false;
}

void write(Level l, std::string_view component, std::string_view message) {
  using namespace std::chrono;
  auto now = system_clock::now();
  std::time_t t = system_clock::to_time_t(now);
  auto ms = duration_cast<milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  localtime_r(&t, &tm);
  // One fprintf per line so lines from different threads never interleave.
  std::fprintf(sink(), "[%02d:%02d:%02d.%03d pccl %s %d %.*s] %.*s\n", tm.tm_hour, tm.tm_min, tm.tm_sec,
               static_cast<int>(ms), levelTag(l), static_cast<int>(getpid()),
               static_cast<int>(component.size()), component.data(), static_cast<int>(message.size()),
               message.data());
}

}  // namespace pccl::log
