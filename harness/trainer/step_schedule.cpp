#include "harness/trainer/step_schedule.h"

#include <algorithm>

#include "reports/analysis/stats.h"

namespace scalescope {

StepSchedule::StepSchedule(const TrainOptions& o, int64_t steps)
    : adaptive_(o.adaptive_warmup),
      measured_steps_(o.steps),
      last_step_(adaptive_.enabled ? adaptive_.max_steps + o.steps : steps),
      warmup_steps_(adaptive_.enabled ? -1 : std::min(o.warmup_steps, steps - 1)) {}

void StepSchedule::observe(int64_t step, double group_step_ms) {
  if (!deciding()) return;
  warmup_ms_.push_back(group_step_ms);
  const SteadyState s = detect_steady_state(warmup_ms_, adaptive_.steady);
  if (s.settled || step >= adaptive_.max_steps) {
    settled_ = s.settled;
    warmup_steps_ = step;
    last_step_ = step + measured_steps_;
  }
}

}  // namespace scalescope
