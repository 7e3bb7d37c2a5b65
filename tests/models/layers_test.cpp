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
#include "tests/models/bound_layer.h"
#include "tests/models/layer_cases.h"
#include "tests/models/precision_scope.h"
#include "tests/models/reference.h"

namespace scalescope {
namespace {

using namespace testing_util;  // NOLINT(google-build-using-namespace): the layer tests' kit

// Analytic fp32 gradients against float64 central differences (whose own error is ~1e-9).
constexpr double kGradAbs = 1e-4;
constexpr double kGradRel = 1e-3;
constexpr double kStep = 1e-6;

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

// What a kernel reading 16-bit copies sees of `v`.
std::vector<float> rounded(std::vector<float> v, kernel_math::HalfFormat format) {
  for (float& x : v) x = kernel_math::from_half(kernel_math::to_half(x, format), format);
  return v;
}

// Under Precision::kBf16 (oneDNN's bf16 kernels) and kFp16 (emulated: fp32 kernels on operands
// rounded to fp16), convolutions and dense layers multiply 16-bit copies of their input, weights
// and output gradient, accumulating in fp32 and adding the bias in fp32: on operands already
// in the 16-bit format they are the float64 reference to fp32's accuracy (a product of two such
// values is exact in fp32), and on any operands the same bits as on the operands rounded.
void expect_weighted_layers_compute_on_16_bit_copies(Precision precision,
                                                     kernel_math::HalfFormat format,
                                                     const char* math) {
  for (const LayerCase& c : layer_cases()) {
    if (!std::holds_alternative<Conv2DSpec>(c.spec) && !std::holds_alternative<DenseSpec>(c.spec))
      continue;
    SCOPED_TRACE(c.name);
    std::optional<BoundLayer> layer;
    {
      const testing_util::PrecisionScope scope(precision);
      layer.emplace(c);
    }
    for (const KernelChoice& k : layer->kernel->choices()) EXPECT_EQ(k.math, math) << k.pass;
    const std::vector<float> x = layer_input(c, 8);
    const std::vector<float> r = random_values(layer->out_shape.numel(), 9);
    fill_random_params(*layer, 8);
    layer->in.copy_from_host(x);
    layer->forward();
    const std::vector<float> unrounded = layer->out.to_host();
    // The weights (the bias is added in fp32).
    layer->params[0].copy_from_host(rounded(layer->params[0].to_host(), format));
    expect_gradients_match_reference(c, *layer, rounded(x, format), rounded(r, format));
    EXPECT_EQ(layer->out.to_host(), unrounded);
    const std::vector<double> expected =
        reference_forward(c.spec, c.in, to_double(rounded(x, format)), layer->host_params());
    expect_close(unrounded, expected, kForwardAbs, kForwardRel, "out");
  }
}

TEST(LayerBf16, ConvolutionsAndDenseLayersComputeOnBf16Copies) {
  SKIP_WITHOUT_CPU_BF16();
  expect_weighted_layers_compute_on_16_bit_copies(Precision::kBf16, kernel_math::HalfFormat::kBf16,
                                                  "bf16");
}

TEST(LayerFp16, ConvolutionsAndDenseLayersComputeOnFp16Copies) {
  expect_weighted_layers_compute_on_16_bit_copies(Precision::kFp16, kernel_math::HalfFormat::kFp16,
                                                  "fp16-emulated");
}

// Under bf16 a model saves a convolution's or dense layer's input in bf16 (autocast's saved
// tensors), and the kernel's forward and backward read that copy as it is (forward_saved,
// backward_saved) instead of a copy of their own or an fp32 restore of it: the same bits as
// forward on the input and backward on the restored values. Only with its copies in a model's
// pool (the next pass binds its own again), and never for emulated fp16.
TEST(LayerBf16, PassesOnTheSavedInputAreThePassesOnTheInput) {
  SKIP_WITHOUT_CPU_BF16();
  for (const LayerCase& c : layer_cases()) {
    if (!std::holds_alternative<Conv2DSpec>(c.spec) && !std::holds_alternative<DenseSpec>(c.spec))
      continue;
    SCOPED_TRACE(c.name);
    std::optional<BoundLayer> layer;
    std::optional<BoundLayer> unpooled;
    {
      const testing_util::PrecisionScope scope(Precision::kBf16);
      layer.emplace(c, std::make_shared<TransientPool>());
      unpooled.emplace(c);
    }
    EXPECT_TRUE(layer->kernel->reads_saved(kernel_math::HalfFormat::kBf16));
    EXPECT_FALSE(layer->kernel->reads_saved(kernel_math::HalfFormat::kFp16));
    EXPECT_FALSE(unpooled->kernel->reads_saved(kernel_math::HalfFormat::kBf16));
    EXPECT_TRUE(layer->kernel->forwards_from_saved(kernel_math::HalfFormat::kBf16));
    EXPECT_FALSE(layer->kernel->forwards_from_saved(kernel_math::HalfFormat::kFp16));
    EXPECT_FALSE(unpooled->kernel->forwards_from_saved(kernel_math::HalfFormat::kBf16));
    const std::vector<float> x = layer_input(c, 11);
    fill_random_params(*layer, 11);
    layer->dout.copy_from_host(random_values(layer->out_shape.numel(), 12));
    std::vector<uint16_t> saved(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      saved[i] = kernel_math::to_half(x[i], kernel_math::HalfFormat::kBf16);
    }
    DeviceBuffer saved_copy(layer->device, saved.size() * sizeof(uint16_t));
    std::copy(saved.begin(), saved.end(), static_cast<uint16_t*>(saved_copy.data()));
    layer->in.copy_from_host(x);
    layer->forward();
    const std::vector<float> y = layer->out.to_host();
    // A forward of another input leaves its copy in the pool: forward_saved must not read it.
    layer->in.copy_from_host(layer_input(c, 14));
    layer->forward();
    layer->kernel->forward_saved(static_cast<const uint16_t*>(saved_copy.data()), layer->out.data(),
                                 layer->device.default_stream());
    EXPECT_EQ(layer->out.to_host(), y);
    layer->in.copy_from_host(rounded(x, kernel_math::HalfFormat::kBf16));
    layer->backward(true);
    const std::vector<float> din = layer->din.to_host();
    const std::vector<float> dw = layer->grads[0].to_host();
    layer->din.copy_from_host(std::vector<float>(din.size(), 0.0f));
    layer->grads[0].copy_from_host(std::vector<float>(dw.size(), 0.0f));
    // Another forward leaves another input's copy in the pool: backward_saved must not read it.
    layer->in.copy_from_host(layer_input(c, 12));
    layer->forward();
    layer->kernel->backward_saved(static_cast<const uint16_t*>(saved_copy.data()), nullptr,
                                  layer->dout.data(), layer->din.data(),
                                  layer->device.default_stream());
    EXPECT_EQ(layer->din.to_host(), din);
    EXPECT_EQ(layer->grads[0].to_host(), dw);
    // The next forward writes its input's copy into the pool again, not into the saved one.
    layer->in.copy_from_host(layer_input(c, 13));
    layer->forward();
    EXPECT_TRUE(
        std::equal(saved.begin(), saved.end(), static_cast<const uint16_t*>(saved_copy.data())));
  }
}

// An operand beyond fp16's range (65504) is infinity to the kernel, as on a GPU: what makes
// fp16 training scale its loss, and what the scaler's overflow check catches.
TEST(LayerFp16, AnOperandBeyondFp16sRangeOverflows) {
  const LayerCase c{"dense", DenseSpec{3, true}, Shape{2, 4}};
  std::optional<BoundLayer> layer;
  {
    const testing_util::PrecisionScope fp16(Precision::kFp16);
    layer.emplace(c);
  }
  fill_random_params(*layer, 3);
  std::vector<float> x(8, 0.5f);
  layer->in.copy_from_host(x);
  layer->forward();
  for (const float y : layer->out.to_host()) EXPECT_TRUE(std::isfinite(y)) << y;
  x[5] = 70000.0f;  // sample 1 (fp32 holds it; fp16 does not)
  layer->in.copy_from_host(x);
  layer->forward();
  const std::vector<float> out = layer->out.to_host();
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(std::isfinite(out[i])) << "sample 0, unit " << i;
  for (int i = 3; i < 6; ++i) EXPECT_FALSE(std::isfinite(out[i])) << "sample 1, unit " << i;
}

// Other layers stay fp32 under bf16 (autocast keeps norms, pooling and the rest in fp32);
// attention's products are bf16 (cpu_attention_test.cpp).
TEST(LayerBf16, OtherLayersStayInFp32) {
  SKIP_WITHOUT_CPU_BF16();
  const testing_util::PrecisionScope bf16(Precision::kBf16);
  for (const LayerCase& c : layer_cases()) {
    if (std::holds_alternative<Conv2DSpec>(c.spec) || std::holds_alternative<DenseSpec>(c.spec) ||
        std::holds_alternative<CausalSelfAttentionSpec>(c.spec))
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

// What a forward moves at the least, in fp32: input and output per sample, parameters and
// buffers once; an Add reads two inputs, an embedding only the rows it gathers.
TEST(LayerShapes, ForwardBytesCountOperandsPerSampleAndParametersOnce) {
  EXPECT_EQ(forward_bytes(DenseSpec{3}, Shape{5}, 2), (2 * (5 + 3) + 5 * 3 + 3) * 4);
  EXPECT_EQ(forward_bytes(AddSpec{}, Shape{4}, 2), 2 * (2 * 4 + 4) * 4);
  EXPECT_EQ(forward_bytes(EmbeddingSpec{1000, 4}, Shape{3}, 2), 2 * (3 + 2 * 12) * 4);
  // Batch norm's scale and shift, its running mean and variance, and its count of batches.
  EXPECT_EQ(forward_bytes(BatchNorm2DSpec{}, Shape{2, 2, 3}, 1), (12 + 12 + 4 * 3 + 1) * 4);
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
                    false,
                    nullptr};
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
  // A replica outside its synchronized group would gather into another's slot, or past them.
  for (const SyncGroup bad : {SyncGroup{2, 2}, SyncGroup{2, -1}, SyncGroup{0, 0}}) {
    LayerBinding outside = good;
    outside.sync = bad;
    EXPECT_THROW(make_cpu_layer(spec, outside, device), Error);
  }
  LayerBinding last = good;
  last.sync = SyncGroup{3, 2};
  EXPECT_NO_THROW(make_cpu_layer(spec, last, device));
}

}  // namespace
}  // namespace scalescope
