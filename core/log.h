// Minimal leveled logging to stderr; thread-safe, one line per call.
#pragma once

#include <fmt/format.h>

#include <optional>
#include <string_view>

namespace scalescope {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3, kOff = 4 };

// Default kInfo, or SCALESCOPE_LOG=debug|info|warn|error|off from the environment; any other
// value is named in a warning on stderr and logs at kInfo.
LogLevel log_level();
// The level a name (debug, info, warn, error, off) stands for; nullopt for any other text.
std::optional<LogLevel> parse_log_level(std::string_view name);
void set_log_level(LogLevel level);
void log_line(LogLevel level, std::string_view text);

}  // namespace scalescope

#define SS_DETAIL_LOG_AT(level, ...)                               \
  do {                                                             \
    if (::scalescope::log_level() <= (level))                      \
      ::scalescope::log_line((level), ::fmt::format(__VA_ARGS__)); \
  } while (0)
#define SS_LOG_DEBUG(...) SS_DETAIL_LOG_AT(::scalescope::LogLevel::kDebug, __VA_ARGS__)
#define SS_LOG_INFO(...) SS_DETAIL_LOG_AT(::scalescope::LogLevel::kInfo, __VA_ARGS__)
#define SS_LOG_WARN(...) SS_DETAIL_LOG_AT(::scalescope::LogLevel::kWarn, __VA_ARGS__)
#define SS_LOG_ERROR(...) SS_DETAIL_LOG_AT(::scalescope::LogLevel::kError, __VA_ARGS__)
