#include "harness/trainer/clock_anchor.h"

#include "core/clock.h"

namespace scalescope {

ClockAnchor::ClockAnchor(Device& device, Stream& stream, int64_t epoch_ns)
    : stream_(stream), epoch_ns_(epoch_ns), event_(device.create_event()) {
  anchor();
}

void ClockAnchor::anchor() {
  event_->record(stream_);
  event_->synchronize();
  anchored_ns_ = now_ns();
}

double ClockAnchor::host_ms(const Event& event) const {
  return static_cast<double>(anchored_ns_ - epoch_ns_) * 1e-6 + event.elapsed_ms_since(*event_);
}

double ClockAnchor::now_ms() const {
  return static_cast<double>(now_ns() - epoch_ns_) * 1e-6;
}

bool ClockAnchor::refresh(std::chrono::milliseconds age) {
  if (now_ns() - anchored_ns_ < std::chrono::nanoseconds(age).count()) return false;
  anchor();
  return true;
}

}  // namespace scalescope
