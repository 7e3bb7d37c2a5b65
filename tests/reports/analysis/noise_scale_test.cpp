#include "reports/analysis/noise_scale.h"

#include <gtest/gtest.h>

#include <cmath>
#include <ostream>
#include <vector>

#include "core/error.h"
#include "core/random.h"

namespace scalescope {
namespace {

// Per-sample gradients g = G + e, e ~ N(0, diag(sigma²)): |G|² and tr(Σ) = Σ sigma² are known.
struct Population {
  std::vector<double> mean;
  std::vector<double> sigma;
  double grad_sq() const {
    double s = 0.0;
    for (const double m : mean) s += m * m;
    return s;
  }
  double trace() const {
    double s = 0.0;
    for (const double x : sigma) s += x * x;
    return s;
  }
};

Population make_population(int dims, uint64_t seed) {
  Rng rng(seed);
  Population p;
  for (int i = 0; i < dims; ++i) {
    p.mean.push_back(0.2 * rng.normal());
    p.sigma.push_back(0.5 + static_cast<double>(rng.below(100)) / 100.0);
  }
  return p;
}

// One data-parallel step: each of `replicas` replicas averages `batch` per-sample gradients;
// the step's norms are the mean of their squared norms and the squared norm of their average.
GradSqNorms draw_step(const Population& p, int replicas, int batch, Rng& rng) {
  const size_t dims = p.mean.size();
  std::vector<double> total(dims, 0.0);
  double small = 0.0;
  for (int r = 0; r < replicas; ++r) {
    std::vector<double> g(dims, 0.0);
    for (int s = 0; s < batch; ++s) {
      for (size_t i = 0; i < dims; ++i) g[i] += p.mean[i] + p.sigma[i] * rng.normal();
    }
    double sq = 0.0;
    for (size_t i = 0; i < dims; ++i) {
      g[i] /= batch;
      sq += g[i] * g[i];
      total[i] += g[i];
    }
    small += sq / replicas;
  }
  double big = 0.0;
  for (const double t : total) big += (t / replicas) * (t / replicas);
  return {small, big};
}

struct Case {
  int replicas;
  int batch;
};
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.replicas << " replicas of batch " << c.batch;
}

class NoiseScaleRecovers : public ::testing::TestWithParam<Case> {};

// Over 3000 steps the means of the unbiased estimates are within 6% of |G|² and tr(Σ), and
// the 95% interval of B_noise holds the true tr(Σ)/|G|².
TEST_P(NoiseScaleRecovers, TheTrueGradientNormAndCovarianceTrace) {
  const Case c = GetParam();
  const Population p = make_population(40, 7);
  Rng rng(11, static_cast<uint64_t>(c.replicas * 100 + c.batch));
  std::vector<GradSqNorms> steps;
  for (int i = 0; i < 3000; ++i) steps.push_back(draw_step(p, c.replicas, c.batch, rng));
  const NoiseBatches b{c.batch, static_cast<int64_t>(c.batch) * c.replicas};
  const NoiseScale s = summarize_noise(steps, b);
  EXPECT_NEAR(s.mean.grad_sq, p.grad_sq(), 0.06 * p.grad_sq());
  EXPECT_NEAR(s.mean.trace, p.trace(), 0.06 * p.trace());
  ASSERT_TRUE(s.b_noise.has_value());
  const double truth = p.trace() / p.grad_sq();
  EXPECT_LE(s.b_noise->low, truth);
  EXPECT_GE(s.b_noise->high, truth);
  EXPECT_EQ(s.steps, 3000);
  // The smoothed series ends near the truth too (it weighs about the last 20 steps: 35%).
  const std::vector<NoiseStep> smoothed = smooth_noise(steps, b);
  ASSERT_TRUE(smoothed.back().b_noise.has_value());
  EXPECT_NEAR(*smoothed.back().b_noise, truth, 0.35 * truth);
}

INSTANTIATE_TEST_SUITE_P(BatchesAndReplicas, NoiseScaleRecovers,
                         ::testing::Values(Case{2, 4}, Case{2, 16}, Case{4, 8}, Case{8, 2}));

TEST(NoiseScale, OneBatchSizeHasNoEstimate) {
  EXPECT_FALSE(estimable({64, 64}));
  EXPECT_FALSE(estimable({0, 64}));
  EXPECT_TRUE(estimable({64, 128}));
  EXPECT_THROW(estimate_noise({1.0, 1.0}, {64, 64}), Error);
  const std::vector<GradSqNorms> none;
  EXPECT_THROW(summarize_noise(none, {64, 128}), Error);
}

TEST(NoiseScale, EstimatesSolveTheTwoBatchEquations) {
  // |G|² = 2, tr(Σ) = 64: E|G_B|² is 2 + 64/B at B = 16 and B = 64.
  const NoiseEstimate e = estimate_noise({2.0 + 64.0 / 16, 2.0 + 64.0 / 64}, {16, 64});
  EXPECT_DOUBLE_EQ(e.grad_sq, 2.0);
  EXPECT_DOUBLE_EQ(e.trace, 64.0);
  EXPECT_DOUBLE_EQ(*noise_scale_of(e), 32.0);
  EXPECT_DOUBLE_EQ(steps_over_minimum(32.0, 64), 1.5);
}

TEST(NoiseScale, NegativeStepEstimatesAreSmoothedNotDropped) {
  // A step whose big-batch norm exceeds the small one's has a negative tr(Σ) estimate; one with
  // a small big-batch norm a negative |G|² estimate. Single steps keep them; the ratio comes
  // only from the moving averages, and is absent while the |G|² average is not positive.
  const NoiseBatches b{8, 16};
  const std::vector<GradSqNorms> steps = {{1.0, 0.2}, {1.0, 0.9}, {1.0, 0.9}, {1.0, 0.9}};
  EXPECT_LT(estimate_noise(steps[0], b).grad_sq, 0.0);
  const std::vector<NoiseStep> s = smooth_noise(steps, b, 0.5);
  EXPECT_FALSE(s[0].b_noise.has_value());
  // The zero start is corrected for: the first smoothed value is the first estimate.
  EXPECT_DOUBLE_EQ(s[0].smoothed.grad_sq, s[0].raw.grad_sq);
  ASSERT_TRUE(s[3].b_noise.has_value());
  EXPECT_GT(*s[3].b_noise, 0.0);
  EXPECT_THROW(smooth_noise(steps, b, 0.0), Error);
}

TEST(NoiseScale, AllNoiseHasNoScaleAndAnUnboundedIntervalSaysSo) {
  const NoiseBatches b{8, 16};
  // The mean |G|² estimate is negative: no B_noise.
  const std::vector<GradSqNorms> noise = {{1.0, 0.4}, {1.0, 0.45}, {1.0, 0.5}};
  const NoiseScale none = summarize_noise(noise, b);
  EXPECT_LT(none.mean.grad_sq, 0.0);
  EXPECT_FALSE(none.b_noise.has_value());
  EXPECT_TRUE(to_json(none)["b_noise"].is_null());
  // Positive on average, but resampling the one positive step away leaves none: the interval
  // has no upper bound, written as null.
  const std::vector<GradSqNorms> barely = {{1.0, 0.4}, {1.0, 0.45}, {1.0, 2.0}};
  const NoiseScale s = summarize_noise(barely, b);
  ASSERT_TRUE(s.b_noise.has_value());
  EXPECT_TRUE(std::isinf(s.b_noise->high));
  const nlohmann::json j = to_json(s);
  EXPECT_TRUE(j["b_noise_high"].is_null());
  EXPECT_DOUBLE_EQ(j["b_noise"].get<double>(), s.b_noise->value);
}

}  // namespace
}  // namespace scalescope
