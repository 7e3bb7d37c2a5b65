// The report of `scalescope analyze` (`-o report.json`): every rank's step breakdowns as read
// from its traces (the record) and, derived from them, the job as a sweep point analysed as
// scalescope's sweeps are (phases, verdict, and against a one-rank baseline speedup, efficiency
// and the efficiency-loss split), plus what only traces show across ranks (the slowest rank and
// the skew). Like a sweep report, the derived part is recomputed whenever a report is read and
// written next to the record for readers that do not run scalescope. Its format is
// reports/schema/analysis-report.schema.json.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "reports/sweep_report.h"
#include "reports/trace_analysis/job.h"

namespace scalescope::traces {

inline constexpr const char* kAnalysisSchema = "scalescope-analysis";
inline constexpr const char* kAnalysisSchemaVersion = "1.1";

// Across the ranks of a job, over the steps they share.
struct RankSpread {
  std::vector<StepBreakdown> medians;  // per rank (ascending), each field's median; step 0
  int slowest_rank = 0;                // the largest median compute (the rank others wait for)
  // The slowest rank's median compute minus the median of the ranks' (0 on one rank), and as a
  // ratio of the latter (1 on one rank): the verdict's straggler rule reads the same ratio.
  double compute_skew_ms = 0.0;
  double compute_skew_ratio = 1.0;
  // Per step the longest rank's step time minus the shortest's: median over the steps.
  double step_spread_ms = 0.0;
};

struct AnalysisReport {
  std::string tool_version;
  std::string created;       // UTC ISO-8601
  std::string name = "job";  // the job's name; compare matches two reports' jobs by it
  int64_t batch = 0;         // per rank, when given (throughput); 0 unknown
  std::string step_range;    // --step-range; "" for the default step ranges
  JobSteps job;
  std::optional<JobSteps> baseline;  // one rank of the same job

  // Derived by analyze_report.
  SweepReport sweep;  // points: the baseline (when given), then the job; analysed
  RankSpread spread;  // of the job

  const SweepPoint& job_point() const { return sweep.points.back(); }
  const SweepPoint* baseline_point() const { return baseline ? &sweep.points.front() : nullptr; }
};

// Fills sweep and spread from the record. Throws Error when the baseline has more than one
// rank.
void analyze_report(AnalysisReport& report);

nlohmann::json to_json(const AnalysisReport& report);
// Strict (a missing or mistyped key is an Error naming it and `what`); analysed.
AnalysisReport analysis_report_from_json(const nlohmann::json& j, const std::string& what);
// Atomic; throws Error naming the path.
void write_analysis_report(const std::string& path, const AnalysisReport& report);
AnalysisReport read_analysis_report(const std::string& path);

// What `compare` compares: a sweep report as it is, or an analysis report as the sweep of its
// job and baseline (a CI gate on a user's own job). Analysed either way.
SweepReport read_comparable_report(const std::string& path);

}  // namespace scalescope::traces
