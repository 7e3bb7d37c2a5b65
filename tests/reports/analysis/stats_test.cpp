#include "reports/analysis/stats.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "core/error.h"

namespace scalescope {
namespace {

std::vector<double> normal_sample(size_t n, double mu, double sigma, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> dist(mu, sigma);
  std::vector<double> v(n);
  for (double& x : v) x = dist(gen);
  return v;
}

double sample_mean(std::span<const double> v) {
  return mean(v);
}

TEST(Stats, StddevIsTheSampleOne) {
  const std::vector<double> v{2, 4, 4, 4, 5, 5, 7, 9};  // population sd 2, sum sq dev 32
  EXPECT_DOUBLE_EQ(stddev(v), std::sqrt(32.0 / 7.0));
  EXPECT_DOUBLE_EQ(coefficient_of_variation(v), std::sqrt(32.0 / 7.0) / 5.0);
  EXPECT_DOUBLE_EQ(stddev(std::vector<double>{3, 3}), 0.0);
  EXPECT_THROW(stddev(std::vector<double>{1}), Error);
  EXPECT_THROW(coefficient_of_variation(std::vector<double>{-1, 1}), Error);
}

// NumPy's default: linear between the closest ranks of the sorted values.
TEST(Stats, PercentileInterpolatesBetweenTheClosestRanksAsNumPyDoes) {
  EXPECT_DOUBLE_EQ(percentile(std::vector<double>{4, 1, 3, 2}, 0.5), 2.5);
  EXPECT_DOUBLE_EQ(percentile(std::vector<double>{3, 1, 2}, 0.25), 1.5);
  EXPECT_DOUBLE_EQ(percentile(std::vector<double>{3, 1, 2}, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(percentile(std::vector<double>{3, 1, 2}, 1.0), 3.0);
  EXPECT_DOUBLE_EQ(percentile(std::vector<double>{7}, 0.7), 7.0);
  EXPECT_DOUBLE_EQ(percentile(std::vector<double>{10, 0, 20, 30, 40}, 0.9), 36.0);
  EXPECT_THROW(percentile(std::vector<double>{}, 0.5), Error);
  EXPECT_THROW(percentile(std::vector<double>{1}, 1.5), Error);
  // Against the sorted values, on samples with and without repeats, at every size to 40.
  for (size_t n = 1; n <= 40; ++n) {
    for (const bool repeats : {false, true}) {
      std::vector<double> v = normal_sample(n, 0.0, 1.0, n);
      if (repeats) {
        for (double& x : v) x = std::round(x * 2.0);
      }
      std::vector<double> sorted = v;
      std::sort(sorted.begin(), sorted.end());
      for (const double q : {0.0, 0.025, 0.3, 0.5, 0.77, 0.975, 1.0}) {
        const double pos = q * static_cast<double>(n - 1);
        const auto lo = static_cast<size_t>(std::floor(pos));
        const size_t hi = std::min(lo + 1, n - 1);
        const double want =
            sorted[lo] + (pos - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
        EXPECT_DOUBLE_EQ(percentile(v, q), want) << "n " << n << ", q " << q;
      }
    }
  }
}

// A resample given as counts has the percentiles of the values it stands for, to the bit.
TEST(Stats, RankedSamplesTakeTheResamplesPercentileFromItsCounts) {
  std::mt19937_64 gen(7);
  for (size_t n = 1; n <= 40; ++n) {
    for (const bool repeats : {false, true}) {
      std::vector<double> v = normal_sample(n, 5.0, 2.0, n + 100);
      if (repeats) {
        for (double& x : v) x = std::round(x);
      }
      const RankedSamples ranked(v);
      for (int draw = 0; draw < 5; ++draw) {
        std::vector<uint32_t> counts(n, 0);
        std::vector<double> values;
        const size_t total = 1 + gen() % (2 * n);  // fewer or more values than samples
        for (size_t i = 0; i < total; ++i) {
          const size_t at = gen() % n;
          ++counts[at];
          values.push_back(v[at]);
        }
        for (const double q : {0.0, 0.025, 0.3, 0.5, 0.77, 0.975, 1.0}) {
          EXPECT_EQ(ranked.percentile(counts, q), percentile(values, q))
              << "n " << n << ", " << total << " values, q " << q;
        }
      }
    }
  }
  const RankedSamples ranked(std::vector<double>{1, 2});
  EXPECT_THROW(ranked.percentile(std::vector<uint32_t>{0, 0}, 0.5), Error);
  EXPECT_THROW(ranked.percentile(std::vector<uint32_t>{1}, 0.5), Error);
  EXPECT_THROW(ranked.percentile(std::vector<uint32_t>{1, 1}, -0.1), Error);
}

// The ranked medians draw what the written-out statistic draws: the same intervals, bit for bit.
TEST(Bootstrap, MedianIntervalsAreTheWrittenOutStatisticsToTheBit) {
  for (const size_t n : {size_t{1}, size_t{2}, size_t{7}, size_t{300}}) {
    std::vector<double> a = normal_sample(n, 20.0, 3.0, n);
    const std::vector<double> b = normal_sample(n + 3, 30.0, 4.0, n + 1);
    for (double& x : a) x = std::round(x * 4.0) / 4.0;  // ties too
    const auto per_second = [](double median_ms) { return 64e3 / median_ms; };
    const Interval got = bootstrap_median_ci(a, per_second, 0.9, 500, 3);
    const Interval want = bootstrap_ci(
        a, [&](std::span<const double> x) { return per_second(median(x)); }, 0.9, 500, 3);
    EXPECT_EQ(got.value, want.value);
    EXPECT_EQ(got.low, want.low) << n;
    EXPECT_EQ(got.high, want.high) << n;
    const Interval ratio = bootstrap_median_ratio_ci(a, b);
    const Interval written =
        bootstrap_ratio_ci(a, b, [](std::span<const double> x) { return median(x); });
    EXPECT_EQ(ratio.value, written.value);
    EXPECT_EQ(ratio.low, written.low) << n;
    EXPECT_EQ(ratio.high, written.high) << n;
  }
  EXPECT_THROW(bootstrap_median_ratio_ci(std::vector<double>{1}, std::vector<double>{0}), Error);
  EXPECT_THROW(bootstrap_median_ci(std::vector<double>{}, [](double m) { return m; }), Error);
}

TEST(Bootstrap, MeanIntervalCoversTheTruthWithTheTextbookWidth) {
  const double mu = 10.0, sigma = 3.0;
  const size_t n = 200;
  const auto v = normal_sample(n, mu, sigma, 42);
  const Interval ci = bootstrap_ci(v, sample_mean);
  EXPECT_DOUBLE_EQ(ci.value, mean(v));
  EXPECT_LT(ci.low, ci.value);
  EXPECT_GT(ci.high, ci.value);
  EXPECT_LE(ci.low, mu);
  EXPECT_GE(ci.high, mu);
  const double textbook = 2 * 1.96 * sigma / std::sqrt(static_cast<double>(n));
  EXPECT_NEAR(ci.high - ci.low, textbook, 0.2 * textbook);
}

TEST(Bootstrap, IsDeterministicForASeedAndVariesAcrossSeeds) {
  const auto v = normal_sample(30, 5.0, 1.0, 7);
  const Interval a = bootstrap_ci(v, sample_mean, 0.9, 500, 3);
  const Interval b = bootstrap_ci(v, sample_mean, 0.9, 500, 3);
  const Interval c = bootstrap_ci(v, sample_mean, 0.9, 500, 4);
  EXPECT_EQ(a.low, b.low);
  EXPECT_EQ(a.high, b.high);
  EXPECT_NE(a.low, c.low);
  // A wider confidence gives a wider interval from the same replicates.
  const Interval wide = bootstrap_ci(v, sample_mean, 0.99, 500, 3);
  EXPECT_LT(wide.low, a.low);
  EXPECT_GT(wide.high, a.high);
}

TEST(Bootstrap, MeanIntervalCoversAbout95Percent) {
  const double mu = 10.0, sigma = 2.0;
  int covered = 0;
  const int trials = 200;
  for (int t = 0; t < trials; ++t) {
    const auto v = normal_sample(50, mu, sigma, 1000 + static_cast<uint64_t>(t));
    const Interval ci = bootstrap_ci(v, sample_mean, 0.95, 1000, static_cast<uint64_t>(t) + 1);
    if (ci.low <= mu && mu <= ci.high) ++covered;
  }
  const double coverage = static_cast<double>(covered) / trials;
  EXPECT_GE(coverage, 0.90);
  EXPECT_LE(coverage, 0.99);
}

TEST(Bootstrap, MedianStatisticWorks) {
  const std::vector<double> v{1, 2, 3, 4, 100};
  const Interval ci = bootstrap_ci(v, [](std::span<const double> s) { return median(s); });
  EXPECT_DOUBLE_EQ(ci.value, 3.0);
  EXPECT_GE(ci.low, 1.0);
  EXPECT_LE(ci.high, 100.0);
}

TEST(Bootstrap, RejectsBadArguments) {
  const std::vector<double> v{1, 2, 3};
  EXPECT_THROW(bootstrap_ci(std::vector<double>{}, sample_mean), Error);
  EXPECT_THROW(bootstrap_ci(v, sample_mean, 1.0), Error);
  EXPECT_THROW(bootstrap_ci(v, sample_mean, 0.0), Error);
  EXPECT_THROW(bootstrap_ci(v, sample_mean, 0.95, 0), Error);
  EXPECT_THROW(bootstrap_ratio_ci(v, std::vector<double>{}, sample_mean), Error);
  EXPECT_THROW(bootstrap_ratio_ci(v, std::vector<double>{-1, 1}, sample_mean), Error);
}

TEST(BootstrapRatio, SpeedupIntervalHasTheDeltaMethodWidth) {
  // Throughput at N ~ N(200, 10), at 1 ~ N(100, 5): speedup 2 with relative sd 5% each.
  const size_t n = 40;
  const auto a = normal_sample(n, 200.0, 10.0, 11);
  const auto b = normal_sample(n, 100.0, 5.0, 12);
  const Interval ci = bootstrap_ratio_ci(a, b, sample_mean);
  EXPECT_DOUBLE_EQ(ci.value, mean(a) / mean(b));
  EXPECT_LE(ci.low, 2.0);
  EXPECT_GE(ci.high, 2.0);
  // Delta method: sd(ratio) = ratio * sqrt(cv_a^2 / n_a + cv_b^2 / n_b). With the true
  // parameters (cv 5% each) the width is 0.088; with this sample's own (cv 4.2% and 4.4%:
  // the sample happens to be narrow) 0.0745, which the bootstrap should reproduce closely.
  const double true_width = 2 * 1.96 * 2.0 * std::sqrt(2 * 0.05 * 0.05 / n);
  EXPECT_NEAR(ci.high - ci.low, true_width, 0.2 * true_width);
  const double cv_a = coefficient_of_variation(a), cv_b = coefficient_of_variation(b);
  const double sample_width = 2 * 1.96 * ci.value * std::sqrt((cv_a * cv_a + cv_b * cv_b) / n);
  EXPECT_NEAR(ci.high - ci.low, sample_width, 0.05 * sample_width);
  const Interval again = bootstrap_ratio_ci(a, b, sample_mean);
  EXPECT_EQ(ci.low, again.low);
  EXPECT_EQ(ci.high, again.high);
}

TEST(BootstrapRatio, CoversAbout95Percent) {
  int covered = 0;
  const int trials = 200;
  for (int t = 0; t < trials; ++t) {
    const auto seed = static_cast<uint64_t>(t);
    const auto a = normal_sample(30, 300.0, 15.0, 5000 + 2 * seed);
    const auto b = normal_sample(30, 100.0, 5.0, 5001 + 2 * seed);
    const Interval ci = bootstrap_ratio_ci(a, b, sample_mean, 0.95, 1000, seed + 1);
    if (ci.low <= 3.0 && 3.0 <= ci.high) ++covered;
  }
  const double coverage = static_cast<double>(covered) / trials;
  EXPECT_GE(coverage, 0.90);
  EXPECT_LE(coverage, 0.99);
}

TEST(SteadyState, DecayingWarmupSettlesWhereTheTransientIsGone) {
  // 100 exp(-i/3) + 25 with +-0.2% noise. The medians of windows [s, s+5) and [s+5, s+10)
  // are ~f(s+2) and ~f(s+7); their relative difference is 5.5% at s = 10 and 4.1% at s = 11,
  // so with the default 5% tolerance the run settles at 11 (noise moves it by < 0.4%).
  std::mt19937_64 gen(3);
  std::uniform_real_distribution<double> noise(-0.002, 0.002);
  std::vector<double> steps;
  for (int i = 0; i < 60; ++i) {
    steps.push_back((100.0 * std::exp(-i / 3.0) + 25.0) * (1 + noise(gen)));
  }
  const SteadyState s = detect_steady_state(steps);
  ASSERT_TRUE(s.settled);
  EXPECT_EQ(s.first_steady, 11);
  // Not enough steps yet to see two agreeing windows: not settled.
  const SteadyState early = detect_steady_state(std::span(steps).first(20));
  EXPECT_FALSE(early.settled);
  EXPECT_EQ(early.first_steady, -1);
  // The answer is there as soon as the later window is complete, and stays as steps arrive
  // (the sweep calls this after every warm-up step).
  EXPECT_EQ(detect_steady_state(std::span(steps).first(21)).first_steady, 11);
  EXPECT_EQ(detect_steady_state(std::span(steps).first(40)).first_steady, 11);
  // A tighter tolerance waits longer.
  EXPECT_GT(
      detect_steady_state(steps, {.window = 5, .tolerance = 0.01, .min_steps = 3}).first_steady,
      11);
}

TEST(SteadyState, FlatRunSettlesAtMinSteps) {
  std::vector<double> flat(13, 10.0);
  const SteadyState s = detect_steady_state(flat);
  ASSERT_TRUE(s.settled);
  EXPECT_EQ(s.first_steady, 3);
  // min_steps + 2 windows is the least that can decide.
  EXPECT_FALSE(detect_steady_state(std::span(flat).first(12)).settled);
  const SteadyState zero =
      detect_steady_state(flat, {.window = 4, .tolerance = 0.0, .min_steps = 0});
  EXPECT_TRUE(zero.settled);
  EXPECT_EQ(zero.first_steady, 0);
}

TEST(SteadyState, OneSlowStepDoesNotPreventSettling) {
  std::vector<double> steps(20, 10.0);
  steps[5] = 50.0;  // a page fault inside the first window
  const SteadyState s = detect_steady_state(steps);
  ASSERT_TRUE(s.settled);
  EXPECT_EQ(s.first_steady, 3);
}

TEST(SteadyState, DriftingRunNeverSettles) {
  // 2% slower every step: windows 5 steps apart differ by ~10%.
  std::vector<double> steps;
  for (int i = 0; i < 100; ++i) steps.push_back(10.0 * std::pow(1.02, i));
  EXPECT_FALSE(detect_steady_state(steps).settled);
  // A looser tolerance accepts it.
  EXPECT_TRUE(detect_steady_state(steps, {.window = 5, .tolerance = 0.11, .min_steps = 3}).settled);
}

TEST(SteadyState, RejectsBadOptions) {
  const std::vector<double> v(20, 1.0);
  EXPECT_THROW(detect_steady_state(v, {.window = 0}), Error);
  EXPECT_THROW(detect_steady_state(v, {.window = 5, .tolerance = -0.1}), Error);
  EXPECT_THROW(detect_steady_state(v, {.window = 5, .tolerance = 0.05, .min_steps = -1}), Error);
}

TEST(MannWhitney, MatchesScipyAsymptoticExample) {
  // SciPy's mannwhitneyu documentation example, method="asymptotic": U = 17, p = 0.11134688...
  const std::vector<double> males{19, 22, 16, 29, 24};
  const std::vector<double> females{20, 11, 17, 12};
  const MannWhitney r = mann_whitney_u(males, females);
  EXPECT_DOUBLE_EQ(r.u, 17.0);
  EXPECT_NEAR(r.z, 6.5 / std::sqrt(50.0 / 3.0), 1e-12);
  EXPECT_NEAR(r.p_value, 0.11134688653314041, 1e-9);
  EXPECT_FALSE(r.exact_enough);
  // Swapping the samples mirrors U and z and keeps p.
  const MannWhitney s = mann_whitney_u(females, males);
  EXPECT_DOUBLE_EQ(s.u, 20.0 - 17.0);
  EXPECT_DOUBLE_EQ(s.z, -r.z);
  EXPECT_DOUBLE_EQ(s.p_value, r.p_value);
}

TEST(MannWhitney, CorrectsForTies) {
  // By hand: ranks 1 | 2.5 2.5 | 5.5 x4 | 9 x3 | 11.5 x2 | 13; a's rank sum 31.5, U = 3.5;
  // tie term 6 + 60 + 24 + 6 = 96; var = 42/12 (14 - 96/156); z = (21 - 3.5 - 0.5) / sd.
  const std::vector<double> a{1, 2, 2, 3, 3, 3, 4};
  const std::vector<double> b{3, 4, 4, 5, 5, 6};
  const MannWhitney r = mann_whitney_u(a, b);
  EXPECT_DOUBLE_EQ(r.u, 3.5);
  const double sd = std::sqrt(42.0 / 12.0 * (14.0 - 96.0 / 156.0));
  EXPECT_NEAR(r.z, -17.0 / sd, 1e-12);
  EXPECT_NEAR(r.p_value, 0.012999854364387314, 1e-9);
}

TEST(MannWhitney, SeparatedSamplesAreSignificant) {
  std::vector<double> a, b;
  for (int i = 0; i < 20; ++i) {
    a.push_back(10.0 + 0.1 * i);
    b.push_back(20.0 + 0.1 * i);
  }
  const MannWhitney r = mann_whitney_u(a, b);
  EXPECT_DOUBLE_EQ(r.u, 0.0);
  EXPECT_LT(r.z, 0.0);
  EXPECT_LT(r.p_value, 1e-3);
  EXPECT_TRUE(r.exact_enough);
}

TEST(MannWhitney, SameDistributionIsMostlyNotSignificant) {
  int significant = 0;
  const int trials = 200;
  for (int t = 0; t < trials; ++t) {
    const auto a = normal_sample(20, 50.0, 5.0, 9000 + 2 * static_cast<uint64_t>(t));
    const auto b = normal_sample(20, 50.0, 5.0, 9001 + 2 * static_cast<uint64_t>(t));
    if (mann_whitney_u(a, b).p_value <= 0.05) ++significant;
  }
  // About 5% false positives expected.
  EXPECT_LE(significant, 20);
}

TEST(MannWhitney, EdgeCases) {
  // All values tied: no evidence either way.
  const MannWhitney tied = mann_whitney_u(std::vector<double>(8, 1.0), std::vector<double>(8, 1.0));
  EXPECT_DOUBLE_EQ(tied.u, 32.0);
  EXPECT_DOUBLE_EQ(tied.z, 0.0);
  EXPECT_DOUBLE_EQ(tied.p_value, 1.0);
  EXPECT_TRUE(tied.exact_enough);
  EXPECT_FALSE(
      mann_whitney_u(std::vector<double>(8, 1.0), std::vector<double>(7, 1.0)).exact_enough);
  // U within 1/2 of its mean: the continuity correction leaves z at 0 and p at 1.
  const MannWhitney even = mann_whitney_u(std::vector<double>{1, 4}, std::vector<double>{2, 3});
  EXPECT_DOUBLE_EQ(even.u, 2.0);
  EXPECT_DOUBLE_EQ(even.p_value, 1.0);
  EXPECT_THROW(mann_whitney_u(std::vector<double>{}, std::vector<double>{1}), Error);
}

}  // namespace
}  // namespace scalescope
