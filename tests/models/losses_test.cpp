// The CPU losses against float64 references written from the definitions, central-difference
// gradient checks, numerical robustness, label validation, accuracy counting and determinism.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/cpu/cpu_device.h"
#include "core/error.h"
#include "core/random.h"
#include "core/tensor.h"
#include "models/cpu/cpu_kernels.h"
#include "tests/test_util.h"

namespace scalescope {
namespace {

using testing_util::error_of;

// ---- float64 references: per-sample losses summed over the batch, straight from the
// definitions (no max subtraction needed for the moderate logits they are used with).

double ref_softmax_ce(const std::vector<double>& z, const std::vector<float>& labels, int64_t n,
                      int64_t k) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    double s = 0.0;
    for (int64_t j = 0; j < k; ++j) s += std::exp(z[i * k + j]);
    sum += -std::log(std::exp(z[i * k + static_cast<int64_t>(labels[i])]) / s);
  }
  return sum;
}

double ref_softmax_ce_one_hot(const std::vector<double>& z, const std::vector<float>& labels,
                              int64_t n, int64_t k) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    double s = 0.0;
    for (int64_t j = 0; j < k; ++j) s += std::exp(z[i * k + j]);
    for (int64_t j = 0; j < k; ++j)
      sum += -labels[i * k + j] * std::log(std::exp(z[i * k + j]) / s);
  }
  return sum;
}

double ref_bce(const std::vector<double>& p, const std::vector<float>& labels, int64_t n, int64_t) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double q = std::clamp(p[i], 1e-7, 1.0 - 1e-7);
    sum += -(labels[i] * std::log(q) + (1.0 - labels[i]) * std::log(1.0 - q));
  }
  return sum;
}

using RefLoss = double (*)(const std::vector<double>&, const std::vector<float>&, int64_t, int64_t);

struct LossResult {
  float loss = 0.0f;
  float loss_only = 0.0f;  // from forward(), which must agree
  std::vector<float> grad;
};

// Runs make_cpu_loss on host values through device tensors, as the model does.
LossResult run_loss(LossKind kind, int64_t n, int64_t k, const std::vector<float>& output,
                    const std::vector<float>& labels, float scale, int threads = 2) {
  CpuDevice device(0, threads);
  Stream& stream = device.default_stream();
  auto kernel = make_cpu_loss(kind, Shape{n, k}, device);
  Tensor out(device, Shape{n, k});
  out.copy_from_host(output);
  Tensor lab(device, Shape{static_cast<int64_t>(labels.size())});
  lab.copy_from_host(labels);
  Tensor loss(device, Shape{1});
  Tensor loss_only(device, Shape{1});
  Tensor dout(device, Shape{n, k});
  kernel->forward_backward(out.data(), lab.data(), scale, loss.data(), dout.data(), stream);
  kernel->forward(out.data(), lab.data(), scale, loss_only.data(), stream);
  stream.synchronize();
  return LossResult{loss.to_host()[0], loss_only.to_host()[0], dout.to_host()};
}

float run_count_correct(LossKind kind, int64_t n, int64_t k, const std::vector<float>& output,
                        const std::vector<float>& labels) {
  CpuDevice device(0, 2);
  auto kernel = make_cpu_loss(kind, Shape{n, k}, device);
  Tensor out(device, Shape{n, k});
  out.copy_from_host(output);
  Tensor lab(device, Shape{static_cast<int64_t>(labels.size())});
  lab.copy_from_host(labels);
  Tensor correct(device, Shape{1});
  kernel->count_correct(out.data(), lab.data(), correct.data(), device.default_stream());
  return correct.to_host()[0];
}

std::vector<float> random_values(int64_t count, uint64_t seed, float lo, float hi) {
  Rng rng(seed);
  std::vector<float> v(static_cast<size_t>(count));
  for (float& x : v) x = rng.uniform(lo, hi);
  return v;
}

std::vector<float> class_labels(int64_t n, int64_t k, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = static_cast<float>(rng.below(static_cast<uint64_t>(k)));
  return v;
}

std::vector<float> soft_labels(int64_t n, int64_t k, uint64_t seed) {
  // Label-smoothed one-hot rows: the general targets the one-hot loss accepts.
  std::vector<float> v(static_cast<size_t>(n * k), 0.1f / static_cast<float>(k));
  Rng rng(seed);
  for (int64_t i = 0; i < n; ++i) v[i * k + static_cast<int64_t>(rng.below(k))] += 0.9f;
  return v;
}

