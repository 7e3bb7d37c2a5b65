// Regression tracking: compare two sweep reports point by point (`scalescope compare BASELINE
// CURRENT`) and decide, per metric, whether the current run regressed, improved or stayed within
// noise (reports/compare/rule.h), and which facts of the environments differ
// (reports/compare/environment_guard.h). Pure: two reports in, a Comparison out;
// reports/compare/format.h turns it into a terminal table or a pull-request comment.
//
// Samples per metric:
//   throughput, step_time  the group's step times, every measured step of every repeat, pooled
//                          (throughput = global batch / median step; the global batch is part
//                          of the match, so the test is the same);
//   phases                 per step, the phase of the slowest replica of that step (the replica
//                          that set the step time, as the report's own phase medians do);
//   efficiency             the N-device point's step times. Efficiency also moves when the
//                          one-device point moves; that point has its own row, and a drop in
//                          efficiency that only a faster one-device run explains is not blamed
//                          on the N-device point (its test is then not significant).
// Fewer than kMannWhitneyMinSamples samples on a side make the test weak: it still decides,
// and the outputs say so.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "reports/compare/environment_guard.h"
#include "reports/compare/rule.h"
#include "reports/sweep_report.h"

namespace scalescope {

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
  // No point ran in both reports and none that ran before fails: the gate has nothing to
  // vouch for (an empty or killed current sweep, grids with no point in common).
  bool nothing_compared() const { return compared() == 0 && newly_failed() == 0; }
};

// REQUIRES: both reports analyzed (read_sweep_report and analyze() leave them so); names come
// from the caller. Throws Error when a report holds two points with the same key (the match
// would be ambiguous).
Comparison compare_reports(const SweepReport& baseline, const SweepReport& current,
                           const CompareOptions& options, const std::string& baseline_name,
                           const std::string& current_name);

}  // namespace scalescope
