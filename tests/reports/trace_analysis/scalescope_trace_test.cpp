// scalescope's own Chrome trace (reports/writers/trace.h) read back by analyze: the phases and the
// verdict a sweep point's report gives from its steps, the trace of those steps gives too.
#include <gtest/gtest.h>

#include "reports/analysis/sweep_analysis.h"
#include "reports/trace_analysis/analysis_report.h"
#include "reports/trace_analysis/readers.h"
#include "reports/writers/trace.h"

namespace scalescope::traces {
namespace {

// Replica r of step k: the exposed phases back to back from the step's start, two buckets on
// the communication thread (the first during backward, the second until the exposed wait ends),
// and 0.05 ms after the optimizer that no phase covers (the loss read).
PhaseTimes replica_step(int r, int k, double start_ms) {
  PhaseTimes p;
  p[Phase::kInput] = 0.4 + 0.1 * r;
  p[Phase::kH2D] = 0.2;
  p[Phase::kForward] = 3.0 + 0.05 * k;
  p[Phase::kBackward] = 6.0 + 0.5 * r;
  p[Phase::kAllReduceExposed] = 1.5 - 0.2 * r;
  p[Phase::kOptimizer] = 0.7;
  p.start_ms = start_ms;
  const double backward_end =
      start_ms + 0.4 + 0.1 * r + 0.2 + p[Phase::kForward] + p[Phase::kBackward];
  p.buckets = {{backward_end - 4.0, 2.0}, {backward_end - 1.0, 1.0 + p[Phase::kAllReduceExposed]}};
  p[Phase::kAllReduce] = p.buckets[0].ms + p.buckets[1].ms;
  p.step_ms = p.exposed_sum_ms() + 0.05;
  return p;
}

std::vector<StepRecord> steps(int replicas, int count) {
  std::vector<StepRecord> out;
  double t = 0.0;
  for (int k = 1; k <= count; ++k) {
    StepRecord s;
    s.step = k;
    for (int r = 0; r < replicas; ++r) s.replicas.push_back(replica_step(r, k, t));
    set_group_times(s);
    t += s.step_ms + 0.3;
    out.push_back(std::move(s));
  }
  return out;
}

SweepPoint point_of(const std::vector<StepRecord>& records, int devices) {
  SweepPoint p;
  p.model = "trace";
  p.device_kind = "cpu";
  p.devices = devices;
  p.batch = 1;
  p.global_batch = devices;
  p.repeats.resize(1);
  p.repeats[0].steps = records;
  return p;
}

TEST(ScalescopeTrace, ItsPhasesAndVerdictComeBack) {
  const std::vector<StepRecord> one = steps(1, 9);
  const std::vector<StepRecord> two = steps(2, 9);
  // What the sweep's report says of the two points.
  SweepReport sweep;
  sweep.points = {point_of(one, 1), point_of(two, 2)};
  analyze(sweep);
  // What analyze makes of their traces.
  AnalysisReport r;
  r.name = "trace";
  r.job = job_of(parse_chrome_trace(chrome_trace_text(two, {"trace cpu:2", {}}), "two.json"), "");
  r.baseline =
      job_of(parse_chrome_trace(chrome_trace_text(one, {"trace cpu:1", {}}), "one.json"), "");
  analyze_report(r);
  ASSERT_EQ(r.job.ranks.size(), 2u);
  EXPECT_EQ(r.job.ranks[1].format, TraceFormat::kScalescope);
  const PointSummary& want = sweep.points[1].summary;
  const PointSummary& got = r.job_point().summary;
  for (const PhaseDef& d : kPhases) {
    // The copy's total is the trace's copy event, which these steps do not have.
    if (d.kind == PhaseKind::kInput && !d.exposed) continue;
    SCOPED_TRACE(d.key);
    EXPECT_NEAR(got.group[d.phase], want.group[d.phase], 1e-9);
    EXPECT_NEAR(got.replicas[1][d.phase], want.replicas[1][d.phase], 1e-9);
    EXPECT_NEAR(got.replicas[0][d.phase], want.replicas[0][d.phase], 1e-9);
  }
  EXPECT_NEAR(got.step_ms_median, want.step_ms_median, 1e-9);
  ASSERT_TRUE(got.loss && want.loss);
  EXPECT_NEAR(got.loss->share(LossCause::kAllReduce), want.loss->share(LossCause::kAllReduce),
              1e-9);
  EXPECT_NEAR(got.loss->share(LossCause::kStragglers), want.loss->share(LossCause::kStragglers),
              1e-9);
  ASSERT_EQ(got.verdict.findings.size(), want.verdict.findings.size());
  for (size_t i = 0; i < got.verdict.findings.size(); ++i) {
    EXPECT_EQ(got.verdict.findings[i].kind, want.verdict.findings[i].kind);
    EXPECT_NEAR(got.verdict.findings[i].share, want.verdict.findings[i].share, 1e-9);
  }
  // The 0.05 ms no phase covers is idle, and the steps add up.
  const StepBreakdown& s = r.job.ranks[0].steps[3];
  EXPECT_NEAR(s.idle_ms, 0.05, 1e-9);
  EXPECT_NEAR(s.exclusive_sum_ms(), s.step_ms, 1e-9);
}

}  // namespace
}  // namespace scalescope::traces
