// How long a replica trains and which of its steps are measured: a fixed warm-up and length,
// or an adaptive warm-up that lasts until the group's step time settles
// (detect_steady_state), at most a bound, followed by the measured steps. Every replica
// observes the same group step times, so all of them decide alike.
#pragma once

#include <cstdint>
#include <vector>

#include "harness/trainer/options.h"

namespace scalescope {

class StepSchedule {
 public:
  // `steps`: the run's length when fixed (RunPlan::steps; ignored with an adaptive warm-up).
  StepSchedule(const TrainOptions& options, int64_t steps);

  // The last step (1-based); with an adaptive warm-up, the most it could be until decided.
  int64_t last_step() const { return last_step_; }
  // Training ends after step `step` (a target was reached there).
  void stop_after(int64_t step) { last_step_ = step; }
  // Whether the adaptive warm-up still waits for the step time to settle.
  bool deciding() const { return warmup_steps_ < 0; }
  // The group's time of step `step` (the slowest replica's), while deciding.
  void observe(int64_t step, double group_step_ms);
  // Step `step`'s number among the measured steps (1-based); 0 for a warm-up step.
  int64_t measured(int64_t step) const {
    return warmup_steps_ >= 0 && step > warmup_steps_ ? step - warmup_steps_ : 0;
  }
  int64_t warmup_steps() const { return warmup_steps_; }
  // Whether the warm-up ended because the step time settled (false: at its bound).
  bool settled() const { return settled_; }

 private:
  const TrainOptions::AdaptiveWarmup& adaptive_;
  int64_t measured_steps_;
  int64_t last_step_;
  int64_t warmup_steps_;  // -1 while deciding
  bool settled_ = true;
  std::vector<double> warmup_ms_;
};

}  // namespace scalescope
