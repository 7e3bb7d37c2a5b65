// The regression rule of `scalescope compare`: per metric, a relative threshold and a
// Mann-Whitney U test decide whether a change is a regression, an improvement or noise.
//
// A change must clear three bars (a gate that cries wolf gets switched off):
//   1. size:         |relative change of the medians| > the metric's threshold (default 5%);
//   2. significance: a two-sided Mann-Whitney U test on the per-step samples gives p < alpha
//                    (default 0.05), and the test points the same way as the change (the
//                    current samples tend to be larger for a slowdown, smaller for a speed-up);
//   3. materiality (phases only): the phase's median moved by at least min_phase_change
//                    (default 1%) of the baseline's median step time, so a phase that is a
//                    sliver of the step cannot fail the gate by doubling from 0.1 ms to 0.2 ms.
// A change in the bad direction that clears all three is a regression; in the good direction
// an improvement.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "reports/analysis/stats.h"
#include "reports/phases.h"

namespace scalescope {

// Three figures of the whole step, then one metric per phase of the schema.
inline constexpr size_t kStepMetricCount = 3;
inline constexpr size_t kMetricCount = kStepMetricCount + kPhaseCount;

// What compare reports per point, in table order: throughput, step time, efficiency, then the
// phases in kPhases order. Throughput and efficiency are better higher; every time is better
// lower.
class Metric {
 public:
  static const Metric kThroughput;
  static const Metric kStepTime;
  static const Metric kEfficiency;
  static constexpr Metric of(Phase phase) { return Metric(kStepMetricCount + index_of(phase)); }
  // Every metric, in table order.
  static constexpr std::array<Metric, kMetricCount> all() {
    std::array<Metric, kMetricCount> out{};
    for (size_t i = 0; i < kMetricCount; ++i) out[i] = Metric(i);
    return out;
  }

  constexpr Metric() = default;  // kThroughput
  // Its position in table order (all()[index()] == *this).
  constexpr size_t index() const { return index_; }
  // The phase of a phase metric.
  std::optional<Phase> phase() const;
  constexpr bool operator==(const Metric&) const = default;

 private:
  constexpr explicit Metric(size_t index) : index_(index) {}
  size_t index_ = 0;
};
inline constexpr Metric Metric::kThroughput{0};
inline constexpr Metric Metric::kStepTime{1};
inline constexpr Metric Metric::kEfficiency{2};

// The name the --threshold syntax and the outputs use: "throughput", "step_time",
// "efficiency", then each phase's key ("input", "h2d", ..., "allreduce_exposed", ...).
std::string_view metric_name(Metric metric);
// Every name --threshold accepts, comma-separated: the metrics' and "phases".
std::string metric_names();
// "samples/s", "ms" or "" (efficiency is a fraction, shown as a percentage).
std::string_view metric_unit(Metric metric);
bool higher_is_better(Metric metric);
bool is_phase(Metric metric);

// Relative thresholds per metric (fractions: 0.05 is 5%).
struct Thresholds {
  double fallback = 0.05;                                    // every metric not named below
  std::optional<double> phases;                              // every phase metric not named below
  std::array<std::optional<double>, kMetricCount> metric{};  // by Metric::index()
  double of(Metric metric) const;
};

// The --threshold syntax: comma-separated items, each either a percentage (the default for
// every metric) or NAME=PERCENT, where NAME is a metric name or "phases" (every phase metric).
// A percentage is a non-negative decimal with a % sign: "5%", "2.5%", "0%". Precedence: a
// metric's own item > "phases" > the bare default > 5%. Examples: "5%",
// "throughput=3%,allreduce_exposed=10%", "4%,phases=10%". Throws Error naming the bad item and
// what would be accepted (unknown name, missing %, negative, a name given twice, ...).
Thresholds parse_thresholds(std::string_view text);
// One percentage ("1%") as a fraction; `what` names the flag in the error.
double parse_percent(std::string_view text, std::string_view what);

struct CompareOptions {
  Thresholds thresholds;
  double alpha = 0.05;             // significance level of the Mann-Whitney test
  double min_phase_change = 0.01;  // materiality: fraction of the baseline's median step
};

enum class Change {
  kUnchanged,       // within the threshold
  kNotSignificant,  // beyond the threshold, but the samples do not show it (p >= alpha)
  kNegligible,      // a phase beyond the threshold and significant, but too small to matter
  kImproved,
  kRegressed,
};
std::string_view to_string(Change change);

struct MetricComparison {
  Metric metric = Metric::kThroughput;
  double baseline = 0;  // the medians (efficiency: the reports' own values)
  double current = 0;
  // (current - baseline) / baseline; +infinity when the baseline is 0 and the current is not.
  double relative_change = 0;
  double threshold = 0;
  MannWhitney test;  // of current against baseline samples (z > 0: current slower)
  Change change = Change::kUnchanged;
};

// The rule applied to one metric. `test` compares the current samples with the baseline's,
// both as times (larger is slower); `material` is the third bar (true for non-phases).
MetricComparison compare_metric(Metric metric, double baseline, double current,
                                const MannWhitney& test, bool material,
                                const CompareOptions& options);

}  // namespace scalescope
