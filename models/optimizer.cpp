#include "models/optimizer.h"

#include "core/check.h"
#include "core/enum_names.h"

namespace scalescope {

const char* to_string(OptimizerKind kind) {
  static constexpr auto kNames = enum_names<OptimizerKind>("sgd", "adam");
  return kNames(kind).data();
}

std::vector<std::string> optimizer_state_names(const OptimizerConfig& config) {
  if (config.kind == OptimizerKind::kSgd) {
    if (config.momentum > 0.0f) return {"momentum_buffer"};
    return {};
  }
  return {"exp_avg", "exp_avg_sq"};
}

Optimizer::Optimizer(const OptimizerConfig& config, Model& model) : config_(config), model_(model) {
  // 0 keeps the weights as they are (measurements at fixed weights).
  SS_CHECK(std::isfinite(config.lr) && config.lr >= 0.0f, "learning rate {} must be 0 or positive",
           config.lr);
  SS_CHECK(config.weight_decay >= 0.0f, "weight decay {} must not be negative",
           config.weight_decay);
  SS_CHECK(config.momentum >= 0.0f && config.momentum < 1.0f, "momentum {} must be in [0, 1)",
           config.momentum);
  SS_CHECK(
      config.beta1 >= 0.0f && config.beta1 < 1.0f && config.beta2 >= 0.0f && config.beta2 < 1.0f,
      "Adam betas ({}, {}) must be in [0, 1)", config.beta1, config.beta2);
  SS_CHECK(config.epsilon > 0.0f, "Adam epsilon {} must be positive", config.epsilon);
  kernel_ = kernel_backend(model.device().id().kind)
                .make_optimizer(config, model.flat_size(), model.device());
}

void Optimizer::step(float lr, Stream& stream) {
  ++steps_done_;
  kernel_->update(model_.weights().data(), model_.grads().data(), lr, steps_done_, stream);
}

void Optimizer::rescind_step() {
  SS_CHECK(steps_done_ > 0, "no optimizer step to rescind");
  --steps_done_;
}

}  // namespace scalescope
