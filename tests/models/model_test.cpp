#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <variant>
#include <vector>

#include "core/cpu/cpu_device.h"
#include "core/error.h"
#include "core/random.h"
#include "core/tensor.h"
#include "models/model.h"
#include "models/optimizer.h"
#include "models/zoo.h"

namespace scalescope {
namespace {

std::vector<float> random_values(int64_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = rng.normal();
  return v;
}

TEST(Model, InitialisationIsGlorotUniformAndSeeded) {
  CpuDevice dev(0, 1);
  Model a(make_model("cifar-cnn"), Shape{32, 32, 3}, dev, 7);
  Model b(make_model("cifar-cnn"), Shape{32, 32, 3}, dev, 7);
  Model c(make_model("cifar-cnn"), Shape{32, 32, 3}, dev, 8);
  EXPECT_EQ(a.param_count(), 282250);
  const auto wa = a.weights_to_host();
  EXPECT_EQ(wa, b.weights_to_host());
  EXPECT_NE(wa, c.weights_to_host());
  for (size_t i = 0; i < a.params().size(); ++i) {
    const ParamSpec& p = a.params()[i].spec;
    if (p.fan_in == 0) {
      for (float v : wa[i]) EXPECT_EQ(v, 0.0f) << a.params()[i].name;
      continue;
    }
    const float limit = std::sqrt(6.0f / static_cast<float>(p.fan_in + p.fan_out));
    float max_abs = 0.0f;
    double sum = 0.0;
    for (float v : wa[i]) {
      max_abs = std::max(max_abs, std::abs(v));
      sum += v;
    }
    EXPECT_LE(max_abs, limit) << a.params()[i].name;
    EXPECT_GT(max_abs, 0.9f * limit) << a.params()[i].name;  // fills the range
    EXPECT_LT(std::abs(sum / static_cast<double>(wa[i].size())), 0.1 * limit);
  }
}

// Convolutions and dense layers say which oneDNN implementation each pass dispatched to;
// the layers of our own say nothing. Planned per batch size, so asked per batch size.
TEST(Model, KernelChoicesNameWhatEachPassOfTheWeightedLayersRuns) {
  CpuDevice dev(0, 1);
  Model m(make_model("cifar-cnn"), Shape{32, 32, 3}, dev, 1);
  EXPECT_THROW(m.kernel_choices(4), Error);  // nothing planned yet
  const std::vector<float> input = random_values(4 * 32 * 32 * 3, 3);
  m.forward(input.data(), 4, dev.default_stream());
  const std::vector<std::vector<KernelChoice>> choices = m.kernel_choices(4);
  ASSERT_EQ(choices.size(), m.def().layers.size());
  for (size_t layer = 0; layer < choices.size(); ++layer) {
    const bool conv = std::holds_alternative<Conv2DSpec>(m.def().layers[layer]);
    const bool dense = std::holds_alternative<DenseSpec>(m.def().layers[layer]);
    if (!conv && !dense) {
      EXPECT_TRUE(choices[layer].empty()) << layer;
      continue;
    }
    // The first layer reads the model's input, whose gradient nobody takes: no backward-data
    // is planned for it.
    const std::vector<std::string> passes =
        layer == 0 ? std::vector<std::string>{"forward", "backward-weights"}
                   : std::vector<std::string>{"forward", "backward-data", "backward-weights"};
    ASSERT_EQ(choices[layer].size(), passes.size()) << layer;
    for (size_t i = 0; i < passes.size(); ++i) EXPECT_EQ(choices[layer][i].pass, passes[i]);
    for (const KernelChoice& c : choices[layer]) {
      EXPECT_FALSE(c.algorithm.empty()) << layer;
      EXPECT_EQ(c.layout, conv ? "NHWC" : "NC");
      EXPECT_TRUE(c.deterministic);
    }
  }
  EXPECT_THROW(m.kernel_choices(8), Error);
}

// A batch whose rows in some layer pass 2^31 - 1 is refused by name before any kernel is
// planned: oneDNN stopped the process with SIGFPE planning mlp-41m's dense layers at batch 2^32,
// and the plan's byte counts overflowed at 2^62. cifar-cnn's input has 1024 pixels a sample,
// its flattened dense input one row; the batch 2^21 is the first whose pixels pass 2^31 - 1.
TEST(Model, ABatchPastTheLibrariesRowsIsRefusedNamingTheLayer) {
  CpuDevice dev(0, 1);
  Model m(make_model("cifar-cnn"), Shape{32, 32, 3}, dev, 1);
  const auto message = [&](int64_t batch) -> std::string {
    try {
      m.memory(batch);
    } catch (const UsageError& e) {
      return e.brief();
    }
    return "no error";
  };
  EXPECT_EQ(message(int64_t{1} << 21),
            "batch size 2097152 is too large for model 'cifar-cnn': its input would have "
            "2097152 x 1024 rows (of 3 values), more than the 2^31 - 1 rows the kernels' "
            "libraries index (cuBLAS, cuDNN, oneDNN)");
  EXPECT_NE(message(int64_t{1} << 62).find("its input would have 4611686018427387904 x 1024"),
            std::string::npos);
  // A model whose input is one row a sample: the first layer with positions is named.
  Model gpt(make_model("gpt:preset=micro"), make_model("gpt:preset=micro").default_input, dev, 1);
  const int64_t tokens = gpt.input_shape().numel();
  try {
    gpt.memory(std::numeric_limits<int32_t>::max() / tokens + 1);
    ADD_FAILURE() << "no error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.brief()).find("layer 0 (Embedding("), std::string::npos) << e.brief();
  }
  EXPECT_THROW(m.kernel_choices(int64_t{1} << 21), Error);  // nothing was planned
}

TEST(Model, GradientLayoutIsReverseLayerOrderAndContiguous) {
  CpuDevice dev(0, 1);
  Model m(make_model("cifar-cnn"), Shape{32, 32, 3}, dev, 1);
  // Layers with parameters: 0 (conv), 3 (conv), 7 (dense), 9 (dense). Dense 9 is a 64×10
  // weight (640 floats) and 10 biases, padded to 704 (11 × 64 floats).
  EXPECT_EQ(m.layer_grad_range(9), (std::pair<int64_t, int64_t>{0, 704}));
  EXPECT_EQ(m.layer_grad_range(7).first, 704);
  EXPECT_EQ(m.layer_grad_range(3).first, m.layer_grad_range(7).second);
  EXPECT_EQ(m.layer_grad_range(0).first, m.layer_grad_range(3).second);
  EXPECT_EQ(m.layer_grad_range(0).second, m.flat_size());
  EXPECT_EQ(m.layer_grad_range(1), (std::pair<int64_t, int64_t>{0, 0}));  // ReLU: none
  // Inside a layer the weight precedes the bias, which starts on the next 256-byte boundary
  // (864 weights: 896).
  EXPECT_EQ(m.param_offset(0), m.layer_grad_range(0).first);
  EXPECT_EQ(m.param_offset(1), m.param_offset(0) + 896);
}

// Every parameter, so every gradient bucket, starts on a 256-byte boundary of the flat
// buffers (NCCL's vectorised path); the gaps cost little and stay zero through training.
TEST(Model, ParametersStartOn256ByteBoundariesAndTheGapsStayZero) {
  CpuDevice dev(0, 1);
  Model m(make_model("cifar-cnn"), Shape{32, 32, 3}, dev, 1);
  std::vector<bool> in_param(static_cast<size_t>(m.flat_size()), false);
  for (size_t i = 0; i < m.params().size(); ++i) {
    EXPECT_EQ(m.param_offset(i) * sizeof(float) % 256, 0u) << m.params()[i].name;
    const int64_t n = m.params()[i].spec.shape.numel();
    for (int64_t k = 0; k < n; ++k) in_param.at(static_cast<size_t>(m.param_offset(i) + k)) = true;
  }
  EXPECT_EQ(m.param_count(), 282250);  // the padding is not counted as parameters
  EXPECT_EQ(std::count(in_param.begin(), in_param.end(), true), m.param_count());
  EXPECT_LT(m.flat_size() - m.param_count(), 64 * static_cast<int64_t>(m.params().size()));

  // Adam with weight decay, gradients in the parameters only: the gaps stay exactly zero.
  Stream& stream = dev.default_stream();
  for (size_t i = 0; i < m.params().size(); ++i) {
    const std::vector<float> g = random_values(m.params()[i].spec.shape.numel(), 10 + i);
    dev.copy_to_device(m.grad(i).data, g.data(), g.size() * sizeof(float), stream);
  }
  OptimizerConfig config;
  config.kind = OptimizerKind::kAdam;
  config.weight_decay = 0.01f;
  Optimizer optimizer(config, m);
  for (int step = 0; step < 3; ++step) optimizer.step(stream);
  stream.synchronize();
  const std::vector<float> flat = m.weights().to_host();
  for (size_t k = 0; k < flat.size(); ++k) {
    if (!in_param[k]) {
      ASSERT_EQ(flat[k], 0.0f) << "gap at " << k;
    }
  }
}

TEST(Model, BackwardReportsLayersLastToFirst) {
  CpuDevice dev(0, 1);
  Model m(make_model("dense-100"), Shape{100}, dev, 1);
  Tensor x(dev, Shape{4, 100});
  x.copy_from_host(random_values(400, 1));
  Tensor y(dev, Shape{4, 10});
  std::vector<float> labels(40, 0.0f);
  for (int i = 0; i < 4; ++i) labels[static_cast<size_t>(i * 10 + i)] = 1.0f;
  y.copy_from_host(labels);
  Tensor loss(dev, Shape{1});
  Stream& s = dev.default_stream();
  m.forward(x.data(), 4, s);
  m.loss_forward_backward(y.data(), 0.25f, loss.data(), s);
  std::vector<int> order;
  m.backward(s, [&](int layer) { order.push_back(layer); });
  EXPECT_EQ(order, (std::vector<int>{2, 1, 0}));
  // Backward without a new loss is an error, not a silent reuse.
  EXPECT_THROW(m.backward(s), Error);
}

TEST(Model, OutputsDoNotDependOnBatchComposition) {
  CpuDevice dev(0, 1);
  Model m(make_model("cifar-cnn"), Shape{32, 32, 3}, dev, 3);
  const int64_t sample = 32 * 32 * 3;
  const std::vector<float> inputs = random_values(4 * sample, 5);
  Tensor x4(dev, Shape{4, 32, 32, 3});
  x4.copy_from_host(inputs);
  m.forward(x4.data(), 4, dev.default_stream());
  std::vector<float> together(40);
  dev.copy_to_host(together.data(), m.output(), 40 * sizeof(float), dev.default_stream());
  for (int64_t i = 0; i < 4; ++i) {
    Tensor x1(dev, Shape{1, 32, 32, 3});
    x1.copy_from_host(std::span(inputs).subspan(static_cast<size_t>(i * sample), sample));
    m.forward(x1.data(), 1, dev.default_stream());
    std::vector<float> alone(10);
    dev.copy_to_host(alone.data(), m.output(), 10 * sizeof(float), dev.default_stream());
    for (int k = 0; k < 10; ++k) {
      EXPECT_NEAR(alone[static_cast<size_t>(k)], together[static_cast<size_t>(i * 10 + k)], 1e-4)
          << "sample " << i << " class " << k;
    }
  }
}

TEST(Model, AdamStepsReduceTheLossOfAFixedBatch) {
  CpuDevice dev(0, 1);
  for (const char* name : {"dense-100", "cifar-cnn", "mlp:scale=0.01", "gap-cnn"}) {
    const ModelDef def = make_model(name);
    const Shape input =
        def.default_input == Shape{224, 224, 3} ? Shape{20, 20, 3} : def.default_input;
    Model m(def, input, dev, 11);
    Optimizer opt(OptimizerConfig{}, m);
    const int64_t batch = 8;
    Tensor x(dev, input.with_batch(batch));
    x.copy_from_host(random_values(x.numel(), 2));
    const Shape out = m.output_shape();
    std::vector<float> labels;
    for (int64_t i = 0; i < batch; ++i) {
      if (def.loss == LossKind::kSoftmaxCrossEntropyOneHot) {
        for (int64_t k = 0; k < out[0]; ++k) labels.push_back(k == i % out[0] ? 1.0f : 0.0f);
      } else if (def.loss == LossKind::kBinaryCrossEntropy) {
        labels.push_back(static_cast<float>(i % 2));
      } else {
        labels.push_back(static_cast<float>(i % out[0]));
      }
    }
    Tensor y(dev, Shape{static_cast<int64_t>(labels.size())});
    y.copy_from_host(labels);
    Tensor loss(dev, Shape{1});
    Stream& s = dev.default_stream();
    std::vector<float> losses;
    for (int step = 0; step < 30; ++step) {
      m.forward(x.data(), batch, s);
      m.loss_forward_backward(y.data(), 1.0f / batch, loss.data(), s);
      m.backward(s);
      opt.step(s);
      losses.push_back(loss.to_host()[0]);
    }
    // gap-cnn averages random images over the whole plane, which leaves little to tell the
    // samples apart: it can only be asked to improve, not to halve its loss in 30 steps.
    const float target = def.name == "gap-cnn" ? 0.97f : 0.5f;
    EXPECT_LT(losses.back(), target * losses.front()) << name;
    for (float l : losses) EXPECT_TRUE(std::isfinite(l)) << name;
  }
}

}  // namespace
}  // namespace scalescope
