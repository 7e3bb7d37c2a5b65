#include "reports/trace_analysis/analysis_report.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "reports/compare/compare.h"
#include "reports/trace_analysis/analysis_output.h"
#include "tests/test_util.h"

namespace scalescope::traces {
namespace {

using nlohmann::json;
using testing_util::error_of;

// A rank's steps: `n` steps of `compute` ms of forward, `exposed` of communication (of `comm`
// in all) and 1 ms idle.
RankSteps rank_steps(int rank, int n, double compute, double comm, double exposed) {
  RankSteps r;
  r.rank = rank;
  r.file = fmt::format("rank-{}.json", rank);
  for (int i = 1; i <= n; ++i) {
    StepBreakdown s;
    s.step = i;
    s.start_us = 1000.0 * i;
    // A little jitter, so that the bootstrap intervals have some width.
    s.forward_ms = compute + 0.01 * (i % 3);
    s.communication_ms = comm;
    s.communication_exposed_ms = exposed;
    s.idle_ms = 1.0;
    s.step_ms = s.exclusive_sum_ms();
    r.steps.push_back(s);
  }
  return r;
}

AnalysisReport report(double compute_rank1) {
  AnalysisReport r;
  r.tool_version = "0.1.0";
  r.created = "2026-01-01T00:00:00Z";
  r.name = "my job";
  r.job.ranks = {rank_steps(0, 12, 10.0, 4.0, 1.0), rank_steps(1, 12, compute_rank1, 4.0, 1.0)};
  JobSteps one;
  one.ranks = {rank_steps(0, 12, 10.0, 0.0, 0.0)};
  r.baseline = one;
  analyze_report(r);
  return r;
}

TEST(AnalysisReport, SpreadNamesTheSlowestRank) {
  const AnalysisReport r = report(12.0);
  EXPECT_EQ(r.spread.slowest_rank, 1);
  EXPECT_NEAR(r.spread.compute_skew_ms, 1.0, 1e-9);  // 12 against the median of 10 and 12
  EXPECT_NEAR(r.spread.compute_skew_ratio, 12.01 / 11.01, 1e-9);
  EXPECT_NEAR(r.spread.step_spread_ms, 2.0, 1e-9);
  ASSERT_EQ(r.spread.medians.size(), 2u);
  EXPECT_NEAR(r.spread.medians[1].communication_exposed_ms, 1.0, 1e-12);
}

TEST(AnalysisReport, TheJobIsAnalysedAsASweepPoint) {
  const AnalysisReport r = report(10.0);
  const SweepPoint& p = r.job_point();
  EXPECT_EQ(p.model, "my job");
  EXPECT_EQ(p.devices, 2);
  ASSERT_NE(r.baseline_point(), nullptr);
  EXPECT_EQ(r.baseline_point()->devices, 1);
  ASSERT_TRUE(p.summary.loss);
  // Ideal: the one-rank step (11.01 ms median); at two ranks 12.01: exposed communication is the
  // whole loss.
  EXPECT_NEAR(p.summary.loss->share(LossCause::kAllReduce), 1.0 / 12.01, 1e-9);
  EXPECT_NEAR(p.summary.loss->share(LossCause::kOther), 0.0, 1e-9);
  EXPECT_EQ(p.summary.group[Phase::kAllReduce], 4.0);
  EXPECT_EQ(p.summary.verdict.top().kind, "communication-bound");
  EXPECT_TRUE(r.sweep.communication.empty());  // no bucket sizes in traces
}

TEST(AnalysisReport, JsonRoundTrip) {
  const AnalysisReport r = report(12.0);
  const json j = to_json(r);
  EXPECT_EQ(j["schema"], kAnalysisSchema);
  EXPECT_EQ(j["summary"]["slowest_rank"], 1);
  EXPECT_EQ(j["summary"]["point"]["bottleneck"], r.job_point().summary.verdict.top().kind);
  EXPECT_DOUBLE_EQ(j["job"]["ranks"][1]["steps"][0]["compute_ms"].get<double>(), 12.01);
  const AnalysisReport back = analysis_report_from_json(j, "a.json");
  EXPECT_EQ(back.name, "my job");
  ASSERT_EQ(back.job.ranks.size(), 2u);
  EXPECT_EQ(back.job.ranks[1].steps[4].forward_ms, r.job.ranks[1].steps[4].forward_ms);
  EXPECT_EQ(to_json(back), j);  // the derived part recomputed to the same
}

TEST(AnalysisReport, ReadingIsStrict) {
  json j = to_json(report(10.0));
  j["job"]["ranks"][0]["steps"][2].erase("idle_ms");
  EXPECT_CONTAINS(error_of([&] { analysis_report_from_json(j, "a.json"); }),
                  "job.ranks[0].steps[2].idle_ms");
  j = to_json(report(10.0));
  j["job"]["ranks"][1]["rank"] = 0;
  EXPECT_CONTAINS(error_of([&] { analysis_report_from_json(j, "a.json"); }),
                  "ranks must be listed once each, ascending");
  j = to_json(report(10.0));
  j["schema"] = "scalescope-sweep";
  EXPECT_CONTAINS(error_of([&] { analysis_report_from_json(j, "a.json"); }),
                  "not an analysis report");
  j = to_json(report(10.0));
  j["baseline"] = j["job"];
  EXPECT_CONTAINS(error_of([&] { analysis_report_from_json(j, "a.json"); }),
                  "the baseline must be one rank of the job");
}

// compare on two analyses: the job that got slower is a regression, the same job is none.
TEST(AnalysisReport, CompareGatesAUsersJob) {
  const AnalysisReport before = report(10.0);
  const AnalysisReport after = report(13.0);
  const Comparison same = compare_reports(before.sweep, before.sweep, {}, "a", "a");
  EXPECT_FALSE(same.regressed());
  EXPECT_EQ(same.compared(), 2);
  const Comparison slower = compare_reports(before.sweep, after.sweep, {}, "a", "b");
  EXPECT_TRUE(slower.regressed());
}

TEST(AnalysisOutput, TablesAndPageShowTheRanksAndTheWaterfall) {
  AnalysisReport r = report(12.0);
  r.job.ranks[1].file = "<rank-1>.json";
  analyze_report(r);
  const std::string text = format_analysis_tables(r);
  EXPECT_CONTAINS(text, "slowest rank 1");
  EXPECT_CONTAINS(text, "communication-bound");
  const std::string page = format_analysis_html(r);
  EXPECT_CONTAINS(page, "data-chart=\"waterfall\"");
  EXPECT_CONTAINS(page, "data-chart=\"phases\"");
  EXPECT_CONTAINS(page, "&lt;rank-1&gt;.json");
  EXPECT_EQ(page.find("<rank-1>"), std::string::npos);
  r.baseline.reset();
  analyze_report(r);
  EXPECT_EQ(format_analysis_html(r).find("data-chart=\"waterfall\""), std::string::npos);
}

}  // namespace
}  // namespace scalescope::traces
