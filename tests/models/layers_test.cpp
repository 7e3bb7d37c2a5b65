// The CPU layer kernels against the float64 reference (tests/models/reference.h): forward
// values, and gradients against central finite differences of the reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "core/cpu/cpu_device.h"
#include "core/error.h"
#include "core/random.h"
#include "core/tensor.h"
#include "models/cpu/cpu_kernels.h"
#include "models/kernels.h"
#include "models/layer_spec.h"
#include "tests/models/layer_cases.h"
#include "tests/models/precision_scope.h"
#include "tests/models/reference.h"

namespace scalescope {
namespace {

// fp32 kernels against a float64 reference of the same inputs: sums of up to ~100 products
// of values in [-1, 1] stay well inside this.
constexpr double kForwardAbs = 1e-5;
constexpr double kForwardRel = 1e-5;
// Analytic fp32 gradients against float64 central differences (whose own error is ~1e-9).
constexpr double kGradAbs = 1e-4;
constexpr double kGradRel = 1e-3;
constexpr double kStep = 1e-6;

std::vector<double> to_double(const std::vector<float>& v) {
  return {v.begin(), v.end()};
}

// Uniform in [-1, 1], away from 0 so that no ReLU input sits within a finite-difference step
// of its kink.
std::vector<float> random_values(int64_t n, uint64_t seed) {
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
std::vector<float> distinct_values(int64_t n, uint64_t seed) {
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
std::vector<float> token_ids(int64_t n, int64_t vocab, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = static_cast<float>(rng.below(static_cast<uint64_t>(vocab - 2)));
  return v;
}

std::vector<float> layer_input(const LayerCase& c, uint64_t seed) {
  if (const auto* e = std::get_if<EmbeddingSpec>(&c.spec)) {
    return token_ids(c.in.numel(), e->vocab, seed);
  }
  return std::holds_alternative<MaxPool2DSpec>(c.spec) ? distinct_values(c.in.numel(), seed)
                                                       : random_values(c.in.numel(), seed);
}

// One kernel bound to tensors of its own on a CPU device.
struct BoundLayer {
  explicit BoundLayer(const LayerCase& c)
      : device(0, c.threads),
        in_shape(c.in),
        out_shape(output_shape(c.spec, c.in.without_batch()).with_batch(c.in[0])),
        in(device, in_shape),
        out(device, out_shape),
        dout(device, out_shape),
        din(device, in_shape) {
    device.make_current();
    LayerBinding binding{in_shape, out_shape, {}, {}, {}, {}, false};
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

void fill_random_params(BoundLayer& layer, uint64_t seed) {
  for (size_t i = 0; i < layer.params.size(); ++i) {
    layer.params[i].copy_from_host(random_values(layer.params[i].numel(), seed + 100 + i));
  }
}

// Expects |actual - expected| <= abs + rel·|expected| elementwise; reports the first few
// mismatches by index.
void expect_close(const std::vector<float>& actual, const std::vector<double>& expected, double abs,
                  double rel, const std::string& what) {
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

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  return std::inner_product(a.begin(), a.end(), b.begin(), 0.0);
}

class LayerCheck : public ::testing::TestWithParam<LayerCase> {};

TEST_P(LayerCheck, ForwardMatchesReference) {
  const LayerCase& c = GetParam();
  BoundLayer layer(c);
  const std::vector<float> x = layer_input(c, 1);
  layer.in.copy_from_host(x);
  fill_random_params(layer, 1);
  layer.forward();
  const std::vector<double> expected =
      reference_forward(c.spec, c.in, to_double(x), layer.host_params());
  expect_close(layer.out.to_host(), expected, kForwardAbs, kForwardRel, "out");
}

// L = sum(out ⊙ R) for a fixed random R, so dL/dout = R. The kernel's backward (after a
// forward of x with its parameters as set) against central differences of L computed with the
// float64 reference, for the input and every parameter.
void expect_gradients_match_reference(const LayerCase& c, BoundLayer& layer,
                                      const std::vector<float>& x, const std::vector<float>& r) {
  layer.in.copy_from_host(x);
  layer.dout.copy_from_host(r);
  for (Tensor& g : layer.grads) g.copy_from_host(std::vector<float>(g.numel(), 1e30f));
  layer.forward();
  layer.backward(/*with_din=*/true);

  std::vector<double> input = to_double(x);
  std::vector<std::vector<double>> params = layer.host_params();
  const std::vector<double> weights = to_double(r);
  const auto loss = [&] { return dot(reference_forward(c.spec, c.in, input, params), weights); };
  const auto numeric_gradient = [&](std::vector<double>& values) {
    std::vector<double> grad(values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      const double saved = values[i];
      values[i] = saved + kStep;
      const double up = loss();
      values[i] = saved - kStep;
      const double down = loss();
      values[i] = saved;
      grad[i] = (up - down) / (2.0 * kStep);
    }
    return grad;
  };

  if (std::holds_alternative<EmbeddingSpec>(c.spec)) {
    // Token ids are not differentiable: zeros, as PyTorch gives none.
    expect_close(layer.din.to_host(), std::vector<double>(input.size(), 0.0), 0.0, 0.0, "din");
  } else {
    expect_close(layer.din.to_host(), numeric_gradient(input), kGradAbs, kGradRel, "din");
  }
  for (size_t i = 0; i < params.size(); ++i) {
    expect_close(layer.grads[i].to_host(), numeric_gradient(params[i]), kGradAbs, kGradRel,
                 "grad " + std::to_string(i));
  }
}

TEST_P(LayerCheck, GradientsMatchFiniteDifferences) {
  const LayerCase& c = GetParam();
  BoundLayer layer(c);
  fill_random_params(layer, 2);
  expect_gradients_match_reference(c, layer, layer_input(c, 2),
                                   random_values(layer.out_shape.numel(), 3));
}

// The first layer's backward gets no din: it must still overwrite the parameter gradients
// with the same values as a full backward.
TEST_P(LayerCheck, BackwardWithoutDinStillWritesParameterGradients) {
  const LayerCase& c = GetParam();
  BoundLayer layer(c);
  layer.in.copy_from_host(layer_input(c, 4));
  layer.dout.copy_from_host(random_values(layer.out_shape.numel(), 5));
  fill_random_params(layer, 4);
  layer.forward();
  layer.backward(/*with_din=*/true);
  std::vector<std::vector<float>> full;
  for (const Tensor& g : layer.grads) full.push_back(g.to_host());
  for (Tensor& g : layer.grads) g.copy_from_host(std::vector<float>(g.numel(), -7.0f));
  layer.backward(/*with_din=*/false);
  for (size_t i = 0; i < layer.grads.size(); ++i) {
    EXPECT_EQ(layer.grads[i].to_host(), full[i]) << "grad " << i;
  }
}

// The optimizer updates weights in place between steps, and the model passes a new input
// buffer each batch: a second forward must see both.
TEST_P(LayerCheck, ForwardFollowsNewInputsAndWeightsUpdatedInPlace) {
  const LayerCase& c = GetParam();
  BoundLayer layer(c);
  layer.in.copy_from_host(layer_input(c, 6));
  fill_random_params(layer, 6);
  layer.forward();

  fill_random_params(layer, 7);
  Tensor other_in(layer.device, layer.in_shape);
  Tensor other_out(layer.device, layer.out_shape);
  const std::vector<float> x = layer_input(c, 7);
  other_in.copy_from_host(x);
  layer.kernel->forward(other_in.data(), other_out.data(), layer.device.default_stream());
  const std::vector<double> expected =
      reference_forward(c.spec, c.in, to_double(x), layer.host_params());
  expect_close(other_out.to_host(), expected, kForwardAbs, kForwardRel, "out");
}

INSTANTIATE_TEST_SUITE_P(Layers, LayerCheck, ::testing::ValuesIn(layer_cases()),
                         [](const ::testing::TestParamInfo<LayerCase>& info) {
                           return info.param.name;
                         });

std::vector<float> bf16_rounded(std::vector<float> v) {
  for (float& x : v) x = kernel_math::bf16_to_float(kernel_math::float_to_bf16(x));
  return v;
}

// Under Precision::kBf16, convolutions and dense layers multiply bf16 copies of their input,
// weights and output gradient, accumulating in fp32 and adding the bias in fp32: on operands
// already in bf16 they are the
// float64 reference to fp32's accuracy (a product of two bf16 values is exact in fp32), and on
// any operands the same bits as on the operands rounded to bf16.
TEST(LayerBf16, ConvolutionsAndDenseLayersComputeOnBf16Copies) {
  for (const LayerCase& c : layer_cases()) {
    if (!std::holds_alternative<Conv2DSpec>(c.spec) && !std::holds_alternative<DenseSpec>(c.spec))
      continue;
    SCOPED_TRACE(c.name);
    std::optional<BoundLayer> layer;
    {
      const testing_util::PrecisionScope bf16(Precision::kBf16);
      layer.emplace(c);
    }
    for (const KernelChoice& k : layer->kernel->choices()) EXPECT_EQ(k.math, "bf16") << k.pass;
    const std::vector<float> x = layer_input(c, 8);
    const std::vector<float> r = random_values(layer->out_shape.numel(), 9);
    fill_random_params(*layer, 8);
    layer->in.copy_from_host(x);
    layer->forward();
    const std::vector<float> unrounded = layer->out.to_host();
    // The weights (the bias is added in fp32).
    layer->params[0].copy_from_host(bf16_rounded(layer->params[0].to_host()));
    expect_gradients_match_reference(c, *layer, bf16_rounded(x), bf16_rounded(r));
    EXPECT_EQ(layer->out.to_host(), unrounded);
    const std::vector<double> expected =
        reference_forward(c.spec, c.in, to_double(bf16_rounded(x)), layer->host_params());
    expect_close(unrounded, expected, kForwardAbs, kForwardRel, "out");
  }
}

// Other layers stay fp32 under bf16 (autocast keeps norms, pooling and the rest in fp32).
TEST(LayerBf16, OtherLayersStayInFp32) {
  const testing_util::PrecisionScope bf16(Precision::kBf16);
  for (const LayerCase& c : layer_cases()) {
    if (std::holds_alternative<Conv2DSpec>(c.spec) || std::holds_alternative<DenseSpec>(c.spec))
      continue;
    SCOPED_TRACE(c.name);
    BoundLayer layer(c);
    for (const KernelChoice& k : layer.kernel->choices()) EXPECT_EQ(k.math, "fp32") << k.pass;
    const std::vector<float> x = layer_input(c, 10);
    layer.in.copy_from_host(x);
    fill_random_params(layer, 10);
    layer.forward();
    expect_close(layer.out.to_host(),
                 reference_forward(c.spec, c.in, to_double(x), layer.host_params()), kForwardAbs,
                 kForwardRel, "out");
  }
}

// A token id that is not a whole number below the vocabulary would read memory outside the
// table: an Error naming the sample and position instead.
TEST(LayerEmbedding, RefusesTokensOutsideTheVocabulary) {
  const LayerCase c{"embedding", EmbeddingSpec{4, 2}, Shape{2, 3}};
  for (const float bad : {4.0f, -1.0f, 1.5f, std::nanf("")}) {
    BoundLayer layer(c);
    std::vector<float> ids{0, 1, 2, 3, 0, 1};
    ids[4] = bad;
    layer.in.copy_from_host(ids);
    try {
      layer.forward();
      ADD_FAILURE() << "token " << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(e.message().find("token 1 of sample 1"), std::string::npos) << e.message();
    }
  }
}

// Element (n, c, h, w) of an NHWC input lands at c·H·W + h·W + w of sample n (PyTorch's
// order), and backward puts each gradient back where its input came from.
TEST(LayerFlatten, OutputsChannelsFirstPerSample) {
  const LayerCase c{"flatten", FlattenSpec{}, Shape{2, 3, 4, 5}};
  BoundLayer layer(c);
  const int64_t n_size = 2, h_size = 3, w_size = 4, c_size = 5;
  const auto code = [](int64_t n, int64_t ch, int64_t h, int64_t w) {
    return static_cast<float>(n * 1000 + ch * 100 + h * 10 + w);
  };
  std::vector<float> x(static_cast<size_t>(layer.in.numel()));
  for (int64_t n = 0; n < n_size; ++n)
    for (int64_t h = 0; h < h_size; ++h)
      for (int64_t w = 0; w < w_size; ++w)
        for (int64_t ch = 0; ch < c_size; ++ch)
          x[static_cast<size_t>(((n * h_size + h) * w_size + w) * c_size + ch)] = code(n, ch, h, w);
  layer.in.copy_from_host(x);
  layer.forward();
  const std::vector<float> out = layer.out.to_host();
  const int64_t sample = c_size * h_size * w_size;
  for (int64_t n = 0; n < n_size; ++n)
    for (int64_t ch = 0; ch < c_size; ++ch)
      for (int64_t h = 0; h < h_size; ++h)
        for (int64_t w = 0; w < w_size; ++w)
          ASSERT_EQ(out[static_cast<size_t>(n * sample + ch * h_size * w_size + h * w_size + w)],
                    code(n, ch, h, w))
              << "n=" << n << " c=" << ch << " h=" << h << " w=" << w;

  // Backward of the flattened codes restores the NHWC input exactly.
  layer.dout.copy_from_host(out);
  layer.backward(/*with_din=*/true);
  EXPECT_EQ(layer.din.to_host(), x);
}

// Equal values in a window (ReLU's zeros do it all the time): the window's gradient goes to
// exactly one pixel, the first in row-major order, as in PyTorch.
TEST(LayerMaxPool, TiesSendTheGradientToTheFirstMaximum) {
  for (const MaxPool2DSpec spec :
       {MaxPool2DSpec{2, 2}, MaxPool2DSpec{3, 1}, MaxPool2DSpec{3, 2, 1}, MaxPool2DSpec{2, 2, 1}}) {
    const LayerCase c{"ties", spec, Shape{2, 5, 4, 3}};
    BoundLayer layer(c);
    layer.in.copy_from_host(std::vector<float>(static_cast<size_t>(c.in.numel()), 0.0f));
    std::vector<float> g(static_cast<size_t>(layer.out_shape.numel()));
    std::iota(g.begin(), g.end(), 1.0f);
    layer.dout.copy_from_host(g);
    layer.forward();
    layer.backward(/*with_din=*/true);
    // Every window's first pixel is (oh·stride - pad, ow·stride - pad), moved into the image
    // where it is padding (which never wins).
    const Shape& o = layer.out_shape;
    std::vector<float> expected(static_cast<size_t>(c.in.numel()), 0.0f);
    for (int64_t n = 0; n < o[0]; ++n)
      for (int64_t oh = 0; oh < o[1]; ++oh)
        for (int64_t ow = 0; ow < o[2]; ++ow)
          for (int64_t ch = 0; ch < o[3]; ++ch) {
            const int64_t ih = std::max<int64_t>(oh * spec.stride - spec.pad, 0);
            const int64_t iw = std::max<int64_t>(ow * spec.stride - spec.pad, 0);
            expected[static_cast<size_t>(((n * c.in[1] + ih) * c.in[2] + iw) * c.in[3] + ch)] +=
                g[static_cast<size_t>(((n * o[1] + oh) * o[2] + ow) * o[3] + ch)];
          }
    EXPECT_EQ(layer.din.to_host(), expected) << describe(spec);
  }
}

TEST(LayerShapes, RejectsAnImageSmallerThanTheKernel) {
  EXPECT_THROW(output_shape(Conv2DSpec{4, 5, 1, Padding::kValid}, Shape{3, 3, 1}), Error);
  EXPECT_THROW(output_shape(MaxPool2DSpec{2, 2}, Shape{1, 4, 3}), Error);
  // PyTorch refuses padding over half the pool: a window could hold padding only.
  EXPECT_THROW(output_shape(MaxPool2DSpec{3, 2, 2}, Shape{8, 8, 3}), Error);
  EXPECT_THROW(output_shape(MaxPool2DSpec{2, 2, -1}, Shape{8, 8, 3}), Error);
  EXPECT_THROW(output_shape(DenseSpec{3}, Shape{2, 2, 1}), Error);
}

// PyTorch's floor((in + 2·pad - pool) / stride) + 1: ImageNet ResNets' stem pool halves
// 112 to 56, and an odd image rounds down.
TEST(LayerShapes, PaddedMaxPoolFollowsPyTorch) {
  EXPECT_EQ(output_shape(MaxPool2DSpec{3, 2, 1}, Shape{112, 112, 64}), (Shape{56, 56, 64}));
  EXPECT_EQ(output_shape(MaxPool2DSpec{3, 2, 1}, Shape{7, 1, 2}), (Shape{4, 1, 2}));
  EXPECT_EQ(describe(MaxPool2DSpec{3, 2, 1}), "MaxPool2D(3x3, stride 2, pad 1)");
  EXPECT_EQ(describe(MaxPool2DSpec{2, 2}), "MaxPool2D(2x2, stride 2)");
  // Per sample: windows start at rows -1, 1 and 3 of 6, so visit 2 + 3 + 3 rows (the first
  // hangs over the edge by one): 8 · 8 per channel.
  EXPECT_EQ(forward_flops(MaxPool2DSpec{3, 2, 1}, Shape{6, 6, 2}), 8 * 8 * 2);
  EXPECT_EQ(forward_flops(MaxPool2DSpec{2, 2}, Shape{4, 6, 3}), 2 * 3 * 3 * 4);
}

TEST(LayerShapes, KernelRejectsABindingThatDisagreesWithTheSpec) {
  CpuDevice device(0, 1);
  const Conv2DSpec spec{4, 3, 1, Padding::kSame};
  Tensor weight(device, Shape{4, 2, 3, 3});
  Tensor bias(device, Shape{4});
  Tensor weight_grad(device, Shape{4, 2, 3, 3});
  Tensor bias_grad(device, Shape{4});
  LayerBinding good{Shape{2, 5, 5, 2},
                    Shape{2, 5, 5, 4},
                    {weight.view(), bias.view()},
                    {weight_grad.view(), bias_grad.view()},
                    {},
                    {},
                    false};
  EXPECT_NO_THROW(make_cpu_layer(spec, good, device));

  LayerBinding wrong_out = good;
  wrong_out.out = Shape{2, 4, 4, 4};  // "valid"'s output, not "same"'s
  EXPECT_THROW(make_cpu_layer(spec, wrong_out, device), Error);
  LayerBinding no_bias = good;
  no_bias.params.pop_back();
  EXPECT_THROW(make_cpu_layer(spec, no_bias, device), Error);
  LayerBinding too_small = good;
  too_small.in = Shape{2, 2, 2, 2};
  EXPECT_THROW(make_cpu_layer(Conv2DSpec{4, 3, 1, Padding::kValid}, too_small, device), Error);
}

// Random values with a mean and a spread of their own per channel (c·0.5 − 1 and 1 + c/4),
// so that running statistics that ignore the batch's mean or variance show.
std::vector<float> offset_values(const Shape& in, uint64_t seed) {
  std::vector<float> x = random_values(in.numel(), seed);
  const int64_t channels = in[in.rank() - 1];
  for (size_t i = 0; i < x.size(); ++i) {
    const auto c = static_cast<double>(static_cast<int64_t>(i) % channels);
    x[i] = static_cast<float>(x[i] * (1.0 + c / 4.0) + c * 0.5 - 1.0);
  }
  return x;
}

// PyTorch's update of the running statistics by one training batch, in double.
void update_running_stats(const BatchNorm2DSpec& spec, const Shape& in, const std::vector<float>& x,
                          std::vector<double>& mean, std::vector<double>& var) {
  const int64_t channels = in[3];
  const int64_t count = in.numel() / channels;
  for (int64_t c = 0; c < channels; ++c) {
    double sum = 0.0, squares = 0.0;
    for (int64_t p = 0; p < count; ++p) sum += x[static_cast<size_t>(p * channels + c)];
    const double batch_mean = sum / static_cast<double>(count);
    for (int64_t p = 0; p < count; ++p) {
      const double d = x[static_cast<size_t>(p * channels + c)] - batch_mean;
      squares += d * d;
    }
    const double unbiased = squares / static_cast<double>(count - 1);
    const double m = spec.momentum;
    const auto ci = static_cast<size_t>(c);
    mean[ci] = (1.0 - m) * mean[ci] + m * batch_mean;
    var[ci] = (1.0 - m) * var[ci] + m * unbiased;
  }
}

TEST(LayerBatchNorm, TrainingMovesTheRunningStatisticsAsPyTorchDoes) {
  const BatchNorm2DSpec spec{1e-5f, 0.3f};
  const LayerCase c{"batch_norm", spec, Shape{3, 4, 5, 6}};
  BoundLayer layer(c);
  fill_random_params(layer, 8);
  std::vector<double> mean(6, 0.0), var(6, 1.0);
  for (uint64_t seed : {9, 10}) {
    const std::vector<float> x = offset_values(c.in, seed);
    layer.in.copy_from_host(x);
    layer.forward();
    update_running_stats(spec, c.in, x, mean, var);
  }
  expect_close(layer.buffers[0].to_host(), mean, 1e-6, 1e-6, "running_mean");
  expect_close(layer.buffers[1].to_host(), var, 1e-6, 1e-6, "running_var");
  EXPECT_EQ(layer.buffers[2].to_host(), std::vector<float>{2.0f}) << "num_batches_tracked";
}

TEST(LayerBatchNorm, EvaluationNormalizesWithTheRunningStatisticsAndKeepsThem) {
  const BatchNorm2DSpec spec{1e-3f, 0.1f};
  const LayerCase c{"batch_norm", spec, Shape{2, 3, 4, 5}};
  BoundLayer layer(c);
  fill_random_params(layer, 11);
  std::vector<float> running_var = random_values(5, 12);
  for (float& v : running_var) v = 0.75f + 0.5f * v;  // in [0.25, 1.25]
  layer.buffers[0].copy_from_host(random_values(5, 13));
  layer.buffers[1].copy_from_host(running_var);
  layer.buffers[2].copy_from_host(std::vector<float>{4.0f});
  std::vector<std::vector<float>> before;
  for (const Tensor& b : layer.buffers) before.push_back(b.to_host());
  const std::vector<float> x = offset_values(c.in, 14);
  layer.in.copy_from_host(x);
  layer.kernel->forward_eval(layer.in.data(), layer.out.data(), layer.device.default_stream());

  const std::vector<float> gamma = layer.params[0].to_host(), beta = layer.params[1].to_host();
  std::vector<double> expected(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const size_t ch = i % 5;
    expected[i] = gamma[ch] * (x[i] - before[0][ch]) /
                      std::sqrt(static_cast<double>(before[1][ch]) + spec.eps) +
                  beta[ch];
  }
  expect_close(layer.out.to_host(), expected, kForwardAbs, kForwardRel, "out");
  for (size_t i = 0; i < before.size(); ++i) EXPECT_EQ(layer.buffers[i].to_host(), before[i]) << i;
}

// PyTorch refuses a training batch with a single value per channel (its variance is
// undefined); evaluation normalizes it with the running statistics.
TEST(LayerBatchNorm, TrainingRejectsASingleValuePerChannel) {
  const LayerCase c{"batch_norm", BatchNorm2DSpec{}, Shape{1, 1, 1, 3}};
  BoundLayer layer(c);
  layer.in.copy_from_host(std::vector<float>{0.5f, -1.0f, 2.0f});
  fill_random_params(layer, 15);
  try {
    layer.forward();
    ADD_FAILURE() << "a training forward of one value per channel did not throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("BatchNorm2D"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("more than one value"), std::string::npos) << e.what();
  }
  EXPECT_EQ(layer.buffers[2].to_host(), std::vector<float>{0.0f}) << "num_batches_tracked";
  EXPECT_NO_THROW(
      layer.kernel->forward_eval(layer.in.data(), layer.out.data(), layer.device.default_stream()));
}

// The kernel promises the same bits whatever the thread count (its sums run over chunks fixed
// by the shape): of the output, the running statistics and the gradients. Threads that shared
// a chunk's partial sums would show here.
TEST(LayerBatchNorm, ResultsDoNotDependOnTheThreadCount) {
  std::vector<std::vector<float>> results[2];
  for (const int threads : {1, 3}) {
    const LayerCase c{"batch_norm", BatchNorm2DSpec{}, Shape{4, 6, 5, 16}, threads};
    BoundLayer layer(c);
    layer.device.make_current();
    layer.in.copy_from_host(offset_values(c.in, 16));
    layer.dout.copy_from_host(random_values(c.in.numel(), 17));
    fill_random_params(layer, 16);
    layer.forward();
    layer.backward(/*with_din=*/true);
    std::vector<std::vector<float>>& r = results[threads == 1 ? 0 : 1];
    for (const Tensor* t : {&layer.out, &layer.din, &layer.grads[0], &layer.grads[1],
                            &layer.buffers[0], &layer.buffers[1]}) {
      r.push_back(t->to_host());
    }
  }
  ASSERT_EQ(results[0].size(), results[1].size());
  for (size_t i = 0; i < results[0].size(); ++i) EXPECT_EQ(results[0][i], results[1][i]) << i;
}

// As batch norm's: rows are independent and the parameter gradients' sums run over parts of the
// rows fixed by the shape (1100 rows: three parts), so threads change no bit.
TEST(LayerLayerNorm, ResultsDoNotDependOnTheThreadCount) {
  std::vector<std::vector<float>> results[2];
  for (const int threads : {1, 3}) {
    const LayerCase c{"layer_norm", LayerNormSpec{}, Shape{2, 550, 300}, threads};
    BoundLayer layer(c);
    layer.in.copy_from_host(offset_values(c.in, 18));
    layer.dout.copy_from_host(random_values(c.in.numel(), 19));
    fill_random_params(layer, 18);
    layer.forward();
    layer.backward(/*with_din=*/true);
    for (const Tensor* t : {&layer.out, &layer.din, &layer.grads[0], &layer.grads[1]}) {
      results[threads == 1 ? 0 : 1].push_back(t->to_host());
    }
  }
  for (size_t i = 0; i < results[0].size(); ++i) EXPECT_EQ(results[0][i], results[1][i]) << i;
}

}  // namespace
}  // namespace scalescope
