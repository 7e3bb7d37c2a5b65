// The CUDA kernels (models/cuda) against the CPU kernels, op by op on the same fresh random
// inputs: every layer type (forward, parameter gradients, input gradient, updated buffers,
// forward_eval), every loss (value, gradient, accuracy count), the optimizers over several
// steps, and accumulate_into. Each runs in strict fp32 (Precision::kFp32: relative error
// <= 1e-5) and with TF32 allowed (<= 5e-3); bf16 and fp16 in cuda_sixteen_bit_test.cpp. The
// relative error of a tensor is max |gpu - cpu| / max |cpu|, so that values near zero do not make
// it meaningless.
//
// Without a usable GPU (or in a build without CUDA) the GPU tests skip, saying why. The
// registry and CPU-side tests at the end run everywhere. Batch norm's own GPU tests (its host
// mirror, its synchronized stages) are in cuda_norm_test.cpp, the helpers both files use in
// cuda_test_util.h.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include "core/backend.h"
#include "core/cpu/cpu_device.h"
#include "core/device.h"
#include "core/error.h"
#include "core/random.h"
#include "core/tensor.h"
#include "models/kernels.h"
#include "models/layer_spec.h"
#include "tests/models/cuda_test_util.h"
#include "tests/models/loss_scaling_checks.h"
#include "tests/test_util.h"

