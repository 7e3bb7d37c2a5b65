#include "tests/models/kernel_math/cpu_kernels_on_host.h"

#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <limits>

#include "core/random.h"

namespace scalescope::kernel_math_test {
namespace {

constexpr int kReported = 8;

// A float's position on the number line in ulps: adjacent floats differ by one, and +0 and -0
// are both 0.
int64_t ulp_position(float v) {
  const auto bits = static_cast<int64_t>(std::bit_cast<uint32_t>(v));
  return bits & 0x80000000 ? -(bits & 0x7fffffff) : bits;
}

template <class Differs>
std::string mismatches(const std::vector<float>& got, const std::vector<float>& want,
                       Differs differs) {
  if (got.size() != want.size()) {
    return fmt::format("{} values, expected {}", got.size(), want.size());
  }
  std::string report;
  int reported = 0;
  for (size_t i = 0; i < got.size() && reported < kReported; ++i) {
    if (!differs(got[i], want[i])) continue;
    report +=
        fmt::format("[{}] = {} ({:#010x}), expected {} ({:#010x})\n", i, got[i],
                    std::bit_cast<uint32_t>(got[i]), want[i], std::bit_cast<uint32_t>(want[i]));
    ++reported;
  }
  return report;
}

}  // namespace

std::vector<float> random_floats(int64_t n, uint64_t seed, float lo, float hi) {
  Rng rng(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = rng.uniform(lo, hi);
  return v;
}

CpuLayer::CpuLayer(const LayerSpec& spec, const Shape& in,
                   const std::vector<std::vector<float>>& params, int threads)
    : device_(0, threads),
      out_shape_(output_shape(spec, in.without_batch()).with_batch(in[0])),
      x_(device_, in),
      y_(device_, out_shape_),
      dy_(device_, out_shape_),
      dx_(device_, in) {
  device_.make_current();
  LayerBinding binding{in, out_shape_, {}, {}, {}, {}, false, nullptr};
  const std::vector<ParamSpec> specs = param_specs(spec, in.without_batch());
  for (size_t i = 0; i < specs.size(); ++i) {
    params_.emplace_back(device_, specs[i].shape);
    grads_.emplace_back(device_, specs[i].shape);
    params_.back().copy_from_host(
        i < params.size() ? params[i] : std::vector<float>(specs[i].shape.numel(), 0.0f));
    binding.params.push_back(params_.back().view());
    binding.grads.push_back(grads_.back().view());
  }
  kernel_ = kernel_backend(DeviceKind::kCpu).make_layer(spec, binding, device_);
}

std::vector<float> CpuLayer::forward(const std::vector<float>& x) {
  x_.copy_from_host(x);
  kernel_->forward(x_.data(), y_.data(), device_.default_stream());
  return y_.to_host();
}

std::vector<float> CpuLayer::backward(const std::vector<float>& x, const std::vector<float>& y,
                                      const std::vector<float>& dy) {
  x_.copy_from_host(x);
  y_.copy_from_host(y);
  dy_.copy_from_host(dy);
  kernel_->backward(x_.data(), y_.data(), dy_.data(), dx_.data(), device_.default_stream());
  return dx_.to_host();
}

CpuLossResult run_cpu_loss(LossKind kind, int64_t batch, int64_t classes,
                           const std::vector<float>& z, const std::vector<float>& labels,
                           float scale) {
  CpuDevice device(0, 1);
  Stream& stream = device.default_stream();
  const auto kernel =
      kernel_backend(DeviceKind::kCpu).make_loss(kind, Shape{batch, classes}, device);
  Tensor output(device, Shape{batch, classes});
  Tensor label(device, Shape{static_cast<int64_t>(labels.size())});
  Tensor loss(device, Shape{1});
  Tensor grad(device, Shape{batch, classes});
  Tensor correct(device, Shape{1});
  output.copy_from_host(z);
  label.copy_from_host(labels);
  kernel->forward_backward(output.data(), label.data(), scale, loss.data(), grad.data(), stream);
  kernel->count_correct(output.data(), label.data(), correct.data(), stream);
  return {loss.to_host()[0], grad.to_host(), correct.to_host()[0]};
}

CpuOptimizerResult run_cpu_optimizer(const OptimizerConfig& config, const std::vector<float>& w,
                                     const std::vector<std::vector<float>>& grads,
                                     const std::vector<float>& lrs) {
  CpuDevice device(0, 1);
  const auto n = static_cast<int64_t>(w.size());
  const auto kernel = kernel_backend(DeviceKind::kCpu).make_optimizer(config, n, device);
  Tensor params(device, Shape{n});
  Tensor g(device, Shape{n});
  params.copy_from_host(w);
  for (size_t t = 0; t < grads.size(); ++t) {
    g.copy_from_host(grads[t]);
    kernel->update(params.data(), g.data(), lrs.at(t), static_cast<int64_t>(t) + 1,
                   device.default_stream());
  }
  CpuOptimizerResult result{params.to_host(), {}};
  for (const TensorView& s : kernel->state()) {
    result.state.emplace_back(s.data, s.data + s.shape.numel());
  }
  return result;
}

std::string bit_mismatches(const std::vector<float>& got, const std::vector<float>& want) {
  return mismatches(got, want, [](float a, float b) {
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) != std::isnan(b);
    return std::bit_cast<uint32_t>(a) != std::bit_cast<uint32_t>(b);
  });
}

std::string ulp_mismatches(const std::vector<float>& got, const std::vector<float>& want,
                           int64_t ulps) {
  return mismatches(got, want, [ulps](float a, float b) {
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) != std::isnan(b);
    if (std::abs(a - b) <= std::numeric_limits<float>::min()) return false;
    return std::abs(ulp_position(a) - ulp_position(b)) > ulps;
  });
}

}  // namespace scalescope::kernel_math_test
