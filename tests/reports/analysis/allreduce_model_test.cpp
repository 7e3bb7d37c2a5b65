// The all-reduce model (reports/analysis/scaling.h): nccl-tests' bandwidths, the α-β fit of
// all-reduce times, and the projection of a step beyond the measured device counts.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/error.h"
#include "reports/analysis/scaling.h"

namespace scalescope {
namespace {

TEST(Bandwidth, NcclTestsDefinitions) {
  // 1 GB in 10 ms: algbw 100 GB/s; on 8 devices busbw = 100 * 2 * 7 / 8 = 175 GB/s.
  EXPECT_DOUBLE_EQ(algorithm_bandwidth_gbps(1'000'000'000, 10.0), 100.0);
  EXPECT_DOUBLE_EQ(bus_bandwidth_gbps(1'000'000'000, 10.0, 8), 175.0);
  EXPECT_DOUBLE_EQ(bus_bandwidth_gbps(1'000'000'000, 10.0, 2), 100.0);
  EXPECT_DOUBLE_EQ(bus_bandwidth_gbps(1'000'000'000, 10.0, 1), 0.0);
  EXPECT_THROW(algorithm_bandwidth_gbps(1, 0.0), Error);
  EXPECT_THROW(bus_bandwidth_gbps(1, 1.0, 0), Error);
}

TEST(Bandwidth, BusFactorIsTwiceNMinusOneOverN) {
  EXPECT_DOUBLE_EQ(bus_factor(1), 0.0);  // nothing crosses a link
  EXPECT_DOUBLE_EQ(bus_factor(2), 1.0);
  EXPECT_DOUBLE_EQ(bus_factor(4), 1.5);
  EXPECT_DOUBLE_EQ(bus_factor(8), 1.75);
  EXPECT_DOUBLE_EQ(bus_factor(5), 1.6);
  EXPECT_THROW(bus_factor(0), Error);
}

// alpha 0.02 ms, bus bandwidth 50 GB/s: beta = 1 / (50e9 B/s) = 2e-8 ms per byte.
constexpr double kAlpha = 0.02;
constexpr double kBeta = 2e-8;

std::vector<AllReduceSample> synthetic_samples(double noise_fraction, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> noise(-noise_fraction, noise_fraction);
  std::vector<AllReduceSample> out;
  for (const int n : {2, 4, 8}) {
    for (int64_t bytes = 1 << 16; bytes <= int64_t{1} << 28; bytes *= 4) {
      const double x = static_cast<double>(bytes) * 2.0 * (n - 1) / n;
      out.push_back({bytes, n, (kAlpha + kBeta * x) * (1 + noise(gen))});
    }
  }
  out.push_back({int64_t{1} << 20, 1, 99.0});  // one device: left out of the fit
  return out;
}

TEST(AlphaBeta, RecoversExactParameters) {
  const auto samples = synthetic_samples(0.0, 1);
  const AlphaBetaFit fit = fit_alpha_beta(samples);
  EXPECT_EQ(fit.samples, static_cast<int64_t>(samples.size()) - 1);
  EXPECT_NEAR(fit.alpha_ms, kAlpha, 1e-9);
  EXPECT_NEAR(fit.beta_ms_per_byte, kBeta, 1e-18);
  EXPECT_NEAR(fit.r_squared, 1.0, 1e-12);
  EXPECT_NEAR(fit.bus_bandwidth_gbps, 50.0, 1e-6);
}

TEST(AlphaBeta, RecoversParametersUnderNoise) {
  const AlphaBetaFit fit = fit_alpha_beta(synthetic_samples(0.02, 2));
  EXPECT_NEAR(fit.beta_ms_per_byte, kBeta, 0.02 * kBeta);
  EXPECT_NEAR(fit.bus_bandwidth_gbps, 50.0, 1.0);
  EXPECT_GT(fit.r_squared, 0.99);
  EXPECT_LT(fit.r_squared, 1.0);
  // Noise of 2% on a 5 ms sample dwarfs alpha; the intercept is still the right size.
  EXPECT_NEAR(fit.alpha_ms, kAlpha, 0.1);
}

TEST(AlphaBeta, FitsSmallMessagesWhereAlphaDominates) {
  std::vector<AllReduceSample> samples;
  for (const int64_t bytes : {0, 1024, 4096, 16384}) {
    samples.push_back({bytes, 2, kAlpha + kBeta * static_cast<double>(bytes)});
  }
  const AlphaBetaFit fit = fit_alpha_beta(samples);
  EXPECT_NEAR(fit.alpha_ms, kAlpha, 1e-12);
  EXPECT_NEAR(fit.beta_ms_per_byte, kBeta, 1e-15);
}

// Times that grow faster than their bytes (a bucket of 1 MB: 0.1 ms, of 4 MB: 0.9 ms) put the
// least-squares line's intercept below 0, a negative cost per call; the fit takes the line
// through the origin instead: beta = Σxy / Σx², alpha 0.
TEST(AlphaBeta, AlphaIsNeverNegative) {
  const std::vector<AllReduceSample> samples{
      {1 << 20, 2, 0.1}, {2 << 20, 2, 0.35}, {4 << 20, 2, 0.9}};
  const AlphaBetaFit fit = fit_alpha_beta(samples);
  double sxx = 0, sxy = 0;
  for (const AllReduceSample& s : samples) {
    sxx += static_cast<double>(s.bytes) * static_cast<double>(s.bytes);
    sxy += static_cast<double>(s.bytes) * s.ms;
  }
  EXPECT_EQ(fit.alpha_ms, 0.0);
  EXPECT_DOUBLE_EQ(fit.beta_ms_per_byte, sxy / sxx);
  EXPECT_NEAR(fit.bus_bandwidth_gbps, 1e-6 / (sxy / sxx), 1e-9);
  EXPECT_GT(fit.r_squared, 0.9);
  EXPECT_LT(fit.r_squared, 1.0);
  // Projected from, no bucket's time is below 0.
  const std::vector<int64_t> buckets{1024, 1 << 20};
  EXPECT_GT(projected_allreduce_ms(fit, buckets, 8), 0.0);
}

TEST(AlphaBeta, DegenerateInputThrows) {
  EXPECT_THROW(fit_alpha_beta({}), Error);
  // One size only, however many samples.
  const std::vector<AllReduceSample> one_size{{1024, 2, 1.0}, {1024, 2, 1.1}, {1024, 2, 0.9}};
  EXPECT_THROW(fit_alpha_beta(one_size), Error);
  // Different bytes and N but the same bus bytes: 1200 * 2(1)/2 = 800 * 2(3)/4 = 1200.
  const std::vector<AllReduceSample> same_x{{1200, 2, 1.0}, {800, 4, 1.2}};
  EXPECT_THROW(fit_alpha_beta(same_x), Error);
  // Two sizes, but one of them on a single device.
  const std::vector<AllReduceSample> single{{1024, 2, 1.0}, {4096, 1, 2.0}};
  EXPECT_THROW(fit_alpha_beta(single), Error);
  try {
    fit_alpha_beta(one_size);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("at least 2 distinct sizes"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(fit_alpha_beta(std::vector<AllReduceSample>{{-1, 2, 1.0}, {8, 2, 1.0}}), Error);
  EXPECT_THROW(fit_alpha_beta(std::vector<AllReduceSample>{{1, 2, NAN}, {8, 2, 1.0}}), Error);
}

TEST(AlphaBeta, NoPerByteCostLeavesBandwidthUndetermined) {
  const std::vector<AllReduceSample> flat{{1024, 2, 1.0}, {4096, 2, 1.0}};
  const AlphaBetaFit fit = fit_alpha_beta(flat);
  EXPECT_DOUBLE_EQ(fit.alpha_ms, 1.0);
  EXPECT_DOUBLE_EQ(fit.beta_ms_per_byte, 0.0);
  EXPECT_DOUBLE_EQ(fit.r_squared, 1.0);
  EXPECT_DOUBLE_EQ(fit.bus_bandwidth_gbps, 0.0);
}

TEST(Projection, HandComputedExample) {
  // alpha 0.1 ms, beta 1e-8 ms/byte (100 GB/s bus); buckets of 25 MB and 15 MB.
  AlphaBetaFit fit;
  fit.alpha_ms = 0.1;
  fit.beta_ms_per_byte = 1e-8;
  const std::vector<int64_t> buckets{25'000'000, 15'000'000};
  // N = 8: 2(N-1)/N = 1.75; all-reduce = 2 * 0.1 + 1e-8 * 40e6 * 1.75 = 0.2 + 0.7 = 0.9 ms.
  EXPECT_NEAR(projected_allreduce_ms(fit, buckets, 8), 0.9, 1e-12);
  // N = 2: 0.2 + 0.4 = 0.6 ms. N = 1: no collective.
  EXPECT_NEAR(projected_allreduce_ms(fit, buckets, 2), 0.6, 1e-12);
  EXPECT_DOUBLE_EQ(projected_allreduce_ms(fit, buckets, 1), 0.0);

  // Measured at the largest N: 0.8 ms in total, 0.3 exposed: backward hides 0.5 ms.
  PhaseMedians measured;
  measured[Phase::kAllReduce] = 0.8;
  measured[Phase::kAllReduceExposed] = 0.3;
  const double overlap = overlap_capacity_ms(measured);
  EXPECT_DOUBLE_EQ(overlap, 0.5);
  measured[Phase::kAllReduceExposed] = 0.9;  // timer noise: never a negative capacity
  EXPECT_DOUBLE_EQ(overlap_capacity_ms(measured), 0.0);

  // Step = compute 10 + input 0.5 + max(0, 0.9 - 0.5) = 10.9 at N = 8.
  EXPECT_NEAR(projected_step_ms(fit, buckets, 8, 10.0, 0.5, overlap), 10.9, 1e-12);
  // At N = 2 0.6 ms of all-reduce: 0.1 exposed. With more overlap capacity, none.
  EXPECT_NEAR(projected_step_ms(fit, buckets, 2, 10.0, 0.5, overlap), 10.6, 1e-12);
  EXPECT_NEAR(projected_step_ms(fit, buckets, 2, 10.0, 0.5, 5.0), 10.5, 1e-12);

  // N -> large: 2(N-1)/N -> 2; N = 64: 0.2 + 0.4 * 2 * 63/64 = 0.9875; exposed 0.4875.
  const std::vector<int> counts{1, 8, 64};
  const auto p =
      project_efficiency(fit, buckets, counts, /*one_device_step_ms=*/10.5, 10.0, 0.5, overlap);
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0].devices, 1);
  EXPECT_DOUBLE_EQ(p[0].step_ms, 10.5);
  EXPECT_DOUBLE_EQ(p[0].efficiency, 1.0);
  EXPECT_EQ(p[1].devices, 8);
  EXPECT_NEAR(p[1].allreduce_ms, 0.9, 1e-12);
  EXPECT_NEAR(p[1].exposed_ms, 0.4, 1e-12);
  EXPECT_NEAR(p[1].efficiency, 10.5 / 10.9, 1e-12);
  EXPECT_NEAR(p[2].allreduce_ms, 0.9875, 1e-12);
  EXPECT_NEAR(p[2].step_ms, 10.9875, 1e-12);
  EXPECT_NEAR(p[2].efficiency, 10.5 / 10.9875, 1e-12);
}

TEST(Projection, UsesAFittedModel) {
  // Fit on 2..8 devices, project to 16: the projection matches the generating model.
  const AlphaBetaFit fit = fit_alpha_beta(synthetic_samples(0.0, 3));
  const std::vector<int64_t> buckets{int64_t{1} << 24, int64_t{1} << 22};
  const double expected =
      2 * kAlpha + kBeta * static_cast<double>((1 << 24) + (1 << 22)) * 2.0 * 15.0 / 16.0;
  EXPECT_NEAR(projected_allreduce_ms(fit, buckets, 16), expected, 1e-9);
}

TEST(Projection, RejectsBadInput) {
  const AlphaBetaFit fit;
  const std::vector<int64_t> buckets{100};
  EXPECT_THROW(projected_allreduce_ms(fit, buckets, 0), Error);
  EXPECT_THROW(projected_allreduce_ms(fit, std::vector<int64_t>{-1}, 2), Error);
  EXPECT_THROW(projected_step_ms(fit, buckets, 2, -1.0, 0.0, 0.0), Error);
  const std::vector<int> counts{2};
  EXPECT_THROW(project_efficiency(fit, buckets, counts, 0.0, 1.0, 0.0, 0.0), Error);
  EXPECT_THROW(project_efficiency(fit, buckets, counts, 1.0, 0.0, 0.0, 0.0), Error);
}

}  // namespace
}  // namespace scalescope