namespace scalescope {
namespace {

using namespace cuda_test;
using testing_util::error_of;

enum class Precision { kStrict, kTf32 };

const char* to_string(Precision p) {
  return p == Precision::kStrict ? "strict" : "tf32";
}
double tolerance(Precision p) {
  return p == Precision::kStrict ? kStrictTolerance : kTf32Tolerance;
}

// ---- layers

Conv2DSpec conv(int64_t filters, int64_t kernel, int64_t stride, Padding padding, int64_t pad = 0,
                bool bias = true) {
  return Conv2DSpec{filters, kernel, stride, padding, pad, bias};
}

std::vector<LayerCase> layer_cases() {
  using enum Padding;
  return {
      // "same": symmetric (3x3, stride 1); asymmetric with TensorFlow's odd pixel after (an
      // even kernel at stride 1; stride 2 on odd and even sizes: H 7 pads (1, 1), W 6 pads
      // (0, 1); 16x16 pads (0, 1) on both axes).
      {"conv_same_s1", conv(4, 3, 1, kSame), Shape{2, 5, 7, 3}},
      {"conv_same_k4_asymmetric", conv(2, 4, 1, kSame), Shape{2, 5, 6, 1}},
      {"conv_same_s2_odd", conv(3, 3, 2, kSame), Shape{2, 7, 6, 2}},
      {"conv_same_k5_s2", conv(3, 5, 2, kSame), Shape{3, 9, 8, 2}},
      {"conv_same_s2_even", conv(16, 3, 2, kSame), Shape{4, 16, 16, 8}},
      {"conv_valid_s1", conv(5, 3, 1, kValid), Shape{2, 6, 5, 1}},
      {"conv_valid_s2_leftover", conv(4, 3, 2, kValid), Shape{2, 8, 7, 3}},
      // Rows (N·H·W = 1024) split into several partial bias sums; channels for tensor cores.
      {"conv_same_wide", conv(32, 3, 1, kSame), Shape{4, 16, 16, 16}},
      // PyTorch's padding=1 (ResNets' downsampling convolution), and convolutions without a
      // bias (batch norm follows them), symmetric and asymmetric.
      {"conv_explicit_s2", conv(8, 3, 2, kExplicit, 1), Shape{2, 9, 8, 4}},
      {"conv_explicit_s1_no_bias", conv(6, 3, 1, kExplicit, 1, false), Shape{2, 6, 7, 3}},
      {"conv_same_s2_no_bias", conv(4, 3, 2, kSame, 0, false), Shape{2, 7, 6, 2}},
      {"maxpool_2x2_odd", MaxPool2DSpec{2, 2}, Shape{2, 5, 7, 3}},
      {"maxpool_3s2_overlap", MaxPool2DSpec{3, 2}, Shape{2, 7, 6, 2}},
      {"maxpool_2s1_ties", MaxPool2DSpec{2, 1}, Shape{3, 4, 4, 5}, true},
      {"maxpool_3s2_ties", MaxPool2DSpec{3, 2}, Shape{2, 9, 8, 4}, true},
      {"maxpool_2s3_gaps", MaxPool2DSpec{2, 3}, Shape{2, 8, 7, 2}},
      // PyTorch's padding (ImageNet ResNets' stem pool): border windows partly outside.
      {"maxpool_3s2_p1_even", MaxPool2DSpec{3, 2, 1}, Shape{2, 8, 6, 3}},
      {"maxpool_3s2_p1_odd_ties", MaxPool2DSpec{3, 2, 1}, Shape{2, 7, 5, 4}, true},
      {"maxpool_2s2_p1", MaxPool2DSpec{2, 2, 1}, Shape{2, 5, 4, 2}},
      {"maxpool_5s2_p2_ties", MaxPool2DSpec{5, 2, 2}, Shape{1, 6, 7, 2}, true},
      {"dense", DenseSpec{5}, Shape{3, 7}},
      {"dense_one_unit", DenseSpec{1}, Shape{2, 4}},
      {"dense_wide", DenseSpec{128}, Shape{64, 256}},
      {"dense_many_rows", DenseSpec{40}, Shape{1100, 33}},
      // 1001 units (no multiple of 8) over 4.2M outputs: computed through the padded buffer,
      // in two chunks of 2100 rows whose weight gradients add up.
      {"dense_unaligned_rows", DenseSpec{1001}, Shape{4200, 8}},
      {"relu", ActivationSpec{Activation::kRelu}, Shape{2, 3, 4, 5}},
      {"tanh", ActivationSpec{Activation::kTanh}, Shape{2, 3, 4, 5}},
      {"sigmoid", ActivationSpec{Activation::kSigmoid}, Shape{3, 70}},
      {"flatten_image", FlattenSpec{}, Shape{2, 3, 4, 5}},
      {"flatten_large_tiles", FlattenSpec{}, Shape{3, 9, 9, 40}},
      {"flatten_vector", FlattenSpec{}, Shape{2, 6}},
      {"global_avg_pool", GlobalAvgPoolSpec{}, Shape{2, 3, 5, 4}},
      {"global_avg_pool_c1", GlobalAvgPoolSpec{}, Shape{3, 4, 3, 1}},
      {"batch_norm", BatchNorm2DSpec{}, Shape{2, 5, 7, 3}},
      // N·H·W = 1024 rows: the per-channel sums split into parts; 40 channels: two tiles.
      {"batch_norm_parts", BatchNorm2DSpec{1e-3f, 0.2f}, Shape{4, 16, 16, 40}},
      // With the ReLU after it inside it both ways, as in every ResNet.
      {"batch_norm_relu", BatchNorm2DSpec{}, Shape{2, 5, 7, 3}, false, true},
      {"batch_norm_relu_parts", BatchNorm2DSpec{1e-3f, 0.2f}, Shape{4, 16, 16, 40}, false, true},
      {"pad_shortcut", PadShortcutSpec{2, 8}, Shape{2, 8, 8, 4}},
      {"pad_shortcut_odd", PadShortcutSpec{2, 6}, Shape{2, 7, 5, 2}},
      // Causal self-attention on [N, S, 3D]: one head; rows longer than a warp (S 40, so lanes
      // take several columns and the longest rows several per lane), in two chunks of query
      // rows (32 and 8: hd = 4); GPT-small-like heads (hd = 32), in one chunk.
      {"attention_1head", CausalSelfAttentionSpec{1}, Shape{2, 4, 12}},
      {"attention_4heads_s40", CausalSelfAttentionSpec{4}, Shape{2, 40, 48}},
      {"attention_4heads_s128", CausalSelfAttentionSpec{4}, Shape{2, 128, 384}},
      // The rest of a GPT decoder: GELU; dense layers over a sequence's last dimension and
      // without a bias (4·300 rows split the bias gradient's sum into parts); token embeddings
      // (ids drawn below the vocabulary, many repeated) and position embeddings; dropout, whose
      // mask is the same hash on both.
      {"gelu_sequence", ActivationSpec{Activation::kGelu}, Shape{2, 16, 40}},
      {"gelu_flat", ActivationSpec{Activation::kGelu}, Shape{3, 70}},
      {"dense_sequence", DenseSpec{24}, Shape{2, 5, 16}},
      {"dense_no_bias", DenseSpec{7, false}, Shape{3, 9}},
      {"dense_sequence_no_bias", DenseSpec{40, false}, Shape{2, 12, 33}},
      {"dense_sequence_many_rows", DenseSpec{40}, Shape{4, 300, 33}},
      {"embedding", EmbeddingSpec{50, 24}, Shape{4, 64}},
      {"position_embedding", PositionEmbeddingSpec{}, Shape{3, 16, 24}},
      {"dropout", DropoutSpec{0.3f, 9}, Shape{2, 16, 40}},
  };
}

class CudaLayerTest : public CudaKernelsTest,
                      public ::testing::WithParamInterface<std::tuple<LayerCase, Precision>> {};

TEST_P(CudaLayerTest, MatchesCpuKernels) {
  const auto& [c, precision] = GetParam();
  const Tf32Scope tf32(precision == Precision::kTf32);
  SCOPED_TRACE(describe(c.spec) + " on " + c.in.to_string() + ", " + to_string(precision));
  expect_layer_matches_cpu(*gpu_, *cpu_, c, tolerance(precision));
}

INSTANTIATE_TEST_SUITE_P(AllLayers, CudaLayerTest,
                         ::testing::Combine(::testing::ValuesIn(layer_cases()),
                                            ::testing::Values(Precision::kStrict,
                                                              Precision::kTf32)),
                         [](const ::testing::TestParamInfo<CudaLayerTest::ParamType>& info) {
                           return std::get<0>(info.param).name + "_" +
                                  to_string(std::get<1>(info.param));
                         });

// Every convolution plans an algorithm per pass by cuDNN's name, never one that converts fp32
// to fp16, strict fp32 never on tensor cores, deterministic ones where they fit the workspace
// limit (the default: these small layers always fit, so no pass falls back); and two kernels
// planned alike compute bit-identical results.
TEST_F(CudaKernelsTest, ConvolutionsRecordAllowedDeterministicAlgorithms) {
  for (const LayerCase& c : layer_cases()) {
    if (!std::holds_alternative<Conv2DSpec>(c.spec)) continue;
    for (const bool tf32 : {false, true}) {
      SCOPED_TRACE(describe(c.spec) + " on " + c.in.to_string() + (tf32 ? ", tf32" : ", strict"));
      const Tf32Scope scope(tf32);
      const LayerInputs inputs = layer_inputs(c, 99);
      const BoundLayer b = bind_layer(*gpu_, c, inputs);
      const std::vector<KernelChoice> choices = b.kernel->choices();
      ASSERT_EQ(choices.size(), 3u);
      for (const KernelChoice& k : choices) {
        EXPECT_EQ(k.algorithm.rfind("CUDNN_CONVOLUTION_", 0), 0u) << k.algorithm;
        EXPECT_NE(k.math, "CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION");
        if (!tf32) {
          EXPECT_EQ(k.math, "CUDNN_FMA_MATH");
        }
        EXPECT_TRUE(k.deterministic) << k.pass << " " << k.algorithm;
        EXPECT_EQ(k.fallback, "") << k.pass;
        EXPECT_LE(k.workspace_bytes, k.workspace_limit_bytes) << k.workspace_limit_rule;
        EXPECT_TRUE(k.layout == "NHWC" || k.layout == "NCHW") << k.layout;
      }
      const LayerResult first = run_layer(*gpu_, c, inputs);
      const LayerResult second = run_layer(*gpu_, c, inputs);
      EXPECT_EQ(first.out, second.out);
      EXPECT_EQ(first.din, second.din);
      EXPECT_EQ(first.grads, second.grads);
    }
  }
}

// A max pool's backward reads the choices its training forward recorded, not its input or
// output: it says it reads the saved copies as they are (so the model restores neither under
// bf16 and fp16) and, given none, gives backward's bits.
TEST_F(CudaKernelsTest, MaxPoolBackwardNeedsNoRestoredValues) {
  for (const LayerCase& c : layer_cases()) {
    if (!std::holds_alternative<MaxPool2DSpec>(c.spec)) continue;
    SCOPED_TRACE(c.name);
    BoundLayer b = bind_layer(*gpu_, c, layer_inputs(c, 17));
    Stream& stream = gpu_->default_stream();
    b.kernel->forward(b.in.data(), b.out.data(), stream);
    b.kernel->backward(b.in.data(), b.out.data(), b.dout.data(), b.din.data(), stream);
    const std::vector<float> din = b.din.to_host();
    b.din.copy_from_host(std::vector<float>(din.size(), NAN));
    for (const auto format : {kernel_math::HalfFormat::kBf16, kernel_math::HalfFormat::kFp16}) {
      EXPECT_TRUE(b.kernel->reads_saved(format));
    }
    b.kernel->backward_saved(nullptr, nullptr, b.dout.data(), b.din.data(), stream);
    EXPECT_EQ(b.din.to_host(), din);
  }
}

// The attention kernel's GEMMs and softmax rows add in orders fixed by the shape: two kernels
// planned alike give the same bits, and the strict kernel says it computes in strict fp32.
TEST_F(CudaKernelsTest, AttentionIsDeterministic) {
  for (const LayerCase& c : layer_cases()) {
    if (!std::holds_alternative<CausalSelfAttentionSpec>(c.spec)) continue;
    SCOPED_TRACE(describe(c.spec) + " on " + c.in.to_string());
    const Tf32Scope strict(false);
    const LayerInputs inputs = layer_inputs(c, 77);
    const BoundLayer b = bind_layer(*gpu_, c, inputs);
    for (const KernelChoice& k : b.kernel->choices()) {
      EXPECT_EQ(k.math, "CUBLAS_COMPUTE_32F") << k.pass;
      EXPECT_TRUE(k.deterministic) << k.pass;
    }
    const LayerResult first = run_layer(*gpu_, c, inputs);
    const LayerResult second = run_layer(*gpu_, c, inputs);
    EXPECT_EQ(first.out, second.out);
    EXPECT_EQ(first.din, second.din);
  }
}

// ---- losses

struct LossCase {
  std::string name;
  LossKind kind;
  int64_t batch;
  int64_t classes;
  float logit_scale = 1.0f;  // large logits test the log-sum-exp's stability
};

struct LossResult {
  std::vector<float> loss;  // forward_backward's, then forward's
  std::vector<float> dout;
  std::vector<float> correct;
};

// Outputs and labels for a loss: logits (probabilities for BCE), with some samples tied
// across classes; labels as class indices, soft non-negative targets, or 0/1.
std::pair<std::vector<float>, std::vector<float>> loss_inputs(const LossCase& c, uint64_t seed) {
  Rng rng(seed);
  const int64_t n = c.batch;
  const int64_t k = c.classes;
  std::vector<float> output(static_cast<size_t>(n * k));
  std::vector<float> labels;
  if (c.kind == LossKind::kBinaryCrossEntropy) {
    for (float& p : output) p = rng.uniform(0.01f, 0.99f);
    output[0] = 0.0f;  // clipped to epsilon
    output[1] = 1.0f;  // clipped to 1 - epsilon
    output[2] = 0.5f;  // on the accuracy threshold
    for (int64_t i = 0; i < n; ++i) labels.push_back(rng.uniform() < 0.5f ? 0.0f : 1.0f);
    return {output, labels};
  }
  for (float& z : output) z = c.logit_scale * rng.uniform(-1.0f, 1.0f);
  // Ties: argmax goes to the lowest index on both backends.
  for (int64_t i = 0; i < n; i += 5) {
    std::fill(output.begin() + i * k, output.begin() + (i + 1) * k, 0.25f);
  }
  if (c.kind == LossKind::kSoftmaxCrossEntropy) {
    for (int64_t i = 0; i < n; ++i) {
      labels.push_back(static_cast<float>(rng.below(static_cast<uint64_t>(k))));
    }
  } else {
    labels.resize(static_cast<size_t>(n * k));
    for (float& t : labels) t = rng.uniform(0.0f, 1.0f);
  }
  return {output, labels};
}

LossResult run_loss(Device& device, const LossCase& c, const std::vector<float>& output_values,
                    const std::vector<float>& label_values) {
  device.make_current();
  const Shape shape{c.batch, c.classes};
  Tensor output(device, shape);
  Tensor labels(device, Shape{static_cast<int64_t>(label_values.size())});
  Tensor dout(device, shape);
  Tensor scalars(device, Shape{3});
  output.copy_from_host(output_values);
  labels.copy_from_host(label_values);
  std::unique_ptr<LossKernel> loss =
      kernel_backend(device.id().kind).make_loss(c.kind, shape, device);
  Stream& stream = device.default_stream();
  const float scale = 1.0f / static_cast<float>(c.batch);
  loss->forward_backward(output.data(), labels.data(), scale, scalars.data(), dout.data(), stream);
  loss->forward(output.data(), labels.data(), scale, scalars.data() + 1, stream);
  loss->count_correct(output.data(), labels.data(), scalars.data() + 2, stream);
  stream.synchronize();
  const std::vector<float> s = scalars.to_host();
  return LossResult{{s[0], s[1]}, dout.to_host(), {s[2]}};
}

class CudaLossTest : public CudaKernelsTest,
                     public ::testing::WithParamInterface<std::tuple<LossCase, Precision>> {};

TEST_P(CudaLossTest, MatchesCpuKernels) {
  const auto& [c, precision] = GetParam();
  const Tf32Scope tf32(precision == Precision::kTf32);
  const double tol = tolerance(precision);
  SCOPED_TRACE(std::string(scalescope::to_string(c.kind)) + " on [" + std::to_string(c.batch) +
               ", " + std::to_string(c.classes) + "], " + to_string(precision));
  const auto [output, labels] = loss_inputs(c, 99);
  const LossResult want = run_loss(*cpu_, c, output, labels);
  const LossResult got = run_loss(*gpu_, c, output, labels);
  EXPECT_CLOSE(std::vector<float>{got.loss[0]}, std::vector<float>{want.loss[0]}, tol,
               "loss of forward_backward");
  EXPECT_CLOSE(std::vector<float>{got.loss[1]}, std::vector<float>{want.loss[1]}, tol,
               "loss of forward");
  EXPECT_CLOSE(got.dout, want.dout, tol, "gradient");
  EXPECT_EQ(got.correct, want.correct) << "count_correct";
}

INSTANTIATE_TEST_SUITE_P(
    AllLosses, CudaLossTest,
    ::testing::Combine(
        ::testing::Values(
            LossCase{"softmax_ce", LossKind::kSoftmaxCrossEntropy, 37, 10},
            LossCase{"softmax_ce_many_classes", LossKind::kSoftmaxCrossEntropy, 70, 100},
            LossCase{"softmax_ce_large_logits", LossKind::kSoftmaxCrossEntropy, 16, 7, 80.0f},
            LossCase{"softmax_ce_one_hot", LossKind::kSoftmaxCrossEntropyOneHot, 37, 10},
            LossCase{"softmax_ce_one_hot_many_classes", LossKind::kSoftmaxCrossEntropyOneHot, 9,
                     65},
            LossCase{"bce", LossKind::kBinaryCrossEntropy, 300, 1}),
        ::testing::Values(Precision::kStrict, Precision::kTf32)),
    [](const ::testing::TestParamInfo<CudaLossTest::ParamType>& info) {
      return std::get<0>(info.param).name + "_" + to_string(std::get<1>(info.param));
    });

// ---- optimizers

struct OptimizerResult {
  std::vector<float> weights;
  std::vector<std::vector<float>> state;
};

// `steps` updates from the same weights with the same gradients on both devices; the learning
// rate changes every step, as under a schedule.
OptimizerResult run_optimizer(Device& device, const OptimizerConfig& config,
                              const std::vector<float>& w0, int steps, uint64_t seed) {
  device.make_current();
  const auto n = static_cast<int64_t>(w0.size());
  std::unique_ptr<OptimizerKernel> kernel =
      kernel_backend(device.id().kind).make_optimizer(config, n, device);
  Tensor w(device, Shape{n});
  Tensor g(device, Shape{n});
  w.copy_from_host(w0);
  for (int t = 1; t <= steps; ++t) {
    g.copy_from_host(random_values(n, seed + static_cast<uint64_t>(t)));
    const float lr = config.lr * (1.0f + 0.25f * static_cast<float>(t));
    kernel->update(w.data(), g.data(), lr, t, device.default_stream());
  }
  device.default_stream().synchronize();
  OptimizerResult result{w.to_host(), {}};
  for (const TensorView& s : kernel->state()) {
    std::vector<float> host(static_cast<size_t>(s.numel()));
    device.copy_to_host(host.data(), s.data, s.bytes(), device.default_stream());
    device.default_stream().synchronize();
    result.state.push_back(std::move(host));
  }
  return result;
}

class CudaOptimizerTest : public CudaKernelsTest,
                          public ::testing::WithParamInterface<std::tuple<int, Precision>> {};

OptimizerConfig optimizer_config(int which) {
  OptimizerConfig config;
  switch (which) {
    case 0:  // SGD with momentum and weight decay
      config.kind = OptimizerKind::kSgd;
      config.lr = 0.05f;
      config.momentum = 0.9f;
      config.weight_decay = 1e-2f;
      break;
    case 1:  // plain SGD with weight decay
      config.kind = OptimizerKind::kSgd;
      config.lr = 0.05f;
      config.weight_decay = 5e-3f;
      break;
    default:  // Adam with weight decay
      config.kind = OptimizerKind::kAdam;
      config.lr = 1e-3f;
      config.weight_decay = 1e-2f;
      break;
  }
  return config;
}

std::string optimizer_name(int which) {
  switch (which) {
    case 0:
      return "sgd_momentum_weight_decay";
    case 1:
      return "sgd_weight_decay";
    default:
      return "adam_weight_decay";
  }
}

TEST_P(CudaOptimizerTest, MatchesCpuKernelsOverSeveralSteps) {
  const auto& [which, precision] = GetParam();
  const Tf32Scope tf32(precision == Precision::kTf32);
  const double tol = tolerance(precision);
  const OptimizerConfig config = optimizer_config(which);
  // Not a multiple of any block size, so the last partial block runs too.
  const std::vector<float> w0 = random_values(100003, 7);
  const OptimizerResult want = run_optimizer(*cpu_, config, w0, 6, 70);
  const OptimizerResult got = run_optimizer(*gpu_, config, w0, 6, 70);
  EXPECT_CLOSE(got.weights, want.weights, tol, "weights");
  ASSERT_EQ(got.state.size(), want.state.size());
  ASSERT_EQ(got.state.size(), optimizer_state_names(config).size());
  for (size_t i = 0; i < got.state.size(); ++i) {
    EXPECT_CLOSE(got.state[i], want.state[i], tol, optimizer_state_names(config)[i]);
  }
}

INSTANTIATE_TEST_SUITE_P(AllOptimizers, CudaOptimizerTest,
                         ::testing::Combine(::testing::Values(0, 1, 2),
                                            ::testing::Values(Precision::kStrict,
                                                              Precision::kTf32)),
                         [](const ::testing::TestParamInfo<CudaOptimizerTest::ParamType>& info) {
                           return optimizer_name(std::get<0>(info.param)) + "_" +
                                  to_string(std::get<1>(info.param));
                         });

// ---- gradient accumulation

std::vector<float> run_accumulate(Device& device, const std::vector<std::vector<float>>& micro) {
  device.make_current();
  const auto n = static_cast<int64_t>(micro.front().size());
  Tensor acc(device, Shape{n});
  Tensor grads(device, Shape{n});
  for (size_t m = 0; m < micro.size(); ++m) {
    grads.copy_from_host(micro[m]);
    accumulate_into(acc.data(), grads.data(), n, m == 0, device.default_stream());
  }
  device.default_stream().synchronize();
  return acc.to_host();
}

TEST_F(CudaKernelsTest, AccumulateIntoMatchesCpu) {
  std::vector<std::vector<float>> micro;
  for (uint64_t m = 0; m < 3; ++m) micro.push_back(random_values(70001, 500 + m));
  const std::vector<float> want = run_accumulate(*cpu_, micro);
  const std::vector<float> got = run_accumulate(*gpu_, micro);
  EXPECT_CLOSE(got, want, kStrictTolerance, "accumulated gradients");
}

// ---- dynamic loss scaling (tests/models/loss_scaling_checks.h)

TEST_F(CudaKernelsTest, UnscaleDividesEveryGradientAndFlagsOverflow) {
  testing_util::expect_unscale_flags_overflow(*gpu_);
}

TEST_F(CudaKernelsTest, AnOptimizerSkipsItsUpdateWhileTheFlagIsSet) {
  testing_util::expect_optimizers_skip_while_flagged(*gpu_);
}

// ---- everywhere: the registry, the switch and the CPU side of accumulate_into

TEST(CudaKernelRegistry, ExistsExactlyInCudaBuilds) {
  if (SCALESCOPE_WITH_CUDA != 0) {
    // A dispatcher only: asking for it needs no GPU.
    EXPECT_NO_THROW(kernel_backend(DeviceKind::kCuda));
  } else {
    EXPECT_CONTAINS(error_of([] { kernel_backend(DeviceKind::kCuda); }), "SCALESCOPE_WITH_CUDA");
    EXPECT_CONTAINS(error_of([] { kernel_backend(DeviceKind::kCuda); }),
                    missing_backend_message(DeviceKind::kCuda));
  }
}

TEST(KernelRegistry, EveryBackendNamesItsLibrariesWithVersions) {
  for (const KernelBackend* k : kernel_backends()) {
    const std::vector<LibraryVersion> versions = k->library_versions();
    EXPECT_FALSE(versions.empty()) << to_string(k->kind());
    for (const LibraryVersion& v : versions) {
      EXPECT_FALSE(v.name.empty()) << to_string(k->kind());
      EXPECT_FALSE(v.version.empty()) << v.name;
    }
  }
  const std::vector<LibraryVersion> cpu = kernel_backend(DeviceKind::kCpu).library_versions();
  ASSERT_EQ(cpu.size(), 1u);
  EXPECT_EQ(cpu[0].name, "onednn");
  EXPECT_NE(cpu[0].version, kUnknownVersion);
}

TEST(Tf32Switch, AllowedByDefaultAndSettable) {
  EXPECT_TRUE(allow_tf32());
  {
    const Tf32Scope strict(false);
    EXPECT_FALSE(allow_tf32());
  }
  EXPECT_TRUE(allow_tf32());
}

TEST(DeterminismSwitch, PreferredByDefaultAndSettable) {
  EXPECT_EQ(determinism(), Determinism::kPreferred);
  set_determinism(Determinism::kOff);
  EXPECT_EQ(determinism(), Determinism::kOff);
  set_determinism(Determinism::kRequired);
  EXPECT_EQ(determinism(), Determinism::kRequired);
  set_determinism(Determinism::kPreferred);
  EXPECT_EQ(determinism(), Determinism::kPreferred);
}

TEST(AccumulateInto, CpuCopiesFirstThenAdds) {
  CpuDevice device(0, 2);
  Stream& stream = device.default_stream();
  std::vector<float> acc = {9.0f, 9.0f, 9.0f};  // stale values that `first` must not add to
  const std::vector<float> a = {1.0f, -2.0f, 0.5f};
  const std::vector<float> b = {0.25f, 4.0f, -0.5f};
  accumulate_into(acc.data(), a.data(), 3, true, stream);
  EXPECT_EQ(acc, a);
  accumulate_into(acc.data(), b.data(), 3, false, stream);
  EXPECT_EQ(acc, (std::vector<float>{1.25f, 2.0f, 0.0f}));
}

TEST(AccumulateInto, ForwardsToTheKernelBackendOfTheStreamsDevice) {
  CpuDevice device(0, 1);
  Stream& stream = device.default_stream();
  std::vector<float> through_free = {1.0f, 1.0f};
  std::vector<float> through_backend = through_free;
  const std::vector<float> grads = {0.5f, -3.0f};
  accumulate_into(through_free.data(), grads.data(), 2, false, stream);
  kernel_backend(DeviceKind::kCpu)
      .accumulate(through_backend.data(), grads.data(), 2, false, stream);
  EXPECT_EQ(through_free, through_backend);
  EXPECT_EQ(through_free, (std::vector<float>{1.5f, -2.0f}));
}

TEST(AccumulateInto, RefusesANegativeCount) {
  CpuDevice device(0, 1);
  EXPECT_CONTAINS(
      error_of([&] { accumulate_into(nullptr, nullptr, -1, true, device.default_stream()); }),
      "-1");
}

}  // namespace
}  // namespace scalescope
