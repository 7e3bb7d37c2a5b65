// Device event times on the run's host clock (ms since the run began, core/clock.h). An event
// recorded on a stream and waited for gives the offset between the clocks; an event's host
// time is then the anchor's plus the event's distance from it. Re-anchored now and then,
// because a GPU's elapsed times are float milliseconds whose resolution falls with the
// distance (about 0.25 ms an hour away), and device and host clocks drift apart.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>

#include "core/device.h"

namespace scalescope {

class ClockAnchor {
 public:
  // Anchors on `stream` now: records an event and waits for it. `epoch_ns`: when the run
  // began (core/clock.h now_ns()). REQUIRES: `stream` belongs to `device`.
  ClockAnchor(Device& device, Stream& stream, int64_t epoch_ns);

  // When `event` was reached, in ms since the run began. REQUIRES: `event` was recorded on a
  // stream of this device and has been reached.
  double host_ms(const Event& event) const;
  // Anchors again when the anchor is older than `age`: waits for the stream, so call it
  // between steps only. Returns whether it did.
  bool refresh(std::chrono::milliseconds age);
  // The host clock now, in ms since the run began.
  double now_ms() const;
  int64_t epoch_ns() const { return epoch_ns_; }

 private:
  void anchor();

  Stream& stream_;
  int64_t epoch_ns_;
  std::unique_ptr<Event> event_;
  int64_t anchored_ns_ = 0;  // host time at which event_ was reached
};

}  // namespace scalescope
