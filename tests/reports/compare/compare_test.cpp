// compare_reports: the regression rule on constructed report pairs with known answers (size,
// significance, materiality), unmatched and failed points, and what the outputs say of them.
#include "reports/compare/compare.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "reports/compare/format.h"
#include "tests/reports/compare/compare_fixtures.h"
#include "tests/test_util.h"

namespace scalescope {
namespace {

using compare_testing::changed;
using compare_testing::compare;
using compare_testing::has_metric;
using compare_testing::make_point;
using compare_testing::metric_of;
using compare_testing::pair_report;
using compare_testing::PointSpec;
using testing_util::report_of;

TEST(Compare, TenPercentLossOnLowNoiseIsARegression) {
  const Comparison c = changed({}, 11.0, 2);
  ASSERT_EQ(c.points.size(), 2u);
  EXPECT_EQ(c.points[0].status, PointStatus::kCompared);
  EXPECT_EQ(c.points[0].regressions(), 0);  // the one-device point did not change
  const PointComparison& two = c.points[1];
  EXPECT_EQ(two.baseline_steps, 24);
  const MetricComparison& t = metric_of(two, Metric::kThroughput);
  EXPECT_NEAR(t.relative_change, 10.0 / 11.0 - 1.0, 0.01);
  EXPECT_LT(t.test.p_value, 1e-6);
  EXPECT_GT(t.test.z, 0.0);  // current step times larger
  EXPECT_TRUE(t.test.exact_enough);
  EXPECT_EQ(t.change, Change::kRegressed);
  EXPECT_EQ(metric_of(two, Metric::kStepTime).change, Change::kRegressed);
  // Efficiency fell with the N-device step time: its test is that point's.
  EXPECT_EQ(metric_of(two, Metric::kEfficiency).change, Change::kRegressed);
  // Every phase is a fixed share of the step: each grew 10% and each is material but h2d
  // (0.5% of the step: 0.05 ms growth < 1% of 10 ms).
  EXPECT_EQ(metric_of(two, Metric::of(Phase::kBackward)).change, Change::kRegressed);
  EXPECT_EQ(metric_of(two, Metric::of(Phase::kH2D)).change, Change::kNegligible);
  EXPECT_TRUE(c.regressed());
  EXPECT_FALSE(c.weak());
  EXPECT_EQ(c.regressions(), two.regressions());
}

TEST(Compare, TheSameLossWithinHeavyNoiseIsNotSignificant) {
  PointSpec spec;
  spec.noise = 0.5;
  // The same jitter (same seed), scaled: medians exactly 10% apart.
  const Comparison c = changed(spec, 11.0, spec.seed);
  const MetricComparison& t = metric_of(c.points[1], Metric::kThroughput);
  EXPECT_NEAR(t.relative_change, 1.0 / 1.1 - 1.0, 1e-9);
  EXPECT_GT(t.test.p_value, 0.05);
  EXPECT_EQ(t.change, Change::kNotSignificant);
  EXPECT_EQ(metric_of(c.points[1], Metric::kStepTime).change, Change::kNotSignificant);
  EXPECT_FALSE(c.regressed());
  EXPECT_CONTAINS(format_comparison_table(c), "not significant");
}

TEST(Compare, AnImprovementIsNotARegression) {
  const Comparison c = changed({}, 9.0, 3);
  EXPECT_EQ(metric_of(c.points[1], Metric::kThroughput).change, Change::kImproved);
  EXPECT_EQ(metric_of(c.points[1], Metric::kStepTime).change, Change::kImproved);
  EXPECT_FALSE(c.regressed());
  EXPECT_EQ(c.regressions(), 0);
  EXPECT_GT(c.improvements(), 0);
  const std::string md = format_comparison_markdown(c);
  EXPECT_CONTAINS(md, ":white_check_mark: scalescope compare: no regression");
  EXPECT_CONTAINS(md, ":green_circle: improved");
}

TEST(Compare, ASmallChangeWithinTheThresholdIsUnchanged) {
  // 3%, clearly significant on 1% noise, but under 5%.
  const Comparison c = changed({}, 10.3, 4);
  const MetricComparison& s = metric_of(c.points[1], Metric::kStepTime);
  EXPECT_LT(s.test.p_value, 0.001);
  EXPECT_EQ(s.change, Change::kUnchanged);
  EXPECT_FALSE(c.regressed());
}

TEST(Compare, PerMetricThresholdsApply) {
  CompareOptions o;
  o.thresholds = parse_thresholds("throughput=15%,efficiency=15%,phases=20%");
  const Comparison c = changed({}, 11.0, 2, o);
  const PointComparison& two = c.points[1];
  EXPECT_EQ(metric_of(two, Metric::kThroughput).threshold, 0.15);
  EXPECT_EQ(metric_of(two, Metric::kThroughput).change, Change::kUnchanged);
  EXPECT_EQ(metric_of(two, Metric::of(Phase::kBackward)).change, Change::kUnchanged);
  // step_time keeps the default 5%, so the gate still fails.
  EXPECT_EQ(metric_of(two, Metric::kStepTime).change, Change::kRegressed);
  EXPECT_TRUE(c.regressed());
  EXPECT_CONTAINS(format_comparison_table(c), "5% (throughput 15%, efficiency 15%, input 20%");
}

TEST(Compare, ATinyPhaseCannotFailTheGateButALargeOneCan) {
  PointSpec spec;
  const SweepReport base = pair_report(spec);
  // h2d doubles (0.5% -> 1% of the step) with the step unchanged: +100%, significant, but
  // 0.05 ms is under 1% of the 10 ms step.
  spec.h2d_share = 0.01;
  const Comparison tiny = compare(base, pair_report(spec));
  const MetricComparison& h2d = metric_of(tiny.points[1], Metric::of(Phase::kH2D));
  EXPECT_NEAR(h2d.relative_change, 1.0, 1e-9);
  EXPECT_LT(h2d.test.p_value, 0.001);
  EXPECT_EQ(h2d.change, Change::kNegligible);
  EXPECT_EQ(metric_of(tiny.points[1], Metric::kStepTime).change, Change::kUnchanged);
  EXPECT_FALSE(tiny.regressed());
  EXPECT_CONTAINS(format_comparison_table(tiny), "negligible (< 1% of step)");
  // Without the floor the same change fails the gate.
  CompareOptions no_floor;
  no_floor.min_phase_change = 0.0;
  EXPECT_TRUE(compare(base, pair_report(spec), no_floor).regressed());
  // Exposed all-reduce growing from 10% to 18% of the step is material.
  spec.h2d_share = 0.005;
  spec.exposed_share = 0.18;
  const Comparison large = compare(base, pair_report(spec));
  EXPECT_EQ(metric_of(large.points[1], Metric::of(Phase::kAllReduceExposed)).change,
            Change::kRegressed);
  EXPECT_TRUE(large.regressed());
  // The one-device point has no all-reduce in either report: no row.
  EXPECT_FALSE(has_metric(large.points[0], Metric::of(Phase::kAllReduce)));
  EXPECT_FALSE(has_metric(large.points[0], Metric::kEfficiency));
}

TEST(Compare, MissingAndFailedPointsAreListed) {
  PointSpec a;
  a.devices = 1;
  PointSpec b;
  b.devices = 2;
  PointSpec four;
  four.devices = 4;
  PointSpec eight;
  eight.devices = 8;
  PointSpec sixteen;
  sixteen.devices = 16;
  SweepPoint failed_b = make_point(b);
  failed_b.status = "failed";
  failed_b.error = "out of memory";
  failed_b.repeats.clear();
  SweepPoint failed_16 = make_point(sixteen);
  failed_16.status = "failed";
  failed_16.error = "gloo timeout";
  failed_16.repeats.clear();
  const SweepReport base = report_of({make_point(a), make_point(b), make_point(four), failed_16});
  const SweepReport cur = report_of({make_point(a), failed_b, make_point(eight), failed_16});
  const Comparison c = compare(base, cur);
  ASSERT_EQ(c.points.size(), 5u);
  EXPECT_EQ(c.points[0].status, PointStatus::kCompared);
  EXPECT_EQ(c.points[1].status, PointStatus::kFailedInCurrent);
  EXPECT_EQ(c.points[1].current_error, "out of memory");
  EXPECT_EQ(c.points[2].status, PointStatus::kOnlyInBaseline);
  EXPECT_EQ(c.points[3].status, PointStatus::kFailedInBoth);
  EXPECT_EQ(c.points[4].status, PointStatus::kOnlyInCurrent);
  EXPECT_EQ(c.points[4].label, "m cpu:8 batch 32");
  // A point that ran before and fails now fails the gate; no metric regressed.
  EXPECT_EQ(c.regressions(), 0);
  EXPECT_EQ(c.newly_failed(), 1);
  EXPECT_TRUE(c.regressed());
  const std::string table = format_comparison_table(c);
  EXPECT_CONTAINS(table, "m cpu:2 batch 32: failed in the current report: out of memory");
  EXPECT_CONTAINS(table, "m cpu:4 batch 32: only in the baseline");
  EXPECT_CONTAINS(table, "m cpu:8 batch 32: only in the current report");
  EXPECT_CONTAINS(table, "m cpu:16 batch 32: failed in both: gloo timeout");
  EXPECT_CONTAINS(table, "REGRESSION: 0 metrics regressed");
  const std::string md = format_comparison_markdown(c);
  EXPECT_CONTAINS(md, ":x: scalescope compare: regression");
  EXPECT_CONTAINS(md, "**1 point failed that ran before**");
  EXPECT_CONTAINS(md, "- :red_circle: `m cpu:2 batch 32`: failed in the current report");
  EXPECT_CONTAINS(md, "- `m cpu:4 batch 32`: only in the baseline");
  // Failed in the baseline and ok now: listed, not a regression.
  const Comparison fixed = compare(cur, base);
  EXPECT_EQ(fixed.points[1].status, PointStatus::kFailedInBaseline);
  EXPECT_EQ(fixed.newly_failed(), 0);
  EXPECT_FALSE(fixed.regressed());
}

// A current report with no point in common with the baseline (a sweep killed before its
// first point, another grid) passed the gate as "no regression ... of 0 points compared".
TEST(Compare, NothingComparedIsSaidSoAndIsNotAPass) {
  PointSpec one;
  one.devices = 1;
  PointSpec two;
  two.devices = 2;
  const Comparison empty = compare(report_of({make_point(one)}), report_of({}));
  EXPECT_TRUE(empty.nothing_compared());
  EXPECT_FALSE(empty.regressed());
  EXPECT_CONTAINS(format_comparison_table(empty), "NOTHING COMPARED: 0 metrics regressed");
  EXPECT_CONTAINS(format_comparison_markdown(empty),
                  "## :warning: scalescope compare: nothing compared");
  EXPECT_TRUE(
      compare(report_of({make_point(one)}), report_of({make_point(two)})).nothing_compared());
  // A point that ran before and fails now is a regression, not "nothing compared".
  SweepPoint failed = make_point(one);
  failed.status = "failed";
  failed.repeats.clear();
  const Comparison broke = compare(report_of({make_point(one)}), report_of({failed}));
  EXPECT_FALSE(broke.nothing_compared());
  EXPECT_TRUE(broke.regressed());
  const Comparison same = compare(report_of({make_point(one)}), report_of({make_point(one)}));
  EXPECT_FALSE(same.nothing_compared());
  EXPECT_CONTAINS(format_comparison_markdown(same),
                  "## :white_check_mark: scalescope compare: no regression");
}

TEST(Compare, WeakTestsAreFlagged) {
  PointSpec spec;
  spec.repeats = 1;
  spec.steps = 5;
  const Comparison c = changed(spec, 11.0, 2);
  const MetricComparison& t = metric_of(c.points[1], Metric::kThroughput);
  EXPECT_FALSE(t.test.exact_enough);
  EXPECT_TRUE(c.weak());
  // Five steps that do not overlap still decide (p of about 0.01), with a warning.
  EXPECT_EQ(t.change, Change::kRegressed);
  const std::string table = format_comparison_table(c);
  EXPECT_CONTAINS(table, "0.012*");
  EXPECT_CONTAINS(table, "* fewer than 8 measured steps on a side: the test is weak");
  const std::string md = format_comparison_markdown(c);
  EXPECT_CONTAINS(md, "> [!NOTE]\n> p-values marked * come from fewer than 8 measured steps");
}

TEST(Compare, AmbiguousReportsAndBadOptionsAreRefused) {
  PointSpec spec;
  SweepReport base = pair_report(spec);
  SweepReport twice = base;
  twice.points.push_back(twice.points[1]);
  EXPECT_CONTAINS(testing_util::error_of([&] { compare(base, twice); }),
                  "report cur.json has two points for m cpu:2 batch 32");
  CompareOptions o;
  o.alpha = 1.5;
  EXPECT_CONTAINS(testing_util::error_of([&] { compare(base, base, o); }), "alpha 1.5");
  // Identical reports: nothing moved.
  const Comparison same = compare(base, base);
  EXPECT_FALSE(same.regressed());
  for (const MetricComparison& m : same.points[1].metrics) {
    EXPECT_EQ(m.change, Change::kUnchanged) << metric_name(m.metric);
  }
}

}  // namespace
}  // namespace scalescope
