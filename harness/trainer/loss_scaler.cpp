#include "harness/trainer/loss_scaler.h"

#include <cmath>

#include "core/check.h"

namespace scalescope {

LossScaler::LossScaler(const LossScaling& config) : config_(config), scale_(config.initial_scale) {
  SS_CHECK(std::isfinite(config.initial_scale) && config.initial_scale > 0.0f,
           "the initial loss scale {} must be positive", config.initial_scale);
  SS_CHECK(config.growth_factor > 1.0f && config.backoff_factor > 0.0f &&
               config.backoff_factor < 1.0f && config.growth_interval >= 1,
           "loss scaling grows by {} (must be > 1) every {} steps (>= 1) and backs off by {} (in "
           "(0, 1))",
           config.growth_factor, config.growth_interval, config.backoff_factor);
}

void LossScaler::restore(float scale, int64_t clean_steps) {
  SS_CHECK(std::isfinite(scale) && scale > 0.0f, "a saved loss scale of {} cannot go on training",
           scale);
  SS_CHECK(clean_steps >= 0 && clean_steps < config_.growth_interval,
           "a saved count of {} clean steps is not below the growth interval {}", clean_steps,
           config_.growth_interval);
  scale_ = scale;
  clean_steps_ = clean_steps;
}

bool LossScaler::update(int64_t step, bool found_inf) {
  if (found_inf) {
    scale_ *= config_.backoff_factor;
    clean_steps_ = 0;
    skipped_.push_back(step);
    ++skipped_in_a_row_;
    // Below fp16's smallest value no gradient survives the scaling: training has stopped.
    SS_CHECK(scale_ >= std::ldexp(1.0f, -24),
             "fp16 training stopped: the gradients overflowed in every step from step {} to {} "
             "whatever the loss scale (now {:g}); a NaN in the model or its input, or a learning "
             "rate too high?",
             step - skipped_in_a_row_ + 1, step, scale_);
    return true;
  }
  skipped_in_a_row_ = 0;
  if (++clean_steps_ == config_.growth_interval) {
    // GradScaler keeps the old scale where growing it would overflow float.
    const float grown = scale_ * config_.growth_factor;
    if (std::isfinite(grown)) scale_ = grown;
    clean_steps_ = 0;
  }
  return false;
}

}  // namespace scalescope
