// The host clock used for CPU timing and for putting timestamps on one epoch.
#pragma once

#include <chrono>
#include <cstdint>

namespace scalescope {

using SteadyClock = std::chrono::steady_clock;

inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(SteadyClock::now().time_since_epoch())
      .count();
}

}  // namespace scalescope
