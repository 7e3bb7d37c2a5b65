// Statistics over samples (step times and the like): order statistics, spread, bootstrap
// confidence intervals, warm-up detection and a rank test for regression gates.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace scalescope {

// Linear interpolation between closest ranks (NumPy's default). q in [0, 1].
// REQUIRES: values non-empty.
double percentile(std::span<const double> values, double q);
inline double median(std::span<const double> values) {
  return percentile(values, 0.5);
}
double mean(std::span<const double> values);
// Sample standard deviation (divides by n - 1). REQUIRES: at least 2 values.
double stddev(std::span<const double> values);
// stddev / mean: the spread of step times relative to their size.
// REQUIRES: at least 2 values and a non-zero mean.
double coefficient_of_variation(std::span<const double> values);

class Rng;

// Samples sorted once, so that the percentiles of many resamples of them cost no sorting: a
// resample is a count per sample (how many times the draw took it), and its order statistics
// are found by walking the samples in ascending order summing those counts. The bootstrap
// intervals of a report take thousands of medians per sweep point this way.
class RankedSamples {
 public:
  explicit RankedSamples(std::span<const double> values);
  size_t size() const { return sorted_.size(); }
  // percentile() of the multiset holding values[i] counts[i] times, to the bit.
  // REQUIRES: counts.size() == size(), a non-zero sum of counts.
  double percentile(std::span<const uint32_t> counts, double q) const;
  // A resample of `samples` values drawn with replacement, as counts: in the order of the
  // values a draw of them would take, so the same generator gives the same resample.
  static void draw(size_t samples, Rng& rng, std::vector<uint32_t>& counts);

 private:
  std::vector<double> sorted_;    // the values, ascending
  std::vector<uint32_t> sample_;  // the index in `values` of each sorted value
};

// A point estimate with a confidence interval around it.
struct Interval {
  double value = 0;  // the statistic on the original samples
  double low = 0;
  double high = 0;
};

using Statistic = std::function<double(std::span<const double>)>;

// Percentile bootstrap: `resamples` times, draw samples.size() values with replacement and
// evaluate `statistic`; the interval is the (1 - confidence)/2 and (1 + confidence)/2
// percentiles of those values. The same seed gives the same interval on every machine
// (core/random.h). The percentile method slightly under-covers for small n (about 94% for
// the mean of 50 normal values at 95%); good enough to tell noise from a change.
// REQUIRES: samples non-empty, 0 < confidence < 1, resamples >= 1.
Interval bootstrap_ci(std::span<const double> samples, const Statistic& statistic,
                      double confidence = 0.95, int resamples = 2000, uint64_t seed = 1);

// Interval of statistic(a) / statistic(b) for independent sample sets, resampling a and b
// independently (speedup = throughput at N devices / throughput at 1 device).
// REQUIRES: a and b non-empty, statistic(b) != 0, and as bootstrap_ci.
Interval bootstrap_ratio_ci(std::span<const double> a, std::span<const double> b,
                            const Statistic& statistic, double confidence = 0.95,
                            int resamples = 2000, uint64_t seed = 1);

// bootstrap_ci of of_median(median(x)) and bootstrap_ratio_ci of the median, the same intervals
// to the bit (the same draws), from samples ranked once instead of a median sorted per draw.
// REQUIRES: as bootstrap_ci and bootstrap_ratio_ci.
Interval bootstrap_median_ci(std::span<const double> samples,
                             const std::function<double(double)>& of_median,
                             double confidence = 0.95, int resamples = 2000, uint64_t seed = 1);
Interval bootstrap_median_ratio_ci(std::span<const double> a, std::span<const double> b,
                                   double confidence = 0.95, int resamples = 2000,
                                   uint64_t seed = 1);

// Warm-up detection. Rule: two consecutive windows of `window` steps, the earlier starting
// at step s and the later at s + window, agree when their medians differ by at most
// `tolerance` relative to the larger of the two: |m1 - m2| <= tolerance * max(m1, m2).
// The run has settled at the first s >= min_steps where they agree, and steps from s on are
// steady (first_steady = s). The first min_steps steps are always warm-up whatever their
// times (allocation, autotuning, first touches), so a flat run settles at min_steps.
// Medians make one slow step (a page fault, a log flush) unable to hide or fake settling.
// Deciding needs at least min_steps + 2 * window steps. Cost is O(n * window log window):
// cheap to call after every warm-up step; the caller bounds the warm-up itself.
struct SteadyStateOptions {
  int window = 5;
  double tolerance = 0.05;
  int64_t min_steps = 3;
};
struct SteadyState {
  bool settled = false;
  int64_t first_steady = -1;  // -1 unless settled
};
// REQUIRES: window >= 1, tolerance >= 0, min_steps >= 0.
SteadyState detect_steady_state(std::span<const double> step_ms,
                                const SteadyStateOptions& options = {});

// Two-sided Mann-Whitney U test, normal approximation with tie and continuity corrections
// (as SciPy's mannwhitneyu(method="asymptotic")). u is the statistic of `a` (the number of
// pairs where a's value is larger, ties counting one half); z > 0 when a tends to be larger.
struct MannWhitney {
  double u = 0;
  double z = 0;
  double p_value = 1;
  bool exact_enough = false;  // false when either sample has < 8 values: the test is weak
};
inline constexpr size_t kMannWhitneyMinSamples = 8;
// REQUIRES: a and b non-empty.
MannWhitney mann_whitney_u(std::span<const double> a, std::span<const double> b);

}  // namespace scalescope
