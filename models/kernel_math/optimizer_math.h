// One parameter's optimizer update, operation for operation as the CPU optimizers (PyTorch's
// single-tensor torch.optim.SGD and Adam): with every operation rounded as written (see
// host_device.h), the GPU's weights are the CPU's bits. sqrt and division are IEEE-rounded on
// both (nvcc's defaults without --use_fast_math).
#pragma once

#include <cmath>
#include <cstdint>

#include "models/kernel_math/host_device.h"

namespace scalescope::kernel_math {

// SGD without momentum: w - lr (g + wd w).
SS_HOST_DEVICE inline float sgd_step(float w, float g, float lr, float weight_decay) {
  return w - lr * (g + weight_decay * w);
}

// SGD with momentum, no dampening: d = g + wd w; v = momentum v + d; w - lr v. v starts at zero,
// so the first step gives v = d.
struct SgdMomentumStep {
  float w, v;
};
SS_HOST_DEVICE inline SgdMomentumStep sgd_momentum_step(float w, float g, float v, float lr,
                                                        float weight_decay, float momentum) {
  const float d = g + weight_decay * w;
  const float v_next = momentum * v + d;
  return {w - lr * v_next, v_next};
}

// The scalars of an Adam step that do not depend on the element.
struct AdamScalars {
  float weight_decay, beta1, beta2, one_minus_beta1, one_minus_beta2, eps;
  float step_size;              // lr / (1 - beta1^t)
  float bias_correction2_sqrt;  // sqrt(1 - beta2^t)
};

// The scalars of Adam's step `step` (counted from 1), on the host: the bias corrections in double,
// since beta2^t loses most of its digits in float.
inline AdamScalars adam_scalars(float lr, int64_t step, float weight_decay, float beta1,
                                float beta2, float eps) {
  const double t = static_cast<double>(step);
  const double bias_correction1 = 1.0 - std::pow(static_cast<double>(beta1), t);
  const double bias_correction2 = 1.0 - std::pow(static_cast<double>(beta2), t);
  return {.weight_decay = weight_decay,
          .beta1 = beta1,
          .beta2 = beta2,
          .one_minus_beta1 = 1.0f - beta1,
          .one_minus_beta2 = 1.0f - beta2,
          .eps = eps,
          .step_size = static_cast<float>(static_cast<double>(lr) / bias_correction1),
          .bias_correction2_sqrt = static_cast<float>(std::sqrt(bias_correction2))};
}

// Adam: w -= step_size · m / (sqrt(v) / sqrt(1 - beta2^t) + eps), as PyTorch evaluates it.
struct AdamStep {
  float w, m, v;
};
SS_HOST_DEVICE inline AdamStep adam_step(float w, float g, float m, float v, const AdamScalars& s) {
  const float d = g + s.weight_decay * w;
  const float m_next = s.beta1 * m + s.one_minus_beta1 * d;
  const float v_next = s.beta2 * v + s.one_minus_beta2 * d * d;
  const float denom = sqrtf(v_next) / s.bias_correction2_sqrt + s.eps;
  return {w - s.step_size * (m_next / denom), m_next, v_next};
}

}  // namespace scalescope::kernel_math