// ---- values

TEST(CpuLosses, SoftmaxCrossEntropyMatchesHandValues) {
  // Row 0: logits equal, so the loss is log 2. Row 1: log(e + e^2 + e^3) - 3.
  const std::vector<float> z = {0.0f, 0.0f, 0.0f, 1.0f, 2.0f, 3.0f};
  // K = 3 for both rows; row 0 is [0, 0, 0] → log 3.
  const LossResult r = run_loss(LossKind::kSoftmaxCrossEntropy, 2, 3, z, {1.0f, 2.0f}, 1.0f);
  const double expected =
      std::log(3.0) + (std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)) - 3.0);
  EXPECT_NEAR(r.loss, expected, 1e-6);
  EXPECT_FLOAT_EQ(r.loss, r.loss_only);
  // Gradient of row 0: softmax = 1/3 each, minus one at the label.
  EXPECT_NEAR(r.grad[0], 1.0 / 3.0, 1e-7);
  EXPECT_NEAR(r.grad[1], 1.0 / 3.0 - 1.0, 1e-7);
  EXPECT_NEAR(r.grad[2], 1.0 / 3.0, 1e-7);
}

TEST(CpuLosses, OneHotEqualsIntegerLabelsForHardTargets) {
  const int64_t n = 16;
  const int64_t k = 7;
  const std::vector<float> z = random_values(n * k, 1, -3.0f, 3.0f);
  const std::vector<float> labels = class_labels(n, k, 2);
  std::vector<float> one_hot(static_cast<size_t>(n * k), 0.0f);
  for (int64_t i = 0; i < n; ++i) one_hot[i * k + static_cast<int64_t>(labels[i])] = 1.0f;
  const LossResult a = run_loss(LossKind::kSoftmaxCrossEntropy, n, k, z, labels, 1.0f / n);
  const LossResult b = run_loss(LossKind::kSoftmaxCrossEntropyOneHot, n, k, z, one_hot, 1.0f / n);
  EXPECT_NEAR(a.loss, b.loss, 1e-6);
  for (size_t i = 0; i < a.grad.size(); ++i) EXPECT_NEAR(a.grad[i], b.grad[i], 1e-7) << i;
}

TEST(CpuLosses, BinaryCrossEntropyMatchesHandValues) {
  const LossResult r =
      run_loss(LossKind::kBinaryCrossEntropy, 2, 1, {0.8f, 0.25f}, {1.0f, 0.0f}, 1.0f);
  EXPECT_NEAR(r.loss, -std::log(0.8) - std::log(0.75), 1e-6);
  // dL/dp = (p - y) / (p (1 - p)).
  EXPECT_NEAR(r.grad[0], (0.8 - 1.0) / (0.8 * 0.2), 1e-5);
  EXPECT_NEAR(r.grad[1], 0.25 / (0.25 * 0.75), 1e-5);
}

TEST(CpuLosses, ScaleMultipliesLossAndGradient) {
  const int64_t n = 8;
  const int64_t k = 5;
  const std::vector<float> z = random_values(n * k, 3, -2.0f, 2.0f);
  const std::vector<float> labels = class_labels(n, k, 4);
  const LossResult sum = run_loss(LossKind::kSoftmaxCrossEntropy, n, k, z, labels, 1.0f);
  const LossResult mean = run_loss(LossKind::kSoftmaxCrossEntropy, n, k, z, labels, 0.125f);
  EXPECT_NEAR(mean.loss, sum.loss * 0.125f, 1e-6);
  std::vector<double> zd(z.begin(), z.end());
  EXPECT_NEAR(mean.loss, ref_softmax_ce(zd, labels, n, k) / n, 1e-6);
  for (size_t i = 0; i < sum.grad.size(); ++i)
    EXPECT_NEAR(mean.grad[i], sum.grad[i] * 0.125f, 1e-7);
}

// ---- gradients by central differences of the float64 reference

struct GradCase {
  const char* name;
  LossKind kind;
  int64_t k;
  RefLoss ref;
};

class LossGradient : public testing::TestWithParam<GradCase> {};

