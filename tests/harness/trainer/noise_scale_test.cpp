// The gradient noise scale measured in training: at fixed weights (learning rate 0) on a
// 512-sample subset of Fashion-MNIST, the estimates converge to the exact |G|² and tr(Σ) of
// those weights, computed here from per-sample gradients that the trainer itself took; B_noise
// does not depend on the device count; the simulated accelerator's stream reducer measures the
// same norms as the CPU's thread reducer; a run that cannot measure it says why.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "harness/trainer/trainer.h"
#include "reports/analysis/noise_scale.h"
#include "reports/analysis/stats.h"

namespace scalescope {
namespace {

constexpr const char* kFashionMnist = "idx:/usr/share/datasets/fashion-mnist";
constexpr int64_t kSamples = 512;

bool have_fashion_mnist() {
  return std::ifstream("/usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz").good();
}

// cifar-cnn at its initial weights (seed 1) on the first 512 training samples: SGD with a
// learning rate of 0 never moves them.
TrainOptions fixed_weights(const std::string& devices, int64_t batch, int64_t steps) {
  TrainOptions o;
  o.model = "cifar-cnn";
  o.data.spec = kFashionMnist;
  o.data.train_samples = kSamples;
  o.devices = devices;
  o.batch = batch;
  o.steps = steps;
  o.eval = false;
  o.optimizer.kind = OptimizerKind::kSgd;
  o.optimizer.lr = 0.0f;
  o.noise_scale = true;
  o.warmup_steps = 0;
  return o;
}

std::vector<GradSqNorms> norms_of(const RunReport& r) {
  std::vector<GradSqNorms> out;
  for (const StepRecord& s : r.steps) {
    EXPECT_TRUE(s.grad_norms.has_value()) << "step " << s.step;
    if (s.grad_norms) out.push_back(s.grad_norms->norms());
  }
  return out;
}

// The exact figures of the 512 samples' gradients g_i at the fixed weights: |G|² of their mean,
// and the population trace tr = mean |g_i - G|² = mean |g_i|² - |G|².
struct Truth {
  double grad_sq = 0.0;
  double trace = 0.0;
};

Truth exact_truth() {
  // One step over all 512 samples, one per micro-batch: its averaged gradient is G.
  TrainOptions whole = fixed_weights("cpu:1", 1, 1);
  whole.accumulation = static_cast<int>(kSamples);
  const RunReport g = train(whole);
  // One epoch at batch 1 on two replicas: each sample's gradient once, as a replica's local
  // gradient.
  const RunReport each = train(fixed_weights("cpu:2", 1, kSamples / 2));
  double sum = 0.0;
  int64_t n = 0;
  for (const StepRecord& s : each.steps) {
    for (const double v : s.grad_norms->local) {
      sum += v;
      ++n;
    }
  }
  EXPECT_EQ(n, kSamples);
  Truth t;
  t.grad_sq = g.steps.at(0).grad_norms->global;
  t.trace = sum / static_cast<double>(n) - t.grad_sq;
  return t;
}

TEST(NoiseScaleTraining, ConvergesToTheExactFiguresAtFixedWeights) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "Debian's dataset-fashion-mnist is not installed";
  const Truth truth = exact_truth();
  ASSERT_GT(truth.grad_sq, 0.0);
  ASSERT_GT(truth.trace, 0.0);
  // Batches drawn without replacement from n samples: E|G_B|² = |G|² + tr/B · (n-B)/(n-1),
  // which makes the estimates' expectations tr·n/(n-1) and |G|² - tr/(n-1) (for any two B).
  const double n = kSamples;
  const double trace = truth.trace * n / (n - 1);
  const double grad_sq = truth.grad_sq - truth.trace / (n - 1);
  // 15 epochs of 32 steps at batch 8 on two replicas.
  const RunReport r = train(fixed_weights("cpu:2", 8, 480));
  const std::vector<GradSqNorms> norms = norms_of(r);
  const NoiseScale s = summarize_noise(norms, r.noise_batches());
  // Each mean lies within 4 standard errors of its expectation (seen: trace 0.6% off, |G|² 1.4%
  // off, with standard errors of 1.6% and 10%); and the errors are small enough to mean something.
  std::vector<double> traces;
  std::vector<double> grad_sqs;
  for (const GradSqNorms& g : norms) {
    traces.push_back(estimate_noise(g, r.noise_batches()).trace);
    grad_sqs.push_back(estimate_noise(g, r.noise_batches()).grad_sq);
  }
  const double root_n = std::sqrt(static_cast<double>(norms.size()));
  const double trace_se = stddev(traces) / root_n;
  const double grad_sq_se = stddev(grad_sqs) / root_n;
  EXPECT_LT(trace_se, 0.05 * trace);
  EXPECT_LT(grad_sq_se, 0.2 * grad_sq);
  EXPECT_NEAR(s.mean.trace, trace, 4 * trace_se);
  EXPECT_NEAR(s.mean.grad_sq, grad_sq, 4 * grad_sq_se);
  ASSERT_TRUE(s.b_noise.has_value());
  EXPECT_LE(s.b_noise->low, trace / grad_sq);
  EXPECT_GE(s.b_noise->high, trace / grad_sq);
}

TEST(NoiseScaleTraining, DoesNotDependOnTheDeviceCount) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "Debian's dataset-fashion-mnist is not installed";
  // B_big 16 on two replicas, 32 on four: each interval holds the other's value.
  const RunReport two = train(fixed_weights("cpu:2", 8, 320));
  const RunReport four = train(fixed_weights("cpu:4", 8, 320));
  const NoiseScale a = summarize_noise(norms_of(two), two.noise_batches());
  const NoiseScale b = summarize_noise(norms_of(four), four.noise_batches());
  EXPECT_EQ(a.batches.big, 16);
  EXPECT_EQ(b.batches.big, 32);
  ASSERT_TRUE(a.b_noise && b.b_noise);
  EXPECT_LE(a.b_noise->low, b.b_noise->value);
  EXPECT_GE(a.b_noise->high, b.b_noise->value);
  EXPECT_LE(b.b_noise->low, a.b_noise->value);
  EXPECT_GE(b.b_noise->high, a.b_noise->value);
}

