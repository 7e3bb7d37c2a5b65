#include "models/fusion.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/cpu/cpu_device.h"
#include "core/random.h"
#include "core/tensor.h"
#include "models/kernels.h"
#include "models/model.h"
#include "models/zoo.h"
#include "tests/models/precision_scope.h"

namespace scalescope {
namespace {

// Fusion is process-wide: each test leaves it on, as it found it.
class Fusion : public ::testing::Test {
 protected:
  void TearDown() override { set_fuse_layers(true); }
};

ModelDef sequence(std::string name, std::vector<LayerSpec> layers, Shape input) {
  return ModelDef{std::move(name),
                  std::move(layers),
                  LossKind::kSoftmaxCrossEntropy,
                  std::move(input),
                  {},
                  {},
                  {}};
}

// Overlapping pools (3x3, stride 2) after ReLUs, and every activation the CPU fuses.
ModelDef mixed_model() {
  const ActivationSpec relu{Activation::kRelu};
  return sequence(
      "mixed",
      {Conv2DSpec{6}, relu, MaxPool2DSpec{3, 2, 1}, Conv2DSpec{4, 3, 1, Padding::kValid}, relu,
       MaxPool2DSpec{}, FlattenSpec{}, DenseSpec{7}, ActivationSpec{Activation::kTanh},
       DenseSpec{5}, ActivationSpec{Activation::kSigmoid}, DenseSpec{3}},
      Shape{9, 9, 2});
}

TEST_F(Fusion, CifarCnnRunsItsReluInsideTheConvolutionsThePoolsAndTheDenseLayer) {
  const ModelDef def = make_model("cifar-cnn");
  const std::vector<LayerFusion> f = plan_fusions(def, kernel_backend(DeviceKind::kCpu));
  ASSERT_EQ(f.size(), def.layers.size());
  for (size_t i = 0; i < f.size(); ++i) {
    const bool conv_relu = i == 1 || i == 4;  // each before a max pool
    EXPECT_EQ(f[i].forward_in_producer, conv_relu || i == 8) << i;
    EXPECT_EQ(f[i].backward_in_reader, conv_relu) << i;  // layer 8 is read by a dense layer
  }
  // The simulated accelerator runs the CPU's kernels: it fuses the same layers.
  const std::vector<LayerFusion> sim = plan_fusions(def, kernel_backend(DeviceKind::kSim));
  ASSERT_EQ(sim.size(), f.size());
  for (size_t i = 0; i < f.size(); ++i) {
    EXPECT_EQ(sim[i].forward_in_producer, f[i].forward_in_producer) << i;
    EXPECT_EQ(sim[i].backward_in_reader, f[i].backward_in_reader) << i;
  }
}

// In a ResNet the ReLU after each batch norm runs inside it both ways, and the ReLU after each
// block's add inside the model's add (on every backend: the model runs the add; the CUDA one,
// in CUDA builds, needs no GPU to say so).
TEST_F(Fusion, AResNetRunsEveryReluInsideTheBatchNormOrTheAddBeforeIt) {
  const ModelDef def = make_model("cifar-resnet:depth=20");
  std::vector<DeviceKind> kinds{DeviceKind::kCpu, DeviceKind::kSim};
  if (SCALESCOPE_WITH_CUDA != 0) kinds.push_back(DeviceKind::kCuda);
  for (const DeviceKind kind : kinds) {
    SCOPED_TRACE(to_string(kind));
    const std::vector<LayerFusion> f = plan_fusions(def, kernel_backend(kind));
    ASSERT_EQ(f.size(), def.layers.size());
    int after_norm = 0;
    int after_add = 0;
    for (size_t i = 0; i < f.size(); ++i) {
      const bool relu = std::holds_alternative<ActivationSpec>(def.layers[i]);
      EXPECT_EQ(f[i].forward_in_producer, relu) << i;
      EXPECT_EQ(f[i].backward_in_producer, relu) << i;
      EXPECT_FALSE(f[i].backward_in_reader) << i;
      if (!relu) continue;
      after_norm += std::holds_alternative<BatchNorm2DSpec>(def.layers[i - 1]) ? 1 : 0;
      after_add += std::holds_alternative<AddSpec>(def.layers[i - 1]) ? 1 : 0;
    }
    EXPECT_EQ(after_norm, 10);  // the stem's and each of the nine blocks' first
    EXPECT_EQ(after_add, 9);
  }
}

// A graph's activation runs inside its producer only where it reads that layer alone and
// nothing else reads it.
TEST_F(Fusion, AGraphFusesOnlyAnActivationThatIsItsProducersOneReader) {
  const KernelBackend& cpu = kernel_backend(DeviceKind::kCpu);
  const ActivationSpec relu{Activation::kRelu};
  const auto graph = [](std::vector<LayerSpec> layers, std::vector<std::vector<int>> inputs) {
    ModelDef def = sequence("graph", std::move(layers), Shape{4, 4, 2});
    def.inputs = std::move(inputs);
    return def;
  };
  // 0 conv, 1 norm, 2 ReLU of 1, 3 conv of 2, 4 = 3 + 1 (the norm read twice), ...
  const ModelDef shared = graph({Conv2DSpec{2}, BatchNorm2DSpec{}, relu, Conv2DSpec{2}, AddSpec{},
                                 FlattenSpec{}, DenseSpec{3}},
                                {{-1}, {0}, {1}, {2}, {3, 1}, {4}, {5}});
  for (const LayerFusion& l : plan_fusions(shared, cpu)) {
    EXPECT_FALSE(l.forward_in_producer || l.backward_in_producer);
  }
  // ... and 2 a ReLU of layer 0 (read by it alone), not of the layer just before it.
  const ModelDef skipping =
      graph({BatchNorm2DSpec{}, Conv2DSpec{2}, relu, AddSpec{}, FlattenSpec{}, DenseSpec{3}},
            {{-1}, {-1}, {0}, {1, 2}, {3}, {4}});
  for (const LayerFusion& l : plan_fusions(skipping, cpu)) {
    EXPECT_FALSE(l.forward_in_producer || l.backward_in_producer);
  }
  const ModelDef alone = graph({Conv2DSpec{2}, BatchNorm2DSpec{}, relu, Conv2DSpec{2}, AddSpec{},
                                FlattenSpec{}, DenseSpec{3}},
                               {{-1}, {0}, {1}, {2}, {3, 0}, {4}, {5}});
  const std::vector<LayerFusion> f = plan_fusions(alone, cpu);
  EXPECT_TRUE(f[2].idle() && f[2].backward_in_producer);
  // The same of an add's ReLU: 3 a ReLU of the add 2, which 4 reads too, then read by 4 alone.
  const ModelDef add_read_twice =
      graph({Conv2DSpec{2}, Conv2DSpec{2}, AddSpec{}, relu, AddSpec{}, FlattenSpec{}, DenseSpec{3}},
            {{-1}, {-1}, {0, 1}, {2}, {3, 2}, {4}, {5}});
  for (const LayerFusion& l : plan_fusions(add_read_twice, cpu)) {
    EXPECT_FALSE(l.forward_in_producer || l.backward_in_producer);
  }
  ModelDef add_read_once = add_read_twice;
  add_read_once.inputs[4] = {3, 0};
  EXPECT_TRUE(plan_fusions(add_read_once, cpu)[3].idle());
}

TEST_F(Fusion, NoneWhenOffNorForGelu) {
  const KernelBackend& cpu = kernel_backend(DeviceKind::kCpu);
  const auto any = [](const std::vector<LayerFusion>& f) {
    for (const LayerFusion& l : f) {
      if (l.forward_in_producer || l.backward_in_reader || l.backward_in_producer) return true;
    }
    return false;
  };
  EXPECT_TRUE(any(plan_fusions(make_model("cifar-cnn"), cpu)));
  EXPECT_TRUE(any(plan_fusions(make_model("cifar-resnet:depth=20"), cpu)));
  EXPECT_FALSE(any(plan_fusions(
      sequence("gelu", {DenseSpec{4}, ActivationSpec{Activation::kGelu}, DenseSpec{2}}, Shape{3}),
      cpu)));
  // A ReLU first has no producer, and one before a dense layer keeps its backward.
  EXPECT_FALSE(any(plan_fusions(
      sequence("first", {ActivationSpec{}, FlattenSpec{}, DenseSpec{2}}, Shape{2, 2, 1}), cpu)));
  set_fuse_layers(false);
  EXPECT_FALSE(any(plan_fusions(make_model("cifar-cnn"), cpu)));
  EXPECT_FALSE(any(plan_fusions(make_model("cifar-resnet:depth=20"), cpu)));
}

struct Pass {
  std::vector<float> output, eval_output, grads;
  float loss = 0.0f;
  std::vector<bool> writes_saved;  // Model::writes_saved_copies
};

// One training pass and one evaluation forward of `def` on a batch, fused or not.
Pass run(const ModelDef& def, bool fuse) {
  set_fuse_layers(fuse);
  CpuDevice dev(0, 2);
  Stream& s = dev.default_stream();
  Model m(def, def.default_input, dev, 3);
  const int64_t n = 5;
  Tensor x(dev, def.default_input.with_batch(n));
  Tensor y(dev, Shape{n});
  Tensor loss(dev, Shape{1});
  Rng rng(11);
  std::vector<float> input(static_cast<size_t>(x.numel()));
  for (float& v : input) v = rng.normal();
  // Ties inside pooling windows, and windows whose maximum is exactly zero after the ReLU.
  for (size_t i = 0; i < input.size(); i += 7) input[i] = input[i / 2];
  x.copy_from_host(input);
  y.copy_from_host(std::vector<float>{0, 1, 2, 1, 0});
  const auto output = [&] {
    std::vector<float> out(static_cast<size_t>(n * m.output_shape().numel()));
    dev.copy_to_host(out.data(), m.output(), out.size() * sizeof(float), s);
    return out;
  };
  // Training first: an evaluation forward before it would leave in memory the fp32 outputs a
  // training forward may skip (Model::writes_saved_copies), hiding a reader that reads them.
  Pass p;
  m.forward(x.data(), n, s);
  p.output = output();
  m.loss_forward_backward(y.data(), 1.0f / n, loss.data(), s);
  m.backward(s);
  p.loss = loss.to_host()[0];
  p.grads = m.grads().to_host();
  m.forward(x.data(), n, s, false);
  p.eval_output = output();
  p.writes_saved = m.writes_saved_copies(n);
  return p;
}

// ReLU fused into a convolution (a post-op), into a max pool's backward and into a batch norm
// both ways computes exactly the values of the separate layers, in fp32 and with bf16's saved
// 16-bit activations; tanh and sigmoid as post-ops agree to rounding.
TEST_F(Fusion, FusedModelsComputeTheUnfusedOutputsLossAndGradients) {
  const ModelDef resnet = make_model("cifar-resnet:depth=8");
  // Not a structured binding: clang 16 cannot capture one in a lambda under OpenMP.
  for (const auto& model : {std::pair{make_model("cifar-cnn"), Precision::kFp32},
                            {mixed_model(), Precision::kFp32},
                            {resnet, Precision::kFp32},
                            {resnet, Precision::kBf16}}) {
    const ModelDef& def = model.first;
    const Precision precision = model.second;
    if (testing_util::bf16_refused_here(precision)) continue;
    SCOPED_TRACE(to_string(precision));
    const testing_util::PrecisionScope scope(precision);
    const Pass fused = run(def, true);
    const Pass plain = run(def, false);
    const bool exact = def.name != "mixed";
    ASSERT_EQ(fused.grads.size(), plain.grads.size());
    const auto expect_same = [&](const std::vector<float>& a, const std::vector<float>& b,
                                 const char* what) {
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i) {
        if (exact) {
          ASSERT_EQ(a[i], b[i]) << def.name << " " << what << "[" << i << "]";
        } else {
          ASSERT_NEAR(a[i], b[i], 1e-5 + 1e-4 * std::abs(b[i]))
              << def.name << " " << what << "[" << i << "]";
        }
      }
    };
    expect_same(fused.eval_output, plain.eval_output, "eval output");
    expect_same(fused.output, plain.output, "output");
    expect_same({fused.loss}, {plain.loss}, "loss");
    expect_same(fused.grads, plain.grads, "gradient");
    double norm = 0.0;
    for (const float g : plain.grads) norm += static_cast<double>(g) * g;
    EXPECT_GT(norm, 1e-6) << def.name;  // the comparison is of something
  }
}

// |a - b| / |b| over whole vectors.
double relative_distance(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0.0;
  double norm = 0.0;
  for (size_t i = 0; i < b.size(); ++i) {
    diff += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    norm += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(diff / norm);
}

// Under bf16 a layer writes its saved copy itself, and no fp32 output, only where every reader
// reads that copy in forward: the GELU read by a dense layer does, and so does the dense layer
// before it, which the GELU reads as that copy; the layer norm also read by the add does not
// (the add reads fp32), nor the dense layer the layer norm reads in fp32. The GELU then runs on
// its input's bf16 copy, as autocast's does: the same results to bf16's rounding.
TEST_F(Fusion, UnderBf16OnlyALayerWhoseReadersAllReadItsSavedCopyWritesNoFp32Output) {
  SKIP_WITHOUT_CPU_BF16();
  const testing_util::PrecisionScope bf16(Precision::kBf16);
  ModelDef def =
      sequence("saved-graph",
               {DenseSpec{8}, LayerNormSpec{}, DenseSpec{8}, ActivationSpec{Activation::kGelu},
                DenseSpec{8}, AddSpec{}, DenseSpec{3}},
               Shape{6});
  def.inputs = {{-1}, {0}, {1}, {2}, {3}, {4, 1}, {5}};
  const Pass fused = run(def, true);
  const Pass plain = run(def, false);
  EXPECT_EQ(fused.writes_saved, (std::vector<bool>{false, false, true, true, false, false, false}));
  EXPECT_EQ(plain.writes_saved, std::vector<bool>(def.layers.size(), false));
  EXPECT_EQ(fused.eval_output, plain.eval_output);
  EXPECT_LT(relative_distance(fused.output, plain.output), 1e-2);
  EXPECT_LT(relative_distance(fused.grads, plain.grads), 2e-2);
  EXPECT_NEAR(fused.loss, plain.loss, 1e-2 * std::abs(plain.loss));
}

// A per-layer answer of Model's plan of `def` at batch 2 on a CPU device: which layers write
// their saved copy themselves (writes_saved_copies), or keep their gradient in 16 bits.
using PlanFlags = std::vector<bool> (Model::*)(int64_t) const;
std::vector<bool> planned_flags(const ModelDef& def, Precision precision,
                                PlanFlags flags = &Model::writes_saved_copies) {
  const testing_util::PrecisionScope scope(precision);
  CpuDevice dev(0, 1);
  Model m(def, def.default_input, dev, 3);
  m.memory(2);
  return (m.*flags)(2);
}

// The layers for which `flags` of the plan of `def` at batch 2 says true.
std::vector<size_t> flagged_layers(const ModelDef& def, Precision precision, PlanFlags flags) {
  const std::vector<bool> flagged = planned_flags(def, precision, flags);
  std::vector<size_t> layers;
  for (size_t i = 0; i < flagged.size(); ++i) {
    if (flagged[i]) layers.push_back(i);
  }
  return layers;
}

// In a GPT decoder every layer norm and GELU writes its saved copy itself under bf16, read by
// the dense layer after it, and so do the dense layers before each GELU and each attention
// (which reads only the copy); nothing does in fp32.
TEST_F(Fusion, UnderBf16ADecodersNormsAndMlpsWriteOnlyTheirSavedCopies) {
  SKIP_WITHOUT_CPU_BF16();
  const ModelDef def = make_model("gpt:preset=micro");
  for (const Precision precision : {Precision::kBf16, Precision::kFp32}) {
    SCOPED_TRACE(to_string(precision));
    const std::vector<bool> writes = planned_flags(def, precision);
    ASSERT_EQ(writes.size(), def.layers.size());
    int count = 0;
    for (size_t i = 0; i < writes.size(); ++i) {
      const auto is_gelu = [&](size_t layer) {
        const auto* activation = std::get_if<ActivationSpec>(&def.layers[layer]);
        return activation != nullptr && activation->kind == Activation::kGelu;
      };
      const auto before_attention = [&](size_t layer) {
        return layer + 1 < writes.size() &&
               std::holds_alternative<CausalSelfAttentionSpec>(def.layers[layer + 1]);
      };
      const bool expected = precision == Precision::kBf16 &&
                            (std::holds_alternative<LayerNormSpec>(def.layers[i]) || is_gelu(i) ||
                             (i + 1 < writes.size() && is_gelu(i + 1)) || before_attention(i));
      EXPECT_EQ(writes[i], expected) << i << " " << describe(def.layers[i]);
      count += writes[i] ? 1 : 0;
    }
    // Two blocks of two norms, a GELU and the dense layers before it and the attention, and the
    // final norm.
    EXPECT_EQ(count, precision == Precision::kBf16 ? 11 : 0);
  }
}

// In a ResNet under bf16 a batch norm whose fused ReLU's output only convolutions read writes
// that output's saved copy alone (each block's first, which the block's second convolution reads
// from the copy); the stem's, also read by the first add, and those before an add do not. Every
// convolution but the stem (whose input, the model's, has no saved copy) writes only its saved
// copy too, which its batch norm reads in both passes. Nothing does in fp32.
// (FusedModelsComputeTheUnfusedOutputsLossAndGradients holds the bits to the passes run one by
// one.)
TEST_F(Fusion, UnderBf16AResNetsConvolutionsAndBatchNormsBeforeAConvolutionWriteOnlyTheSavedCopy) {
  SKIP_WITHOUT_CPU_BF16();
  const ModelDef def = make_model("cifar-resnet:depth=8");
  for (const Precision precision : {Precision::kBf16, Precision::kFp32}) {
    SCOPED_TRACE(to_string(precision));
    const std::vector<size_t> writing = flagged_layers(def, precision, &Model::writes_saved_copies);
    // Each block's convolutions (3 and 6, 10 and 13, 18 and 21), its first batch norm (4, 11,
    // 19) and that norm's ReLU (5, 12, 20).
    const std::vector<size_t> expected =
        precision == Precision::kBf16
            ? std::vector<size_t>{3, 4, 5, 6, 10, 11, 12, 13, 18, 19, 20, 21}
            : std::vector<size_t>{};
    EXPECT_EQ(writing, expected);
    if (precision == Precision::kBf16) {
      for (const size_t conv : {0, 3, 6, 10, 13, 18, 21}) {
        EXPECT_EQ(describe(def.layers[conv]).substr(0, 6), "Conv2D") << conv;
      }
      EXPECT_EQ(describe(def.layers[4]).substr(0, 11), "BatchNorm2D");
    }
  }
}

// `flags` names `expected` under bf16 with fusion, and no layer in fp32 or without fusion.
void expect_only_in_fused_bf16(const ModelDef& def, PlanFlags flags,
                               const std::vector<size_t>& expected) {
  for (const bool fuse : {true, false}) {
    set_fuse_layers(fuse);
    for (const Precision precision : {Precision::kBf16, Precision::kFp32}) {
      SCOPED_TRACE(::testing::Message() << to_string(precision) << (fuse ? " fused" : ""));
      EXPECT_EQ(flagged_layers(def, precision, flags),
                fuse && precision == Precision::kBf16 ? expected : std::vector<size_t>{});
    }
  }
}

// The layers of `def` of kind Spec.
template <class Spec>
std::vector<size_t> layers_of(const ModelDef& def) {
  std::vector<size_t> layers;
  for (size_t i = 0; i < def.layers.size(); ++i) {
    if (std::holds_alternative<Spec>(def.layers[i])) layers.push_back(i);
  }
  return layers;
}

// In a ResNet under bf16 the gradient of every convolution's output but the stem's is kept
// only as its bf16 copy: its batch norm's backward writes it so and the convolution's reads it
// (the stem's backward reads the model's input, which has no saved copy); not in fp32, nor
// without fusion. (FusedModelsComputeTheUnfusedOutputsLossAndGradients holds the bits to the
// passes run one by one.)
TEST_F(Fusion, UnderBf16AResNetsConvolutionsKeepTheirOutputGradientInBf16) {
  SKIP_WITHOUT_CPU_BF16();
  const ModelDef def = make_model("cifar-resnet:depth=8");
  std::vector<size_t> convolutions = layers_of<Conv2DSpec>(def);
  ASSERT_EQ(convolutions.size(), 7u);
  ASSERT_EQ(convolutions.front(), 0u);
  convolutions.erase(convolutions.begin());
  expect_only_in_fused_bf16(def, &Model::half_gradients, convolutions);
}

// In a GPT decoder under bf16 the gradient of each GELU's and each attention's input (the
// first MLP layer's and c_attn's output) is kept only as its bf16 copy: the GELU's and the
// attention's backward write it so and the dense layer's reads it; not in fp32, nor without
// fusion (SavedForward's and CpuAttention's tests hold the kernels' bits to the fp32
// gradient's).
TEST_F(Fusion, UnderBf16ADecodersDenseLayersBeforeGeluAndAttentionKeepTheirOutputGradientInBf16) {
  SKIP_WITHOUT_CPU_BF16();
  const ModelDef def = make_model("gpt:preset=micro");
  std::vector<size_t> before;
  for (size_t i = 0; i + 1 < def.layers.size(); ++i) {
    const auto* activation = std::get_if<ActivationSpec>(&def.layers[i + 1]);
    if ((activation != nullptr && activation->kind == Activation::kGelu) ||
        std::holds_alternative<CausalSelfAttentionSpec>(def.layers[i + 1])) {
      EXPECT_EQ(describe(def.layers[i]).substr(0, 5), "Dense") << i;
      before.push_back(i);
    }
  }
  ASSERT_EQ(before.size(), 4u);
  expect_only_in_fused_bf16(def, &Model::half_gradients, before);
}

// Under bf16 each of a ResNet's adds writes the saved copy of its fused ReLU's output (which the
// ReLU's mask in the add's backward reads, and the next block's convolution) in its own pass:
// the model's save pass skips it. Not in fp32, nor without fusion.
// (FusedModelsComputeTheUnfusedOutputsLossAndGradients holds the bits.)
TEST_F(Fusion, UnderBf16AResNetsAddsWriteTheSavedCopyOfTheirOutput) {
  SKIP_WITHOUT_CPU_BF16();
  const ModelDef def = make_model("cifar-resnet:depth=8");
  const std::vector<size_t> adds = layers_of<AddSpec>(def);
  ASSERT_EQ(adds.size(), 3u);
  expect_only_in_fused_bf16(def, &Model::adds_writing_saved_copies, adds);
}

}  // namespace
}  // namespace scalescope
