// Dynamic loss scaling for fp16 training, PyTorch GradScaler's rule with its defaults: the loss
// (and so every gradient) is multiplied by the scale before backward, so that small gradients
// survive fp16; the optimizer sees them divided by it again. A step whose all-reduced gradients
// hold an infinity or a NaN is skipped and the scale halved; 2000 clean steps in a row double it.
// Every replica decides from the same all-reduced gradients, so all decide alike.
#pragma once

#include <cstdint>
#include <vector>

namespace scalescope {

struct LossScaling {
  float initial_scale = 65536.0f;  // 2^16
  float growth_factor = 2.0f;
  float backoff_factor = 0.5f;
  int64_t growth_interval = 2000;  // clean steps in a row before the scale grows
};

class LossScaler {
 public:
  explicit LossScaler(const LossScaling& config = {});

  const LossScaling& config() const { return config_; }
  // What the next step multiplies its loss by.
  float scale() const { return scale_; }
  // After step `step`, with whether its all-reduced gradients overflowed: the next scale.
  // Returns whether the step was skipped (it overflowed). Throws Error when overflows have
  // halved the scale below fp16's smallest value: no step can succeed any more.
  bool update(int64_t step, bool found_inf);
  // Clean steps since the scale last changed (GradScaler's growth tracker).
  int64_t clean_steps() const { return clean_steps_; }
  // Goes on from a saved state (a checkpoint's, as GradScaler's load_state_dict): Error when
  // the scale is not positive and finite or the count not below the growth interval.
  void restore(float scale, int64_t clean_steps);
  // The steps skipped so far, in order.
  const std::vector<int64_t>& skipped_steps() const { return skipped_; }

 private:
  LossScaling config_;
  float scale_;
  int64_t clean_steps_ = 0;  // since the last overflow or growth (GradScaler's growth tracker)
  int64_t skipped_in_a_row_ = 0;
  std::vector<int64_t> skipped_;
};

}  // namespace scalescope
