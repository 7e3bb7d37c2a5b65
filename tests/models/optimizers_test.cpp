// The CPU optimizers against float64 scalar reimplementations of PyTorch's formulas, over
// several steps (so that momentum and Adam's bias corrections are exercised), their state, and
// their independence of the thread count.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/cpu/cpu_device.h"
#include "core/error.h"
#include "core/random.h"
#include "core/tensor.h"
#include "models/cpu/cpu_kernels.h"
#include "models/model.h"
#include "models/optimizer.h"
#include "models/zoo.h"
#include "tests/models/loss_scaling_checks.h"

namespace scalescope {
namespace {

std::vector<float> random_values(int64_t count, uint64_t seed, float lo, float hi) {
  Rng rng(seed);
  std::vector<float> v(static_cast<size_t>(count));
  for (float& x : v) x = rng.uniform(lo, hi);
  return v;
}

// Float64 reference, one parameter at a time, as written in torch.optim.SGD / Adam.
struct Reference {
  OptimizerConfig config;
  std::vector<double> w;
  std::vector<double> s0;  // momentum_buffer | exp_avg
  std::vector<double> s1;  // exp_avg_sq

  Reference(const OptimizerConfig& c, const std::vector<float>& w0)
      : config(c), w(w0.begin(), w0.end()), s0(w0.size(), 0.0), s1(w0.size(), 0.0) {}

  void step(const std::vector<float>& grads, double lr, int64_t t) {
    const double wd = config.weight_decay;
    for (size_t i = 0; i < w.size(); ++i) {
      const double g = grads[i] + wd * w[i];
      if (config.kind == OptimizerKind::kSgd) {
        if (config.momentum > 0.0f) {
          // PyTorch: buf = g on the first step, then buf = momentum·buf + g.
          s0[i] = t == 1 ? g : config.momentum * s0[i] + g;
          w[i] -= lr * s0[i];
        } else {
          w[i] -= lr * g;
        }
      } else {
        const double b1 = config.beta1;
        const double b2 = config.beta2;
        s0[i] = b1 * s0[i] + (1 - b1) * g;
        s1[i] = b2 * s1[i] + (1 - b2) * g * g;
        const double m_hat = s0[i] / (1 - std::pow(b1, static_cast<double>(t)));
        const double v_hat = s1[i] / (1 - std::pow(b2, static_cast<double>(t)));
        w[i] -= lr * m_hat / (std::sqrt(v_hat) + config.epsilon);
      }
    }
  }
};

struct RunResult {
  std::vector<float> weights;
  std::vector<std::vector<float>> state;
};

// `steps` updates of the kernel from w0 with gradient sets drawn from `seed`; the learning
// rate changes every step (a schedule), to check that update() uses the one it is given.
RunResult run_kernel(const OptimizerConfig& config, const std::vector<float>& w0, int steps,
                     uint64_t seed, int threads = 2, Reference* ref = nullptr) {
  CpuDevice device(0, threads);
  const auto n = static_cast<int64_t>(w0.size());
  auto kernel = make_cpu_optimizer(config, n, device);
  Tensor w(device, Shape{n});
  w.copy_from_host(w0);
  Tensor g(device, Shape{n});
  for (int t = 1; t <= steps; ++t) {
    const std::vector<float> grads = random_values(n, seed + static_cast<uint64_t>(t), -1.0f, 1.0f);
    g.copy_from_host(grads);
    const float lr = config.lr * (1.0f + 0.5f * static_cast<float>(t));
    kernel->update(w.data(), g.data(), lr, t, device.default_stream());
    if (ref != nullptr) ref->step(grads, lr, t);
  }
  device.default_stream().synchronize();
  RunResult run{w.to_host(), {}};
  for (const TensorView& s : kernel->state()) {
    EXPECT_EQ(s.numel(), n);
    std::vector<float> host(static_cast<size_t>(s.numel()));
    device.copy_to_host(host.data(), s.data, s.bytes(), device.default_stream());
    device.default_stream().synchronize();
    run.state.push_back(std::move(host));
  }
  return run;
}

void expect_close(const std::vector<float>& got, const std::vector<double>& want,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 2e-6 + 2e-5 * std::abs(want[i])) << what << " element " << i;
  }
}

struct OptimizerCase {
  const char* name;
  OptimizerConfig config;
};

