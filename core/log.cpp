#include "core/log.h"

#include <atomic>
#include <cstdio>
#include <mutex>
#include <string>

#include "core/env.h"
#include "core/error.h"

namespace scalescope {
namespace {

constexpr const char* kNames[] = {"debug", "info", "warn", "error", "off"};

LogLevel level_from_env() {
  const std::string env = text_from_environment("SCALESCOPE_LOG");
  if (env.empty()) return LogLevel::kInfo;
  if (const std::optional<LogLevel> level = parse_log_level(env)) return *level;
  log_line(LogLevel::kWarn,
           fmt::format("SCALESCOPE_LOG={}: not a level (debug, info, warn, error or off); "
                       "logging at info",
                       env));
  return LogLevel::kInfo;
}

std::atomic<LogLevel>& level_ref() {
  static std::atomic<LogLevel> level{level_from_env()};
  return level;
}

}  // namespace

std::optional<LogLevel> parse_log_level(std::string_view name) {
  for (int i = 0; i < static_cast<int>(std::size(kNames)); ++i) {
    if (name == kNames[i]) return static_cast<LogLevel>(i);
  }
  return std::nullopt;
}

LogLevel log_level() {
  return level_ref().load(std::memory_order_relaxed);
}
void set_log_level(LogLevel level) {
  level_ref().store(level, std::memory_order_relaxed);
}

void log_line(LogLevel level, std::string_view text) {
  static std::mutex mutex;
  const int rank = thread_rank();
  const std::string prefix =
      rank >= 0 ? fmt::format("[scalescope {} rank {}] ", kNames[static_cast<int>(level)], rank)
                : fmt::format("[scalescope {}] ", kNames[static_cast<int>(level)]);
  std::lock_guard lock(mutex);
  fmt::print(stderr, "{}{}\n", prefix, text);
  std::fflush(stderr);
}

}  // namespace scalescope
