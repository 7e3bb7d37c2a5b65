// A CPU layer kernel bound to tensors of its own, the inputs the layer tests feed it and how
// they compare its results with the float64 reference (tests/models/reference.h): shared by
// layers_test.cpp and norm_layers_test.cpp.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/cpu/cpu_device.h"
#include "core/random.h"
#include "core/tensor.h"
#include "models/kernels.h"
#include "models/layer_spec.h"
#include "tests/models/layer_cases.h"

namespace scalescope::testing_util {

// fp32 kernels against a float64 reference of the same inputs: sums of up to ~100 products
// of values in [-1, 1] stay well inside this.
inline constexpr double kForwardAbs = 1e-5;
inline constexpr double kForwardRel = 1e-5;

inline std::vector<double> to_double(const std::vector<float>& v) {
  return {v.begin(), v.end()};
}

// Uniform in [-1, 1], away from 0 so that no ReLU input sits within a finite-difference step
// of its kink.
inline std::vector<float> random_values(int64_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) {
    x = rng.uniform(-1.0f, 1.0f);
    if (std::abs(x) < 0.01f) x += 0.02f;
  }
  return v;
}

// Pairwise distinct values in (-1, 1) in random order, at least 2/n apart: max pooling has no
// ties, so its gradient is defined and a finite-difference step never changes the argmax.
inline std::vector<float> distinct_values(int64_t n, uint64_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    v[static_cast<size_t>(i)] =
        static_cast<float>((2.0 * static_cast<double>(i) + 1.0) / static_cast<double>(n) - 1.0);
  }
  Rng rng(seed);
  for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[rng.below(i)]);
  return v;
}

// Token ids below the vocabulary (an embedding's input), a few of them never drawn.
inline std::vector<float> token_ids(int64_t n, int64_t vocab, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = static_cast<float>(rng.below(static_cast<uint64_t>(vocab - 2)));
  return v;
}

inline std::vector<float> layer_input(const LayerCase& c, uint64_t seed) {
  if (const auto* e = std::get_if<EmbeddingSpec>(&c.spec)) {
    return token_ids(c.in.numel(), e->vocab, seed);
  }
  return std::holds_alternative<MaxPool2DSpec>(c.spec) ? distinct_values(c.in.numel(), seed)
                                                       : random_values(c.in.numel(), seed);
}

// One kernel bound to tensors of its own on a CPU device.
struct BoundLayer {
  // With `pool`, the kernel's pass-local memory is there, as a model's plan binds it; with
  // `relu`, the kernel runs a ReLU that follows it in both passes (LayerBinding::activation and
  // relu_backward).
  explicit BoundLayer(const LayerCase& c, std::shared_ptr<TransientPool> pool = nullptr,
                      bool relu = false)
      : device(0, c.threads),
        in_shape(c.in),
        out_shape(output_shape(c.spec, c.in.without_batch()).with_batch(c.in[0])),
        in(device, in_shape),
        out(device, out_shape),
        dout(device, out_shape),
        din(device, in_shape) {
    device.make_current();
    LayerBinding binding{in_shape, out_shape, {}, {}, {}, {}, false, pool};
    if (relu) binding.activation = Activation::kRelu;
    binding.relu_backward = relu;
    for (const ParamSpec& p : param_specs(c.spec, c.in.without_batch())) {
      params.emplace_back(device, p.shape);
      grads.emplace_back(device, p.shape);
      binding.params.push_back(params.back().view());
      binding.grads.push_back(grads.back().view());
    }
    // As a model initialises them: batch norm's running mean 0, running variance 1.
    for (const ParamSpec& p : buffer_specs(c.spec, c.in.without_batch())) {
      buffers.emplace_back(device, p.shape);
      buffers.back().copy_from_host(
          std::vector<float>(static_cast<size_t>(p.shape.numel()), p.fill));
      binding.buffers.push_back(buffers.back().view());
    }
    kernel = kernel_backend(DeviceKind::kCpu).make_layer(c.spec, binding, device);
    if (pool) pool->allocate(device);
  }

  void forward() { kernel->forward(in.data(), out.data(), device.default_stream()); }
  void backward(bool with_din) {
    kernel->backward(in.data(), out.data(), dout.data(), with_din ? din.data() : nullptr,
                     device.default_stream());
  }
  std::vector<std::vector<double>> host_params() const {
    std::vector<std::vector<double>> host;
    for (const Tensor& p : params) host.push_back(to_double(p.to_host()));
    return host;
  }

  CpuDevice device;  // first: outlives the tensors
  Shape in_shape, out_shape;
  Tensor in, out, dout, din;
  std::vector<Tensor> params, grads, buffers;
  std::unique_ptr<LayerKernel> kernel;
};

inline void fill_random_params(BoundLayer& layer, uint64_t seed) {
  for (size_t i = 0; i < layer.params.size(); ++i) {
    layer.params[i].copy_from_host(random_values(layer.params[i].numel(), seed + 100 + i));
  }
}

// Expects |actual - expected| <= abs + rel·|expected| elementwise; reports the first few
// mismatches by index.
inline void expect_close(const std::vector<float>& actual, const std::vector<double>& expected,
                         double abs, double rel, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double diff = std::abs(static_cast<double>(actual[i]) - expected[i]);
    if (diff <= abs + rel * std::abs(expected[i])) continue;
    ADD_FAILURE() << what << "[" << i << "] = " << actual[i] << ", expected " << expected[i]
                  << " (difference " << diff << ")";
    if (++reported == 8) {
      ADD_FAILURE() << what << ": more mismatches not shown";
      return;
    }
  }
}

}  // namespace scalescope::testing_util
