// How a host thread polls for device work without sleeping through its end or burning a core
// on a long wait: it yields for the first milliseconds (a step's end is usually that close,
// and a sleep would leave the device idle until the thread wakes), then sleeps, doubling from
// 50 µs up to 200 µs, which bounds how late the end of a long wait is noticed.
#pragma once

#include <algorithm>
#include <chrono>
#include <thread>

namespace scalescope {

class Backoff {
 public:
  static constexpr std::chrono::milliseconds kYieldFor{2};
  static constexpr std::chrono::microseconds kLongestSleep{200};

  void pause() {
    if (std::chrono::steady_clock::now() - start_ < kYieldFor) {
      std::this_thread::yield();
      return;
    }
    std::this_thread::sleep_for(sleep_);
    sleep_ = std::min(sleep_ * 2, kLongestSleep);
  }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::chrono::microseconds sleep_{50};
};

}  // namespace scalescope
