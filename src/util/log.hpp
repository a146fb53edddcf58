// One-line-per-event logging to stderr, or appended to the file PCCL_LOG_FILE names. Level from
// PCCL_LOG_LEVEL (error|warn|info|debug|trace), default warn in the library; pccl-master raises it to
// info (or --log-level). Events of a peer carry key=value fields: peer=, epoch=, tag=.
#ifndef PCCL_UTIL_LOG_HPP_
#define PCCL_UTIL_LOG_HPP_

#include <fmt/format.h>

#include <string_view>

namespace pccl::log {

enum class Level : int { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3, kTrace = 4 };

Level level();
void setLevel(Level level);
// Parses "error".."trace" (case-insensitive) or a digit; false when unknown.
bool parseLevel(std::string_view text, Level* out);
void write(Level level, std::string_view component, std::string_view message);

inline bool enabled(Level l) { return static_cast<int>(l) <= static_cast<int>(level()); }

}  // namespace pccl::log

#define PCCL_LOG_AT_(lvl, component, ...)                                   \
  do {                                                                     \
    if (::pccl::log::enabled(lvl))                                         \
      ::pccl::log::write(lvl, component, fmt::format(__VA_ARGS__));        \
  } while (0)
#define PCCL_LOG_ERROR(component, ...) PCCL_LOG_AT_(::pccl::log::Level::kError, component, __VA_ARGS__)
#define PCCL_LOG_WARN(component, ...) PCCL_LOG_AT_(::pccl::log::Level::kWarn, component, __VA_ARGS__)
#define PCCL_LOG_INFO(component, ...) PCCL_LOG_AT_(::pccl::log::Level::kInfo, component, __VA_ARGS__)
#define PCCL_LOG_DEBUG(component, ...) PCCL_LOG_AT_(::pccl::log::Level::kDebug, component, __VA_ARGS__)
#define PCCL_LOG_TRACE(component, ...) PCCL_LOG_AT_(::pccl::log::Level::kTrace, component, __VA_ARGS__)

#endif  // PCCL_UTIL_LOG_HPP_