TEST_P(LossGradient, MatchesCentralDifferencesOfFloat64Reference) {
  const GradCase& c = GetParam();
  const int64_t n = 6;
  const int64_t k = c.k;
  std::vector<float> output;
  std::vector<float> labels;
  switch (c.kind) {
    case LossKind::kSoftmaxCrossEntropy:
      output = random_values(n * k, 10, -4.0f, 4.0f);
      labels = class_labels(n, k, 11);
      break;
    case LossKind::kSoftmaxCrossEntropyOneHot:
      output = random_values(n * k, 12, -4.0f, 4.0f);
      labels = soft_labels(n, k, 13);
      break;
    case LossKind::kBinaryCrossEntropy:
      // Away from the clip, where the loss is smooth.
      output = random_values(n, 14, 0.05f, 0.95f);
      labels = {0.0f, 1.0f, 1.0f, 0.0f, 1.0f, 0.0f};
      break;
  }
  const float scale = 1.0f / static_cast<float>(n);
  const LossResult r = run_loss(c.kind, n, k, output, labels, scale);

  std::vector<double> z(output.begin(), output.end());
  EXPECT_NEAR(r.loss, c.ref(z, labels, n, k) * scale,
              1e-6 * std::max(1.0, std::abs(static_cast<double>(r.loss))));
  const double h = 1e-6;
  for (size_t j = 0; j < z.size(); ++j) {
    std::vector<double> plus = z;
    std::vector<double> minus = z;
    plus[j] += h;
    minus[j] -= h;
    const double numeric =
        (c.ref(plus, labels, n, k) - c.ref(minus, labels, n, k)) / (2 * h) * scale;
    EXPECT_NEAR(r.grad[j], numeric, 1e-5 + 1e-4 * std::abs(numeric)) << "output element " << j;
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllLosses, LossGradient,
    testing::Values(GradCase{"SoftmaxCE", LossKind::kSoftmaxCrossEntropy, 5, ref_softmax_ce},
                    GradCase{"SoftmaxCEOneHot", LossKind::kSoftmaxCrossEntropyOneHot, 5,
                             ref_softmax_ce_one_hot},
                    GradCase{"BinaryCE", LossKind::kBinaryCrossEntropy, 1, ref_bce}),
    [](const testing::TestParamInfo<GradCase>& info) { return std::string(info.param.name); });

// ---- robustness

TEST(CpuLosses, ExtremeLogitsStayFinite) {
  // Naive exp(100) in float overflows; the stable form must give exact values.
  const std::vector<float> z = {100.0f, -100.0f, 0.0f, 100.0f, -100.0f, 0.0f};
  const LossResult r = run_loss(LossKind::kSoftmaxCrossEntropy, 2, 3, z, {0.0f, 1.0f}, 1.0f);
  ASSERT_TRUE(std::isfinite(r.loss));
  EXPECT_NEAR(r.loss, 200.0, 1e-3);  // sample 0 ≈ 0, sample 1 ≈ 100 - (-100)
  for (float g : r.grad) EXPECT_TRUE(std::isfinite(g));
  EXPECT_NEAR(r.grad[0], 0.0, 1e-6);
  EXPECT_NEAR(r.grad[3], 1.0, 1e-6);
  EXPECT_NEAR(r.grad[4], -1.0, 1e-6);

  std::vector<float> one_hot = {1.0f, 0.0f, 0.0f, 0.0f, 1.0f, 0.0f};
  const LossResult o = run_loss(LossKind::kSoftmaxCrossEntropyOneHot, 2, 3, z, one_hot, 1.0f);
  EXPECT_NEAR(o.loss, 200.0, 1e-3);
  for (float g : o.grad) EXPECT_TRUE(std::isfinite(g));
}

TEST(CpuLosses, BinaryCrossEntropyClipsSaturatedProbabilities) {
  // p = 0 or 1 (a saturated sigmoid): the loss is -log(1e-7) when wrong, ~0 when right.
  const LossResult r = run_loss(LossKind::kBinaryCrossEntropy, 4, 1, {0.0f, 1.0f, 0.0f, 1.0f},
                                {1.0f, 0.0f, 0.0f, 1.0f}, 1.0f);
  ASSERT_TRUE(std::isfinite(r.loss));
  EXPECT_NEAR(r.loss, -2.0 * std::log(1e-7), 1e-3);
  for (float g : r.grad) EXPECT_TRUE(std::isfinite(g));
  // Documented choice: the gradient is taken at the clipped p, not zeroed, so a sigmoid
  // saturated on the wrong side still gets pushed back.
  EXPECT_LT(r.grad[0], 0.0f);
  EXPECT_GT(r.grad[1], 0.0f);
}

TEST(CpuLosses, BadIntegerLabelsNameSampleAndValue) {
  const std::vector<float> z(3 * 4, 0.0f);
  EXPECT_CONTAINS(error_of([&] {
                    run_loss(LossKind::kSoftmaxCrossEntropy, 3, 4, z, {0.0f, 4.0f, 1.0f}, 1.0f);
                  }),
                  "sample 1 is 4");
  EXPECT_CONTAINS(error_of([&] {
                    run_loss(LossKind::kSoftmaxCrossEntropy, 3, 4, z, {0.0f, 1.0f, -1.0f}, 1.0f);
                  }),
                  "sample 2 is -1");
  EXPECT_CONTAINS(error_of([&] {
                    run_loss(LossKind::kSoftmaxCrossEntropy, 3, 4, z, {2.5f, 1.0f, 1.0f}, 1.0f);
                  }),
                  "sample 0 is 2.5");
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_CONTAINS(error_of([&] {
                    run_loss(LossKind::kSoftmaxCrossEntropy, 3, 4, z, {0.0f, nan, 1.0f}, 1.0f);
                  }),
                  "sample 1 is nan");
  // count_correct validates too: a bad label must not be counted silently as a miss.
  EXPECT_CONTAINS(error_of([&] {
                    run_count_correct(LossKind::kSoftmaxCrossEntropy, 3, 4, z, {0.0f, 1.0f, 9.0f});
                  }),
                  "sample 2 is 9");
  EXPECT_CONTAINS(error_of([&] {
                    run_loss(LossKind::kBinaryCrossEntropy, 2, 1, {0.5f, 0.5f}, {1.0f, 2.0f}, 1.0f);
                  }),
                  "sample 1 is 2");
}

TEST(CpuLosses, RejectsOutputShapesItCannotTake) {
  CpuDevice device(0, 1);
  EXPECT_CONTAINS(
      error_of([&] { make_cpu_loss(LossKind::kSoftmaxCrossEntropy, Shape{8}, device); }), "[8]");
  EXPECT_CONTAINS(error_of([&] {
                    make_cpu_loss(LossKind::kBinaryCrossEntropy, Shape{8, 2}, device);
                  }),
                  "[8, 2]");
}

// ---- accuracy

TEST(CpuLosses, CountCorrectUsesArgmaxWithTiesToLowestIndex) {
  // Row 0 ties between classes 0 and 1 → predicts 0. Row 1 predicts 2. Row 2 predicts 1.
  const std::vector<float> z = {1.0f, 1.0f, 0.0f, 0.0f, 0.5f, 3.0f, -1.0f, 2.0f, 1.0f};
  EXPECT_EQ(run_count_correct(LossKind::kSoftmaxCrossEntropy, 3, 3, z, {0.0f, 2.0f, 0.0f}), 2.0f);
  EXPECT_EQ(run_count_correct(LossKind::kSoftmaxCrossEntropy, 3, 3, z, {1.0f, 2.0f, 1.0f}), 2.0f);
  const std::vector<float> one_hot = {0.0f, 1.0f, 0.0f, 0.0f, 0.0f, 1.0f, 0.0f, 1.0f, 0.0f};
  EXPECT_EQ(run_count_correct(LossKind::kSoftmaxCrossEntropyOneHot, 3, 3, z, one_hot), 2.0f);
}

TEST(CpuLosses, CountCorrectForBinaryUsesHalfAsThreshold) {
  const std::vector<float> p = {0.5f, 0.49f, 0.9f, 0.1f};
  EXPECT_EQ(run_count_correct(LossKind::kBinaryCrossEntropy, 4, 1, p, {1.0f, 0.0f, 0.0f, 0.0f}),
            3.0f);
}

// ---- determinism

TEST(CpuLosses, ResultsDoNotDependOnThreadCount) {
  // Large enough that the loops run in parallel.
  const int64_t n = 8192;
  const int64_t k = 10;
  const std::vector<float> z = random_values(n * k, 20, -5.0f, 5.0f);
  const std::vector<float> labels = class_labels(n, k, 21);
  const LossResult one = run_loss(LossKind::kSoftmaxCrossEntropy, n, k, z, labels, 1.0f / n, 1);
  const LossResult four = run_loss(LossKind::kSoftmaxCrossEntropy, n, k, z, labels, 1.0f / n, 4);
  EXPECT_EQ(one.loss, four.loss);  // bitwise
  EXPECT_EQ(one.grad, four.grad);
  std::vector<double> zd(z.begin(), z.end());
  EXPECT_NEAR(one.loss, ref_softmax_ce(zd, labels, n, k) / n, 1e-5);
}

}  // namespace
}  // namespace scalescope
