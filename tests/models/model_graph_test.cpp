// Models that are graphs (residual connections): the gradients of a graph whose layers have
// several readers and whose Add layers have two inputs, against finite differences of the
// model's own loss; malformed graphs refused by name; batch norm's buffers through training
// and evaluation; names as PyTorch's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/cpu/cpu_device.h"
#include "core/error.h"
#include "core/random.h"
#include "core/tensor.h"
#include "models/memory_plan.h"
#include "models/model.h"
#include "models/zoo.h"
#include "tests/test_util.h"

namespace scalescope {
namespace {

using testing_util::error_of;

// Every wiring case at once: layer 0 is read by a batch norm and by an Add; layer 4 by a
// strided convolution and by the shortcut; two Adds; biased and bias-free convolutions.
ModelDef residual_graph() {
  const auto conv = [](int64_t filters, int64_t stride, bool bias) {
    return Conv2DSpec{filters, 3, stride, Padding::kExplicit, 1, bias};
  };
  return ModelDef{"residual-graph",
                  {conv(3, 1, true), BatchNorm2DSpec{}, ActivationSpec{Activation::kTanh},
                   conv(3, 1, false), AddSpec{}, PadShortcutSpec{2, 5}, conv(5, 2, true), AddSpec{},
                   GlobalAvgPoolSpec{}, DenseSpec{4}},
                  LossKind::kSoftmaxCrossEntropy,
                  Shape{5, 5, 2},
                  {{kModelInput}, {0}, {1}, {2}, {3, 0}, {4}, {4}, {6, 5}, {7}, {8}},
                  {},
                  {}};
}

struct Batch {
  Tensor x, y, loss;
};

// Inputs in [-1, 1] (token ids for a sequence model) and class indices below 4 (below the
// vocabulary, one per position, for a sequence model).
Batch make_batch(Device& dev, const Model& m, int64_t n) {
  const Shape labels = label_shape(m.def().loss, m.output_shape()).with_batch(n);
  Batch b{Tensor(dev, m.input_shape().with_batch(n)), Tensor(dev, labels), Tensor(dev, Shape{1})};
  Rng rng(9);
  const int64_t vocab = input_vocab(m.def());
  std::vector<float> x(static_cast<size_t>(b.x.numel()));
  for (float& v : x) {
    v = vocab > 0 ? static_cast<float>(rng.below(static_cast<uint64_t>(vocab)))
                  : rng.uniform(-1.0f, 1.0f);
  }
  b.x.copy_from_host(x);
  std::vector<float> y;
  for (int64_t i = 0; i < labels.numel(); ++i) y.push_back(static_cast<float>(i % 4));
  b.y.copy_from_host(y);
  return b;
}

double loss_of(Model& m, Batch& b, int64_t n, Stream& s) {
  m.forward(b.x.data(), n, s);
  m.loss_forward(b.y.data(), 1.0f / static_cast<float>(n), b.loss.data(), s);
  return b.loss.to_host()[0];
}

// Every parameter's analytic gradient against central differences of the model's loss.
void expect_gradients_match_finite_differences(const ModelDef& def) {
  CpuDevice dev(0, 1);
  Stream& s = dev.default_stream();
  Model m(def, def.default_input, dev, 4);
  const int64_t n = 3;
  Batch b = make_batch(dev, m, n);
  m.forward(b.x.data(), n, s);
  m.loss_forward_backward(b.y.data(), 1.0f / static_cast<float>(n), b.loss.data(), s);
  m.backward(s);
  const std::vector<float> grads = m.grads().to_host();

  std::vector<std::vector<float>> weights = m.weights_to_host();
  // float32 central differences: wiring mistakes (a reader's gradient lost or counted twice)
  // are O(1); rounding stays below 1e-3 of these gradients.
  const float h = 1e-2f;
  for (size_t p = 0; p < weights.size(); ++p) {
    for (size_t i = 0; i < weights[p].size(); ++i) {
      const float original = weights[p][i];
      weights[p][i] = original + h;
      m.weights_from_host(weights);
      const double up = loss_of(m, b, n, s);
      weights[p][i] = original - h;
      m.weights_from_host(weights);
      const double down = loss_of(m, b, n, s);
      weights[p][i] = original;
      const double numeric = (up - down) / (2.0 * h);
      const double analytic = grads[static_cast<size_t>(m.param_offset(p)) + i];
      ASSERT_NEAR(analytic, numeric, 2e-3 + 2e-2 * std::abs(numeric))
          << def.name << ": " << m.params()[p].name << "[" << i << "]";
    }
  }
}

TEST(ModelGraph, GradientsOfEveryParameterMatchFiniteDifferences) {
  expect_gradients_match_finite_differences(residual_graph());
}

// A whole decoder: residual streams read twice per block, and the token table read twice (the
// embedding and the tied lm_head), its gradient the sum of both.
TEST(ModelGraph, GptGradientsMatchFiniteDifferencesTiedWeightsIncluded) {
  const ModelDef def = make_model("gpt:layers=2,d=8,heads=2,seq=4,vocab=11");
  ASSERT_EQ(def.ties.size(), 1u);
  expect_gradients_match_finite_differences(def);
}

// Without the tied head's share, the token table's gradient is the embedding's alone: the test
// above must see the difference.
TEST(ModelGraph, TheTiedHeadContributesToTheTokenTablesGradient) {
  const ModelDef def = make_model("gpt:layers=1,d=8,heads=2,seq=4,vocab=11");
  CpuDevice dev(0, 1);
  Stream& s = dev.default_stream();
  Model m(def, def.default_input, dev, 4);
  ASSERT_EQ(m.params().front().name, "transformer.wte.weight");
  ASSERT_EQ(m.param_aliases().size(), 1u);
  EXPECT_EQ(m.param_aliases()[0].name, "lm_head.weight");
  EXPECT_EQ(m.param_aliases()[0].param, 0u);
  Batch b = make_batch(dev, m, 2);
  m.forward(b.x.data(), 2, s);
  m.loss_forward_backward(b.y.data(), 0.5f, b.loss.data(), s);
  m.backward(s);
  const std::vector<float> grads = m.grads().to_host();
  // Token 10 never occurs in the inputs (make_batch draws below the vocabulary, and 11 ids
  // over 8 positions miss some): its embedding row gets a gradient from lm_head alone.
  std::vector<float> ids = b.x.to_host();
  double head_only = 0.0;
  for (int64_t token = 0; token < 11; ++token) {
    if (std::find(ids.begin(), ids.end(), static_cast<float>(token)) != ids.end()) continue;
    for (int64_t c = 0; c < 8; ++c) {
      head_only += std::abs(grads[static_cast<size_t>(m.param_offset(0) + token * 8 + c)]);
    }
  }
  EXPECT_GT(head_only, 0.0) << "rows of tokens absent from the input got no gradient";
}

// An Add may read the model's input itself (a residual connection around the first layer).
TEST(ModelGraph, AnAddOfTheModelsInputTrainsToo) {
  expect_gradients_match_finite_differences(
      ModelDef{"input-residual",
               {Conv2DSpec{2, 3, 1, Padding::kExplicit, 1, true}, AddSpec{}, GlobalAvgPoolSpec{},
                DenseSpec{4}},
               LossKind::kSoftmaxCrossEntropy,
               Shape{4, 4, 2},
               {{kModelInput}, {0, kModelInput}, {1}, {2}},
               {},
               {}});
}

ModelDef with_inputs(std::vector<std::vector<int>> inputs) {
  ModelDef def = residual_graph();
  def.inputs = std::move(inputs);
  return def;
}

TEST(ModelGraph, MalformedGraphsAreRefusedNamingTheLayer) {
  const Shape in{5, 5, 2};
  EXPECT_CONTAINS(
      error_of([&] {
        layer_shapes(
            with_inputs({{kModelInput}, {0}, {1}, {5}, {3, 0}, {4}, {4}, {6, 5}, {7}, {8}}), in);
      }),
      "layer 3 (Conv2D(3, 3x3, stride 1, pad 1, no bias)) reads layer 5, which does "
      "not come before it");
  EXPECT_CONTAINS(
      error_of([&] {
        layer_shapes(with_inputs({{kModelInput}, {0}, {1}, {2}, {3}, {4}, {4}, {6, 5}, {7}, {8}}),
                     in);
      }),
      "layer 4 (Add) takes 2 input(s), given 1");
  EXPECT_CONTAINS(
      error_of([&] {
        layer_shapes(
            with_inputs({{kModelInput}, {0}, {1}, {2}, {3, 0}, {4}, {4}, {6, 4}, {7}, {8}}), in);
      }),
      "layer 7 adds shapes [3, 3, 5] and [5, 5, 3]");
  EXPECT_CONTAINS(
      error_of([&] {
        layer_shapes(
            with_inputs({{kModelInput}, {0}, {1}, {2}, {3, 0}, {4}, {4}, {6, 6}, {7}, {8}}), in);
      }),
      "nothing reads the output of layer 5 (PadShortcut(stride 2, 5 channels))");
  EXPECT_CONTAINS(error_of([&] { layer_shapes(with_inputs({{kModelInput}}), in); }),
                  "10 layers but 1 lists of inputs");
}

TEST(ModelGraph, BatchNormBuffersMoveInTrainingOnlyAndStartAtPyTorchsValues) {
  CpuDevice dev(0, 1);
  Stream& s = dev.default_stream();
  Model m(make_model("cifar-resnet:depth=8"), Shape{8, 8, 3}, dev, 1);
  ASSERT_EQ(m.buffer_infos().size(), 3u * 7u);  // 7 batch norms
  EXPECT_EQ(m.buffer_infos()[0].name, "bn1.running_mean");
  EXPECT_EQ(m.buffer_infos()[1].name, "bn1.running_var");
  EXPECT_EQ(m.buffer_infos()[2].name, "bn1.num_batches_tracked");
  const auto initial = m.buffers_to_host();
  EXPECT_EQ(initial[0], std::vector<float>(16, 0.0f));
  EXPECT_EQ(initial[1], std::vector<float>(16, 1.0f));
  EXPECT_EQ(initial[2], std::vector<float>{0.0f});
  // Batch norm's scale starts at 1, its shift at 0 (PyTorch's reset_parameters).
  for (size_t i = 0; i < m.params().size(); ++i) {
    if (m.params()[i].name != "bn1.weight") continue;
    EXPECT_EQ(m.weights_to_host()[i], std::vector<float>(16, 1.0f));
  }

  Batch b = make_batch(dev, m, 4);
  m.forward(b.x.data(), 4, s, /*training=*/false);
  EXPECT_EQ(m.buffers_to_host(), initial) << "evaluation moved the running statistics";
  m.forward(b.x.data(), 4, s);
  const auto trained = m.buffers_to_host();
  EXPECT_NE(trained[0], initial[0]);
  EXPECT_NE(trained[1], initial[1]);
  EXPECT_EQ(trained[2], std::vector<float>{1.0f});
}

TEST(ModelGraph, ParameterNamesAreThePyTorchModulePaths) {
  const ModelDef def = make_model("cifar-resnet:depth=8");
  std::vector<std::string> names;
  for (const ParamInfo& p : param_infos(def, def.default_input)) names.push_back(p.name);
  const std::vector<std::string> expected = {
      "conv1.weight",          "bn1.weight",          "bn1.bias",
      "layer1.0.conv1.weight", "layer1.0.bn1.weight", "layer1.0.bn1.bias",
      "layer1.0.conv2.weight", "layer1.0.bn2.weight", "layer1.0.bn2.bias",
      "layer2.0.conv1.weight", "layer2.0.bn1.weight", "layer2.0.bn1.bias",
      "layer2.0.conv2.weight", "layer2.0.bn2.weight", "layer2.0.bn2.bias",
      "layer3.0.conv1.weight", "layer3.0.bn1.weight", "layer3.0.bn1.bias",
      "layer3.0.conv2.weight", "layer3.0.bn2.weight", "layer3.0.bn2.bias",
      "linear.weight",         "linear.bias"};
  EXPECT_EQ(names, expected);
}

// A training step keeps the outputs some backward reads (outputs_read_in_backward: here the
// convolutions' and ReLUs' but not batch norm's or the adds'), as PyTorch keeps its saved
// tensors, and an activation gradient only while it is live (plan_gradient_arena), not a
// gradient per layer (which made the peak of ResNet-50 and GPT-2 small twice PyTorch's on an
// H200).
TEST(ModelGraph, AStepKeepsWhatBackwardReadsAndAFewGradients) {
  const ModelDef def = make_model("cifar-resnet:depth=20");
  CpuDevice dev(0, 1);
  Stream& s = dev.default_stream();
  Model m(def, def.default_input, dev, 4);
  const int64_t n = 8;
  Batch b = make_batch(dev, m, n);
  const std::vector<Shape> shapes = layer_shapes(def, def.default_input);
  const std::vector<bool> kept = outputs_read_in_backward(def);
  int64_t all = 0;
  int64_t read = 0;
  int64_t largest = 0;
  for (size_t layer = 0; layer < def.layers.size(); ++layer) {
    const int64_t bytes = shapes[layer + 1].numel() * n * 4;
    all += bytes;
    if (kept[layer]) read += bytes;
    largest = std::max(largest, bytes);
  }
  EXPECT_LT(read * 10, all * 7) << "batch norm's and the adds' outputs are not read";
  const int64_t before = dev.memory_in_use();
  dev.reset_peak_memory();
  m.forward(b.x.data(), n, s);
  m.loss_forward_backward(b.y.data(), 1.0f / static_cast<float>(n), b.loss.data(), s);
  m.backward(s);
  const int64_t step = dev.peak_memory() - before;
  // Seen at batch 8: 19.4 MB alone, 21.3 after the other tests of the binary; 12.1 of it
  // outputs read in backward (of 21.2 in all), the rest up to 17.8 times the largest output
  // (0.52 MB): the forward and gradient arenas, the second reader's scratch and what the
  // kernels keep for themselves. With every output kept it was 27.6 MB, with a gradient per
  // layer as well 47.2 MB.
  EXPECT_LE(step, read + 20 * largest);
}

}  // namespace
}  // namespace scalescope
