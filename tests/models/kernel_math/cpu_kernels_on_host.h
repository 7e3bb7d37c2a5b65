// The CPU backend's kernels (kernel_backend(DeviceKind::kCpu)) run on host vectors: the results
// the kernel math (models/kernel_math/) is compared with, and comparisons of float vectors.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/cpu/cpu_device.h"
#include "core/tensor.h"
#include "models/kernels.h"
#include "models/layer_spec.h"

namespace scalescope::kernel_math_test {

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// Uniform in [lo, hi).
std::vector<float> random_floats(int64_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f);

// One CPU layer kernel for a batch of shape `in` (batch included), on a CPU device of its own
// (one thread unless told).
class CpuLayer {
 public:
  // `params` in param_specs() order; zeros where not given.
  CpuLayer(const LayerSpec& spec, const Shape& in,
           const std::vector<std::vector<float>>& params = {}, int threads = 1);

  const Shape& out_shape() const { return out_shape_; }
  std::vector<float> forward(const std::vector<float>& x);
  // The input gradient, given the forward's input x and output y (taken as they are, whatever
  // produced them); the parameter gradients are then param_grad(i).
  std::vector<float> backward(const std::vector<float>& x, const std::vector<float>& y,
                              const std::vector<float>& dy);
  std::vector<float> param_grad(size_t i) const { return grads_.at(i).to_host(); }

 private:
  CpuDevice device_;  // first: outlives the tensors
  Shape out_shape_;
  Tensor x_, y_, dy_, dx_;
  std::vector<Tensor> params_, grads_;
  std::unique_ptr<LayerKernel> kernel_;
};

struct CpuLossResult {
  float loss = 0.0f;  // scale × the sum of the per-sample losses
  std::vector<float> grad;
  float correct = 0.0f;  // count_correct()
};
// The CPU loss on output z [batch, classes] and `labels` (the loss's label shape).
CpuLossResult run_cpu_loss(LossKind kind, int64_t batch, int64_t classes,
                           const std::vector<float>& z, const std::vector<float>& labels,
                           float scale);

struct CpuOptimizerResult {
  std::vector<float> params;
  std::vector<std::vector<float>> state;  // optimizer_state_names() order
};
// Updates of the CPU optimizer from params w: step t (from 1) with grads[t - 1] and lrs[t - 1].
CpuOptimizerResult run_cpu_optimizer(const OptimizerConfig& config, const std::vector<float>& w,
                                     const std::vector<std::vector<float>>& grads,
                                     const std::vector<float>& lrs);

// Failures (the first few, by index) where got and want differ in their bits, any NaN being
// equal to any other (the sign and payload of a NaN mean nothing); "" if none.
std::string bit_mismatches(const std::vector<float>& got, const std::vector<float>& want);
// Failures where got and want differ by more than `ulps` units in the last place (or, near zero,
// by more than FLT_MIN, the smallest normal float), or one is NaN and the other not; "" if none.
std::string ulp_mismatches(const std::vector<float>& got, const std::vector<float>& want,
                           int64_t ulps);

}  // namespace scalescope::kernel_math_test
