#include "harness/trainer/step_timer.h"

#include <utility>

#include "core/check.h"

namespace scalescope {

StepTimer::StepTimer(Device& device, Stream& stream, int max_phases, const ClockAnchor& clock)
    : stream_(stream), clock_(clock), start_(device.create_event()), end_(device.create_event()) {
  marks_.resize(static_cast<size_t>(max_phases));
  for (Mark& m : marks_) m.event = device.create_event();
}

int StepTimer::ends_per_step(int micro_batches, int64_t sync_points) {
  int64_t ends = 0;
  for (const PhaseDef& d : kPhases) {
    switch (d.ends) {
      case TimerEnds::kNone:
        break;
      case TimerEnds::kOncePerStep:
        ends += 1;
        break;
      case TimerEnds::kPerMicroBatch:
        ends += micro_batches;
        break;
      case TimerEnds::kPerSyncPoint:
        ends += 2 * sync_points;  // split(): the part before it, and the inserted phase
        break;
    }
  }
  return static_cast<int>(ends);
}

void StepTimer::start() {
  used_ = 0;
  copy_start_ = copy_end_ = nullptr;
  start_->record(stream_);
}

void StepTimer::check_room(size_t ends) const {
  SS_CHECK(used_ + ends <= marks_.size(), "a step has more than the {} phases planned",
           marks_.size());
}

void StepTimer::end_phase(Phase phase) noexcept {
  Mark& m = marks_[used_++];
  m.phase = phase;
  try {
    m.event->record(stream_);
  } catch (...) {
    if (!error_) error_ = std::current_exception();
  }
}

void StepTimer::end() {
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  end_->record(stream_);
}

PhaseTimes StepTimer::read(const ReduceTimes& reduced) const {
  PhaseTimes p;
  const Event* previous = start_.get();
  for (size_t i = 0; i < used_; ++i) {
    p[marks_[i].phase] += marks_[i].event->elapsed_ms_since(*previous);
    previous = marks_[i].event.get();
  }
  if (copy_start_ != nullptr) {
    p[Phase::kH2DTotal] = copy_end_->elapsed_ms_since(*copy_start_);
    p.copy = {clock_.host_ms(*copy_start_), p[Phase::kH2DTotal]};
  }
  p[Phase::kAllReduce] = reduced.total_ms;
  p[Phase::kGradCast] = reduced.cast_ms;
  p.step_ms = end_->elapsed_ms_since(*start_);
  p.start_ms = clock_.host_ms(*start_);
  for (size_t b = 0; b < reduced.bucket_ms.size(); ++b) {
    p.buckets.push_back({reduced.start_ms[b], reduced.bucket_ms[b]});
  }
  return p;
}

}  // namespace scalescope