class OptimizerVsReference : public testing::TestWithParam<OptimizerCase> {};

TEST_P(OptimizerVsReference, FiveStepsMatchFloat64Formulas) {
  const OptimizerConfig& config = GetParam().config;
  const std::vector<float> w0 =
      random_values(1003, 7, -1.0f, 1.0f);  // not a multiple of the vector width
  Reference ref(config, w0);
  const RunResult run = run_kernel(config, w0, 5, 100, 2, &ref);
  expect_close(run.weights, ref.w, "weights");

  const std::vector<std::string> names = optimizer_state_names(config);
  ASSERT_EQ(run.state.size(), names.size());
  if (config.kind == OptimizerKind::kAdam) {
    expect_close(run.state[0], ref.s0, names[0]);
    expect_close(run.state[1], ref.s1, names[1]);
  } else if (config.momentum > 0.0f) {
    expect_close(run.state[0], ref.s0, names[0]);
  }
}

OptimizerConfig sgd(float lr, float momentum, float wd) {
  OptimizerConfig c;
  c.kind = OptimizerKind::kSgd;
  c.lr = lr;
  c.momentum = momentum;
  c.weight_decay = wd;
  return c;
}

OptimizerConfig adam(float lr, float wd, float beta1 = 0.9f, float beta2 = 0.999f,
                     float eps = 1e-7f) {
  OptimizerConfig c;
  c.kind = OptimizerKind::kAdam;
  c.lr = lr;
  c.weight_decay = wd;
  c.beta1 = beta1;
  c.beta2 = beta2;
  c.epsilon = eps;
  return c;
}

INSTANTIATE_TEST_SUITE_P(
    Configs, OptimizerVsReference,
    testing::Values(OptimizerCase{"Sgd", sgd(0.1f, 0.0f, 0.0f)},
                    OptimizerCase{"SgdWeightDecay", sgd(0.1f, 0.0f, 0.01f)},
                    OptimizerCase{"SgdMomentum", sgd(0.05f, 0.9f, 0.0f)},
                    OptimizerCase{"SgdMomentumWeightDecay", sgd(0.05f, 0.9f, 5e-4f)},
                    OptimizerCase{"Adam", adam(1e-2f, 0.0f)},
                    OptimizerCase{"AdamWeightDecay", adam(1e-2f, 0.01f)},
                    OptimizerCase{"AdamOtherBetas", adam(3e-3f, 0.0f, 0.5f, 0.9f, 1e-3f)}),
    [](const testing::TestParamInfo<OptimizerCase>& info) { return std::string(info.param.name); });

TEST(CpuOptimizers, AdamFirstStepMovesEachWeightByAboutLr) {
  // With bias correction, m̂/sqrt(v̂) = g/|g| on the first step: every weight moves by lr
  // against its gradient's sign. Without it, the step would be ~3.16·lr (0.1/sqrt(0.001)).
  const OptimizerConfig config = adam(1e-2f, 0.0f);
  CpuDevice device(0, 1);
  auto kernel = make_cpu_optimizer(config, 4, device);
  std::vector<float> w = {0.0f, 0.0f, 1.0f, 1.0f};
  std::vector<float> g = {0.5f, -2.0f, 1e-3f, -1.0f};
  kernel->update(w.data(), g.data(), config.lr, 1, device.default_stream());
  EXPECT_NEAR(w[0], -0.01f, 1e-6);
  EXPECT_NEAR(w[1], 0.01f, 1e-6);
  EXPECT_NEAR(w[2], 1.0f - 0.01f, 1e-5);
  EXPECT_NEAR(w[3], 1.0f + 0.01f, 1e-6);
}

TEST(CpuOptimizers, StateStartsAtZeroInNameOrder) {
  CpuDevice device(0, 1);
  for (const OptimizerConfig& config : {sgd(0.1f, 0.9f, 0.0f), adam(1e-3f, 0.0f)}) {
    auto kernel = make_cpu_optimizer(config, 100, device);
    const std::vector<TensorView> state = kernel->state();
    ASSERT_EQ(state.size(), optimizer_state_names(config).size());
    for (const TensorView& s : state) {
      EXPECT_EQ(s.shape, Shape{100});
      for (int64_t i = 0; i < s.numel(); ++i) ASSERT_EQ(s.data[i], 0.0f);
    }
  }
  // Plain SGD keeps no state (41M parameters would otherwise cost 164 MB for nothing).
  EXPECT_TRUE(optimizer_state_names(sgd(0.1f, 0.0f, 0.0f)).empty());
  EXPECT_TRUE(make_cpu_optimizer(sgd(0.1f, 0.0f, 0.0f), 100, device)->state().empty());
  EXPECT_EQ(optimizer_state_names(OptimizerConfig{}),
            (std::vector<std::string>{"exp_avg", "exp_avg_sq"}));
}