TEST(NoiseScaleTraining, StreamReducerMeasuresWhatTheThreadReducerDoes) {
  // Training that moves the weights, with accumulation (the local norm is the last
  // micro-batch's): the simulated accelerator's enqueued norms against the CPU's.
  TrainOptions o;
  o.model = "dense-100";
  o.batch = 8;
  o.accumulation = 2;
  o.steps = 12;
  o.eval = false;
  o.noise_scale = true;
  o.devices = "cpu:2";
  const RunReport cpu = train(o);
  o.devices = "sim:2";
  const RunReport sim = train(o);
  ASSERT_EQ(cpu.steps.size(), sim.steps.size());
  for (size_t i = 0; i < cpu.steps.size(); ++i) {
    const StepGradNorms& a = *cpu.steps[i].grad_norms;
    const StepGradNorms& b = *sim.steps[i].grad_norms;
    EXPECT_NEAR(a.global, b.global, 1e-9 * a.global) << "step " << i + 1;
    for (size_t k = 0; k < a.local.size(); ++k) {
      EXPECT_NEAR(a.local[k], b.local[k], 1e-9 * a.local[k]) << "step " << i + 1;
    }
    EXPECT_GT(a.local[0], a.global);  // a micro-batch's gradient is noisier than the average
  }
  EXPECT_EQ(cpu.noise_batches().small, 8);
  EXPECT_EQ(cpu.noise_batches().big, 32);
}

TEST(NoiseScaleTraining, OneReplicaWithoutAccumulationSaysWhyThereIsNone) {
  TrainOptions o;
  o.model = "dense-100";
  o.batch = 8;
  o.steps = 3;
  o.eval = false;
  o.noise_scale = true;
  const RunReport r = train(o);
  EXPECT_FALSE(r.steps.front().grad_norms.has_value());
  const nlohmann::json j = to_json(r);
  ASSERT_TRUE(j.contains("noise_scale"));
  EXPECT_THAT(j["noise_scale"]["unavailable"].get<std::string>(),
              ::testing::HasSubstr("one replica"));
  o.noise_scale = false;
  EXPECT_FALSE(to_json(train(o)).contains("noise_scale"));
}

}  // namespace
}  // namespace scalescope
