// Regression tracking: compare two sweep reports point by point (`scalescope compare BASELINE
// CURRENT`) and decide, per metric, whether the current run regressed, improved or stayed within
// noise. Pure: two reports in, a Comparison out; the formatters turn it into a terminal table or
// a GitHub pull-request comment (Markdown).
//
// The rule (a gate that cries wolf gets switched off, so a change must clear three bars):
//   1. size:         |relative change of the medians| > the metric's threshold (default 5%);
//   2. significance: a two-sided Mann-Whitney U test on the per-step samples (every measured
//                    step of every repeat, pooled) gives p < alpha (default 0.05), and the test
//                    points the same way as the change (the current samples tend to be larger
//                    for a slowdown, smaller for a speed-up);
//   3. materiality (phases only): the phase's median moved by at least min_phase_change
//                    (default 1%) of the baseline's median step time, so a phase that is a
//                    sliver of the step cannot fail the gate by doubling from 0.1 ms to 0.2 ms.
// A change in the bad direction that clears all three is a regression; in the good direction an
// improvement. Samples per metric:
//   throughput, step_time  the group's step times (throughput = global batch / median step;
//                          the global batch is part of the match, so the test is the same);
//   phases                 per step, the phase of the slowest replica of that step (the replica
//                          that set the step time, as the report's own phase medians do);
//   efficiency             the N-device point's step times. Efficiency also moves when the
//                          one-device point moves; that point has its own row, and a drop in
//                          efficiency that only a faster one-device run explains is not blamed
//                          on the N-device point (its test is then not significant).
// Fewer than kMannWhitneyMinSamples samples on a side make the test weak: it still decides,
// and the outputs say so.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "reports/stats.h"
#include "reports/sweep_report.h"

namespace scalescope {

// What compare reports per point, in table order. Throughput and efficiency are better higher;
// every time is better lower.
enum class Metric {
  kThroughput,
  kStepTime,
  kEfficiency,
  kInput,
  kH2d,
  kForward,
  kBackward,
  kAllreduce,
  kAllreduceExposed,
  kOptimizer,
};
inline constexpr size_t kMetricCount = 10;
inline constexpr std::array<Metric, kMetricCount> kAllMetrics = {
    Metric::kThroughput, Metric::kStepTime,  Metric::kEfficiency,
    Metric::kInput,      Metric::kH2d,       Metric::kForward,
    Metric::kBackward,   Metric::kAllreduce, Metric::kAllreduceExposed,
    Metric::kOptimizer};

// The name the --threshold syntax and the outputs use: "throughput", "step_time",
// "efficiency", "input", "h2d", "forward", "backward", "allreduce", "allreduce_exposed",
// "optimizer".
std::string_view metric_name(Metric metric);
// "samples/s", "ms" or "" (efficiency is a fraction, shown as a percentage).
std::string_view metric_unit(Metric metric);
bool higher_is_better(Metric metric);
bool is_phase(Metric metric);

// Relative thresholds per metric (fractions: 0.05 is 5%).
struct Thresholds {
  double fallback = 0.05;                                    // every metric not named below
  std::optional<double> phases;                              // every phase metric not named below
  std::array<std::optional<double>, kMetricCount> metric{};  // by static_cast<size_t>(Metric)
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

enum class PointStatus {
  kCompared,  // ok in both
  kOnlyInBaseline,
  kOnlyInCurrent,
  kFailedInCurrent,   // ok in the baseline, failed now: counts as a regression
  kFailedInBaseline,  // failed before, ok now
  kFailedInBoth,
};
std::string_view to_string(PointStatus status);

struct PointComparison {
  std::string key;    // SweepPoint::key()
  std::string label;  // SweepPoint::label()
  PointStatus status = PointStatus::kCompared;
  std::string baseline_error;  // why the point failed, where it did
  std::string current_error;
  int64_t baseline_steps = 0;  // measured steps pooled over repeats
  int64_t current_steps = 0;
  std::vector<MetricComparison> metrics;  // kCompared only; metrics that apply, in Metric order

  int regressions() const;
  int improvements() const;
  // Some test had fewer than kMannWhitneyMinSamples samples on a side.
  bool weak() const;
};

// A fact of the environments that differs between the reports, and both values.
struct EnvironmentDifference {
  std::string what;  // "CPU model", "NCCL", ...
  std::string baseline;
  std::string current;
};

// GPU model names, GPU count, CUDA driver and runtime, cuDNN, NCCL, oneDNN, Gloo, build type,
// CPU model, logical and usable cores: what changes the numbers without the code changing.
std::vector<EnvironmentDifference> compare_environments(const Environment& baseline,
                                                        const Environment& current);

struct ReportInfo {
  std::string name;  // how the outputs call the report (its path)
  std::string created;
  std::string tool_version;
  std::string git_commit;
  bool git_dirty = false;
  bool complete = true;
};

struct Comparison {
  CompareOptions options;
  ReportInfo baseline;
  ReportInfo current;
  std::vector<EnvironmentDifference> environment;
  // Baseline points in order, then those only in the current report.
  std::vector<PointComparison> points;

  int regressions() const;  // metrics that regressed, over all points
  int improvements() const;
  int newly_failed() const;  // points ok in the baseline and failed now
  int compared() const;      // points ok in both
  bool weak() const;
  // The gate: a metric regressed or a point that ran before fails now.
  bool regressed() const;
};

// REQUIRES: both reports analyzed (read_sweep_report and analyze() leave them so); names come
// from the caller. Throws Error when a report holds two points with the same key (the match
// would be ambiguous).
Comparison compare_reports(const SweepReport& baseline, const SweepReport& current,
                           const CompareOptions& options, const std::string& baseline_name,
                           const std::string& current_name);

// A terminal table per compared point, the points not compared, and a verdict line last (what
// a CI log shows at its end). Environment differences come first.
std::string format_comparison_table(const Comparison& comparison);
// A pull-request comment: the verdict first, environment differences in a warning, the
// metrics that regressed or improved, the points not compared, then every metric in a
// collapsed section and the rule used.
std::string format_comparison_markdown(const Comparison& comparison);

}  // namespace scalescope