TEST(CpuOptimizers, ResultsDoNotDependOnThreadCount) {
  // Large enough that the update runs in parallel.
  const std::vector<float> w0 = random_values(100003, 9, -1.0f, 1.0f);
  for (const OptimizerConfig& config : {sgd(0.05f, 0.9f, 1e-4f), adam(1e-3f, 1e-4f)}) {
    const RunResult one = run_kernel(config, w0, 3, 50, 1);
    const RunResult four = run_kernel(config, w0, 3, 50, 4);
    EXPECT_EQ(one.weights, four.weights) << to_string(config.kind);
    EXPECT_EQ(one.state, four.state) << to_string(config.kind);
  }
}

TEST(CpuOptimizers, AdamRejectsStepZero) {
  CpuDevice device(0, 1);
  auto kernel = make_cpu_optimizer(adam(1e-3f, 0.0f), 1, device);
  float w = 0.0f;
  const float g = 1.0f;
  EXPECT_THROW(kernel->update(&w, &g, 1e-3f, 0, device.default_stream()), Error);
}

TEST(Optimizer, StepUpdatesTheModelAndCountsSteps) {
  // Through the Optimizer class and a real model's flat buffers (no forward needed).
  CpuDevice device(0, 2);
  Model model(make_model("dense-100"), Shape{100}, device, 1);
  const std::vector<float> w0 = model.weights().to_host();
  const std::vector<float> grads = random_values(model.flat_size(), 3, -1.0f, 1.0f);
  Stream& stream = device.default_stream();
  device.copy_to_device(model.grads().data(), grads.data(), model.grads().bytes(), stream);
  OptimizerConfig config = sgd(0.1f, 0.9f, 0.0f);
  Optimizer optimizer(config, model);
  optimizer.step(stream);
  optimizer.step(0.05f, stream);
  stream.synchronize();
  EXPECT_EQ(optimizer.steps_done(), 2);
  // v1 = g, w1 = w0 - 0.1 g; v2 = 0.9 g + g, w2 = w1 - 0.05 · 1.9 g.
  const std::vector<float> w2 = model.weights().to_host();
  for (size_t i = 0; i < w2.size(); ++i) {
    ASSERT_NEAR(w2[i], w0[i] - (0.1 + 0.05 * 1.9) * grads[i], 1e-6) << i;
  }
}

// ---- dynamic loss scaling's device side (tests/models/loss_scaling_checks.h)

TEST(LossScaling, UnscaleDividesEveryGradientAndFlagsOverflowOnCpuAndSim) {
  for (const DeviceKind kind : {DeviceKind::kCpu, DeviceKind::kSim}) {
    SCOPED_TRACE(to_string(kind));
    std::unique_ptr<Device> device = backend(kind).open(0, BackendOptions{});
    testing_util::expect_unscale_flags_overflow(*device);
  }
}

// On simulated devices the flag is read by the update's launch, in stream order.
TEST(LossScaling, AnOptimizerSkipsItsUpdateWhileTheFlagIsSetOnCpuAndSim) {
  for (const DeviceKind kind : {DeviceKind::kCpu, DeviceKind::kSim}) {
    SCOPED_TRACE(to_string(kind));
    std::unique_ptr<Device> device = backend(kind).open(0, BackendOptions{});
    testing_util::expect_optimizers_skip_while_flagged(*device);
  }
}

TEST(Optimizer, ARescindedStepDoesNotCount) {
  CpuDevice device(0, 1);
  Model model(make_model("dense-100"), Shape{100}, device, 1);
  Optimizer optimizer(adam(1e-3f, 0.0f), model);
  EXPECT_THROW(optimizer.rescind_step(), Error);
  optimizer.step(device.default_stream());
  optimizer.step(device.default_stream());
  optimizer.rescind_step();
  EXPECT_EQ(optimizer.steps_done(), 1);
}

}  // namespace
}  // namespace scalescope
