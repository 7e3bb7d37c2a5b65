// The optimizer of a model: configuration, step count and the backend kernel that updates
// all parameters in one fused pass.
#pragma once

#include <memory>

#include "models/kernels.h"
#include "models/model.h"

namespace scalescope {

class Optimizer {
 public:
  Optimizer(const OptimizerConfig& config, Model& model);
  // One update with learning rate `lr` from the model's current gradients.
  // REQUIRES: the device current; runs on `stream`; does not synchronize the host.
  void step(float lr, Stream& stream);
  void step(Stream& stream) { step(config_.lr, stream); }
  // Dynamic loss scaling: every later step does nothing on the device where the float at
  // `found_inf` (device memory, unscale_gradients) is not 0 when it runs; the host, once it
  // has read the flag, calls rescind_step() so that such a step does not count (Adam's bias
  // correction counts only the updates made, as PyTorch's GradScaler skips optimizer.step()).
  void skip_when(const float* found_inf) { kernel_->skip_when(found_inf); }
  void rescind_step();

  const OptimizerConfig& config() const { return config_; }
  int64_t steps_done() const { return steps_done_; }
  void set_steps_done(int64_t steps) { steps_done_ = steps; }
  // Per-parameter state, in optimizer_state_names() order; each as large as the weights.
  std::vector<TensorView> state() const { return kernel_->state(); }

 private:
  OptimizerConfig config_;
  Model& model_;
  std::unique_ptr<OptimizerKernel> kernel_;
  int64_t steps_done_ = 0;
};

}  // namespace scalescope
