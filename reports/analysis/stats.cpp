#include "reports/analysis/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/check.h"
#include "core/random.h"

namespace scalescope {

double percentile(std::span<const double> values, double q) {
  SS_CHECK(!values.empty(), "percentile of no values");
  SS_CHECK(q >= 0.0 && q <= 1.0, "percentile {} outside [0, 1]", q);
  // The two order statistics around the position, without sorting: the bootstrap intervals
  // take a median of every resample, thousands per sweep point. The comparison is a lambda of
  // this file's own so that the selection's template functions are instantiated here alone: a
  // build that compiles other sources at -O0 (scripts/asan.sh) would otherwise link their
  // unoptimised copies of std::less's, which made the report tests up to 6x slower there.
  std::vector<double> v(values.begin(), values.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(pos));
  const auto at = v.begin() + static_cast<std::ptrdiff_t>(lo);
  const auto less = [](double a, double b) { return a < b; };
  std::nth_element(v.begin(), at, v.end(), less);
  if (lo + 1 == v.size()) return *at;
  const double above = *std::min_element(at + 1, v.end(), less);  // the next order statistic
  return *at + (pos - static_cast<double>(lo)) * (above - *at);
}

RankedSamples::RankedSamples(std::span<const double> values) : sample_(values.size()) {
  SS_CHECK(values.size() <= UINT32_MAX, "{} samples to rank (at most 2^32 - 1)", values.size());
  std::iota(sample_.begin(), sample_.end(), 0u);
  std::stable_sort(sample_.begin(), sample_.end(),
                   [&](uint32_t a, uint32_t b) { return values[a] < values[b]; });
  sorted_.reserve(values.size());
  for (const uint32_t i : sample_) sorted_.push_back(values[i]);
}

void RankedSamples::draw(size_t samples, Rng& rng, std::vector<uint32_t>& counts) {
  counts.assign(samples, 0);
  for (size_t i = 0; i < samples; ++i) ++counts[rng.below(samples)];
}

double RankedSamples::percentile(std::span<const uint32_t> counts, double q) const {
  SS_CHECK(counts.size() == sorted_.size(), "{} counts for {} ranked samples", counts.size(),
           sorted_.size());
  SS_CHECK(q >= 0.0 && q <= 1.0, "percentile {} outside [0, 1]", q);
  uint64_t total = 0;
  for (const uint32_t c : counts) total += c;
  SS_CHECK(total > 0, "percentile of a resample of no values");
  // As percentile(): the order statistics lo and lo + 1 (from 0) of the resample, interpolated.
  const double pos = q * static_cast<double>(total - 1);
  const auto lo = static_cast<uint64_t>(std::floor(pos));
  size_t j = 0;
  uint64_t below = counts[sample_[0]];  // how many of the resample's values rank up to j
  while (below <= lo) below += counts[sample_[++j]];
  const double at = sorted_[j];
  if (lo + 1 == total) return at;
  while (below <= lo + 1) below += counts[sample_[++j]];
  return at + (pos - static_cast<double>(lo)) * (sorted_[j] - at);
}

double mean(std::span<const double> values) {
  SS_CHECK(!values.empty(), "mean of no values");
  return std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
}

double stddev(std::span<const double> values) {
  SS_CHECK(values.size() >= 2, "sample standard deviation of {} values (needs 2)", values.size());
  const double m = mean(values);
  double sum_sq = 0;
  for (const double v : values) sum_sq += (v - m) * (v - m);
  return std::sqrt(sum_sq / static_cast<double>(values.size() - 1));
}

double coefficient_of_variation(std::span<const double> values) {
  const double m = mean(values);
  SS_CHECK(m != 0.0, "coefficient of variation of values with mean 0");
  return stddev(values) / m;
}

namespace {

void check_bootstrap_args(double confidence, int resamples) {
  SS_CHECK(confidence > 0.0 && confidence < 1.0, "bootstrap confidence {} outside (0, 1)",
           confidence);
  SS_CHECK(resamples >= 1, "bootstrap with {} resamples (needs >= 1)", resamples);
}

// Fills `out` with out.size() values drawn from `from` with replacement.
void resample(std::span<const double> from, std::vector<double>& out, Rng& rng) {
  for (double& v : out) v = from[rng.below(from.size())];
}

// The median of a resample drawn as resample() would draw its values.
double resampled_median(const RankedSamples& ranked, std::vector<uint32_t>& counts, Rng& rng) {
  RankedSamples::draw(ranked.size(), rng, counts);
  return ranked.percentile(counts, 0.5);
}

Interval percentile_interval(double value, std::span<const double> replicates, double confidence) {
  const double tail = (1.0 - confidence) / 2.0;
  return {value, percentile(replicates, tail), percentile(replicates, 1.0 - tail)};
}

}  // namespace

Interval bootstrap_ci(std::span<const double> samples, const Statistic& statistic,
                      double confidence, int resamples, uint64_t seed) {
  SS_CHECK(!samples.empty(), "bootstrap interval of no samples");
  check_bootstrap_args(confidence, resamples);
  Rng rng(seed);
  std::vector<double> draw(samples.size());
  std::vector<double> replicates(static_cast<size_t>(resamples));
  for (double& r : replicates) {
    resample(samples, draw, rng);
    r = statistic(draw);
  }
  return percentile_interval(statistic(samples), replicates, confidence);
}

Interval bootstrap_ratio_ci(std::span<const double> a, std::span<const double> b,
                            const Statistic& statistic, double confidence, int resamples,
                            uint64_t seed) {
  SS_CHECK(!a.empty() && !b.empty(), "bootstrap ratio of {} over {} samples", a.size(), b.size());
  check_bootstrap_args(confidence, resamples);
  const double denominator = statistic(b);
  SS_CHECK(denominator != 0.0, "bootstrap ratio with a denominator statistic of 0");
  // One stream per sample set: a's draws do not depend on b's size, and vice versa.
  Rng rng_a(seed, 0);
  Rng rng_b(seed, 1);
  std::vector<double> draw_a(a.size());
  std::vector<double> draw_b(b.size());
  std::vector<double> replicates(static_cast<size_t>(resamples));
  for (double& r : replicates) {
    resample(a, draw_a, rng_a);
    resample(b, draw_b, rng_b);
    r = statistic(draw_a) / statistic(draw_b);
  }
  return percentile_interval(statistic(a) / denominator, replicates, confidence);
}

Interval bootstrap_median_ci(std::span<const double> samples,
                             const std::function<double(double)>& of_median, double confidence,
                             int resamples, uint64_t seed) {
  SS_CHECK(!samples.empty(), "bootstrap interval of no samples");
  check_bootstrap_args(confidence, resamples);
  const RankedSamples ranked(samples);
  Rng rng(seed);
  std::vector<uint32_t> counts;
  std::vector<double> replicates(static_cast<size_t>(resamples));
  for (double& r : replicates) r = of_median(resampled_median(ranked, counts, rng));
  return percentile_interval(of_median(median(samples)), replicates, confidence);
}

Interval bootstrap_median_ratio_ci(std::span<const double> a, std::span<const double> b,
                                   double confidence, int resamples, uint64_t seed) {
  SS_CHECK(!a.empty() && !b.empty(), "bootstrap ratio of {} over {} samples", a.size(), b.size());
  check_bootstrap_args(confidence, resamples);
  const double denominator = median(b);
  SS_CHECK(denominator != 0.0, "bootstrap ratio with a denominator statistic of 0");
  const RankedSamples ranked_a(a);
  const RankedSamples ranked_b(b);
  Rng rng_a(seed, 0);  // as bootstrap_ratio_ci's streams
  Rng rng_b(seed, 1);
  std::vector<uint32_t> counts;
  std::vector<double> replicates(static_cast<size_t>(resamples));
  for (double& r : replicates) {
    const double numerator = resampled_median(ranked_a, counts, rng_a);
    r = numerator / resampled_median(ranked_b, counts, rng_b);
  }
  return percentile_interval(median(a) / denominator, replicates, confidence);
}

SteadyState detect_steady_state(std::span<const double> step_ms,
                                const SteadyStateOptions& options) {
  SS_CHECK(options.window >= 1, "steady-state window {} (needs >= 1)", options.window);
  SS_CHECK(options.tolerance >= 0.0, "steady-state tolerance {} is negative", options.tolerance);
  SS_CHECK(options.min_steps >= 0, "steady-state min_steps {} is negative", options.min_steps);
  const auto n = static_cast<int64_t>(step_ms.size());
  const int64_t w = options.window;
  std::vector<double> buffer(static_cast<size_t>(w));
  const auto window_median = [&](int64_t start) {
    std::copy_n(step_ms.begin() + start, w, buffer.begin());
    std::sort(buffer.begin(), buffer.end());
    const auto mid = static_cast<size_t>(w / 2);
    return w % 2 == 1 ? buffer[mid] : 0.5 * (buffer[mid - 1] + buffer[mid]);
  };
  for (int64_t s = options.min_steps; s + 2 * w <= n; ++s) {
    const double earlier = window_median(s);
    const double later = window_median(s + w);
    if (std::abs(earlier - later) <= options.tolerance * std::max(earlier, later)) {
      return {true, s};
    }
  }
  return {};
}

MannWhitney mann_whitney_u(std::span<const double> a, std::span<const double> b) {
  SS_CHECK(!a.empty() && !b.empty(), "Mann-Whitney test of {} against {} values", a.size(),
           b.size());
  struct Tagged {
    double value;
    bool from_a;
  };
  std::vector<Tagged> all;
  all.reserve(a.size() + b.size());
  for (const double v : a) all.push_back({v, true});
  for (const double v : b) all.push_back({v, false});
  std::sort(all.begin(), all.end(),
            [](const Tagged& x, const Tagged& y) { return x.value < y.value; });

  // Mid-ranks for ties; sum of t^3 - t over tie groups for the variance correction.
  const double n = static_cast<double>(all.size());
  double rank_sum_a = 0;
  double tie_term = 0;
  for (size_t i = 0; i < all.size();) {
    size_t j = i;
    while (j + 1 < all.size() && all[j + 1].value == all[i].value) ++j;
    const double mid_rank = 0.5 * static_cast<double>(i + j) + 1.0;
    for (size_t k = i; k <= j; ++k) {
      if (all[k].from_a) rank_sum_a += mid_rank;
    }
    const double t = static_cast<double>(j - i + 1);
    tie_term += t * t * t - t;
    i = j + 1;
  }
  const double n1 = static_cast<double>(a.size());
  const double n2 = static_cast<double>(b.size());
  MannWhitney r;
  r.u = rank_sum_a - n1 * (n1 + 1.0) / 2.0;
  r.exact_enough = a.size() >= kMannWhitneyMinSamples && b.size() >= kMannWhitneyMinSamples;
  const double mu = n1 * n2 / 2.0;
  const double variance = n > 1 ? n1 * n2 / 12.0 * ((n + 1.0) - tie_term / (n * (n - 1.0))) : 0.0;
  if (variance <= 0.0) return r;  // every value tied: no evidence either way (z 0, p 1)
  const double distance = std::max(0.0, std::abs(r.u - mu) - 0.5);  // continuity correction
  r.z = std::copysign(distance / std::sqrt(variance), r.u - mu);
  r.p_value = std::min(1.0, std::erfc(std::abs(r.z) / std::sqrt(2.0)));
  return r;
}

}  // namespace scalescope
