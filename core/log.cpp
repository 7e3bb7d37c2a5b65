#include "core/log.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#include "core/error.h"

namespace scalescope {
namespace {

LogLevel level_from_env() {
  const char* env = std::getenv("SCALESCOPE_LOG");
  if (env == nullptr) return LogLevel::kInfo;
  const std::string value = env;
  if (value == "debug") return LogLevel::kDebug;
  if (value == "warn") return LogLevel::kWarn;
  if (value == "error") return LogLevel::kError;
  if (value == "off") return LogLevel::kOff;
  return LogLevel::kInfo;
}

std::atomic<LogLevel>& level_ref() {
  static std::atomic<LogLevel> level{level_from_env()};
  return level;
}

constexpr const char* kNames[] = {"debug", "info", "warn", "error", "off"};

}  // namespace

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
