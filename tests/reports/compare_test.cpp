// compare: the regression rule on constructed report pairs with known answers (size,
// significance, materiality), unmatched and failed points, the environment guard, threshold
// syntax, and what the terminal and Markdown outputs say.
#include <gtest/gtest.h>

#include <memory>

#include <cmath>

#include "core/error.h"
#include "reports/compare.h"
#include "reports/compare/format.h"
#include "tests/reports/sweep_fixtures.h"
#include "tests/test_util.h"

namespace scalescope {
namespace {

// A point whose step times jitter around `step_ms` by up to ±noise (relative), deterministically
// from `seed`; every phase is a fixed share of its step.
struct PointSpec {
  std::string model = "m";
  int devices = 2;
  int64_t batch = 32;
  double step_ms = 10.0;
  double noise = 0.01;
  int repeats = 2;
  int steps = 12;
  double h2d_share = 0.005;
  double exposed_share = 0.1;  // devices > 1 only
  uint32_t seed = 1;
};

SweepPoint make_point(const PointSpec& spec) {
  // Step times jitter by up to ±noise from an LCG: the same samples on every machine.
  auto state = std::make_shared<uint32_t>(spec.seed * 2654435761u + 12345u);
  return testing_util::make_point({.model = spec.model,
                                   .devices = spec.devices,
                                   .batch = spec.batch,
                                   .repeats = spec.repeats,
                                   .steps = spec.steps,
                                   .step_time =
                                       [state, spec](int, int) {
                                         *state = *state * 1664525u + 1013904223u;
                                         const double u = static_cast<double>(*state >> 8) /
                                                          static_cast<double>(1u << 24);
                                         return spec.step_ms * (1.0 + spec.noise * (2.0 * u - 1.0));
                                       },
                                   .other_replicas = 0.95,
                                   .h2d = spec.h2d_share,
                                   .exposed = spec.exposed_share,
                                   .bucket_bytes = {1 << 20},
                                   .alpha = 0.0,
                                   .beta = 0.0});
}

using testing_util::report_of;

// A one-device and a two-device point of model "m"; the two-device one as `two` says.
SweepReport pair_report(const PointSpec& two) {
  PointSpec one = two;
  one.devices = 1;
  one.step_ms = 8.0;
  one.noise = 0.01;
  one.seed = two.seed + 100;
  return report_of({make_point(one), make_point(two)});
}

Comparison compare(const SweepReport& base, const SweepReport& cur, CompareOptions o = {}) {
  return compare_reports(base, cur, o, "base.json", "cur.json");
}

const MetricComparison& metric_of(const PointComparison& p, Metric m) {
  for (const MetricComparison& c : p.metrics) {
    if (c.metric == m) return c;
  }
  ADD_FAILURE() << "no " << metric_name(m) << " in " << p.label;
  static const MetricComparison none;
  return none;
}

bool has_metric(const PointComparison& p, Metric m) {
  for (const MetricComparison& c : p.metrics) {
    if (c.metric == m) return true;
  }
  return false;
}

TEST(Compare, TenPercentLossOnLowNoiseIsARegression) {
  PointSpec spec;
  const SweepReport base = pair_report(spec);
  spec.step_ms = 11.0;
  spec.seed = 2;
  const Comparison c = compare(base, pair_report(spec));
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
  const SweepReport base = pair_report(spec);
  spec.step_ms = 11.0;  // the same jitter (same seed), scaled: medians exactly 10% apart
  const Comparison c = compare(base, pair_report(spec));
  const MetricComparison& t = metric_of(c.points[1], Metric::kThroughput);
  EXPECT_NEAR(t.relative_change, 1.0 / 1.1 - 1.0, 1e-9);
  EXPECT_GT(t.test.p_value, 0.05);
  EXPECT_EQ(t.change, Change::kNotSignificant);
  EXPECT_EQ(metric_of(c.points[1], Metric::kStepTime).change, Change::kNotSignificant);
  EXPECT_FALSE(c.regressed());
  EXPECT_CONTAINS(format_comparison_table(c), "not significant");
}

TEST(Compare, AnImprovementIsNotARegression) {
  PointSpec spec;
  const SweepReport base = pair_report(spec);
  spec.step_ms = 9.0;
  spec.seed = 3;
  const Comparison c = compare(base, pair_report(spec));
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
  PointSpec spec;
  const SweepReport base = pair_report(spec);
  spec.step_ms = 10.3;  // 3%, clearly significant on 1% noise, but under 5%
  spec.seed = 4;
  const Comparison c = compare(base, pair_report(spec));
  const MetricComparison& s = metric_of(c.points[1], Metric::kStepTime);
  EXPECT_LT(s.test.p_value, 0.001);
  EXPECT_EQ(s.change, Change::kUnchanged);
  EXPECT_FALSE(c.regressed());
}

TEST(Compare, PerMetricThresholdsApply) {
  PointSpec spec;
  const SweepReport base = pair_report(spec);
  spec.step_ms = 11.0;
  spec.seed = 2;
  CompareOptions o;
  o.thresholds = parse_thresholds("throughput=15%,efficiency=15%,phases=20%");
  const Comparison c = compare(base, pair_report(spec), o);
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

TEST(Compare, WeakTestsAreFlagged) {
  PointSpec spec;
  spec.repeats = 1;
  spec.steps = 5;
  const SweepReport base = pair_report(spec);
  spec.step_ms = 11.0;
  spec.seed = 2;
  const Comparison c = compare(base, pair_report(spec));
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

TEST(Compare, EnvironmentDifferencesAreNamedAtTheTop) {
  PointSpec spec;
  SweepReport base = pair_report(spec);
  SweepReport cur = base;
  EXPECT_TRUE(compare(base, cur).environment.empty());
  base.environment.host.cpu_model = "Xeon A";
  cur.environment.host.cpu_model = "EPYC B";
  cur.environment.host.logical_cores = 64;
  cur.environment.libraries.nccl = "2.28.3";
  GpuInfo gpu;
  gpu.name = "NVIDIA H100 80GB HBM3";
  cur.environment.gpus = {gpu, gpu};
  cur.environment.build.build_type = "Debug";
  base.environment.build.build_type = "Release";
  // Facts that do not change the numbers are not differences.
  cur.environment.host.hostname = "another-runner";
  cur.environment.captured_at = "2027-01-01T00:00:00Z";
  const Comparison c = compare(base, cur);
  std::vector<std::string> what;
  for (const EnvironmentDifference& d : c.environment) what.push_back(d.what);
  EXPECT_EQ(what, (std::vector<std::string>{"GPU models", "GPU count", "NCCL", "build type",
                                            "CPU model", "logical cores"}));
  EXPECT_EQ(c.environment[0].baseline, "none");
  EXPECT_EQ(c.environment[0].current, "NVIDIA H100 80GB HBM3, NVIDIA H100 80GB HBM3");
  EXPECT_EQ(c.environment[2].baseline, "none");
  const std::string table = format_comparison_table(c);
  EXPECT_LT(table.find("WARNING: the environments differ"), table.find("m cpu:1 batch 32"));
  EXPECT_CONTAINS(table, "CPU model      Xeon A  ->  EPYC B");
  const std::string md = format_comparison_markdown(c);
  EXPECT_LT(md.find("> [!WARNING]"), md.find("| metric |"));
  EXPECT_CONTAINS(md, "> - CPU model: `Xeon A` → `EPYC B`");
}

TEST(Compare, MarkdownIsAPullRequestComment) {
  PointSpec spec;
  const SweepReport base = pair_report(spec);
  spec.step_ms = 11.0;
  spec.seed = 2;
  const Comparison c = compare(base, pair_report(spec));
  const std::string md = format_comparison_markdown(c);
  // The verdict first, then the table of what moved, then the details.
  EXPECT_EQ(md.rfind("## :x: scalescope compare: regression\n", 0), 0u) << md;
  EXPECT_CONTAINS(md, "| point | metric | baseline | current | change | threshold | p | verdict |");
  EXPECT_CONTAINS(md, "| m cpu:2 batch 32 | throughput (samples/s) | ");
  EXPECT_CONTAINS(md, "| <0.001 | :red_circle: regressed |");
  EXPECT_CONTAINS(md, "<details><summary>All metrics of the 2 compared points</summary>");
  EXPECT_CONTAINS(md, "Baseline `base.json` (scalescope test");
  EXPECT_LT(md.find("| point |"), md.find("<details>"));
  // Only regressions and improvements are in the first table: the unchanged one-device point
  // is in the details only.
  EXPECT_EQ(md.find("| m cpu:1 batch 32 |"), std::string::npos);
  EXPECT_CONTAINS(md, "**m cpu:1 batch 32** (24 vs 24 measured steps)");
}

TEST(Compare, ThresholdSyntax) {
  const Thresholds plain = parse_thresholds("5%");
  EXPECT_DOUBLE_EQ(plain.of(Metric::kThroughput), 0.05);
  const Thresholds t = parse_thresholds("throughput=3%, allreduce_exposed=10%");
  EXPECT_DOUBLE_EQ(t.of(Metric::kThroughput), 0.03);
  EXPECT_DOUBLE_EQ(t.of(Metric::of(Phase::kAllReduceExposed)), 0.10);
  EXPECT_DOUBLE_EQ(t.of(Metric::kStepTime), 0.05);  // the default default
  const Thresholds p = parse_thresholds("2.5%,phases=10%,forward=1%");
  EXPECT_DOUBLE_EQ(p.of(Metric::kEfficiency), 0.025);
  EXPECT_DOUBLE_EQ(p.of(Metric::of(Phase::kInput)), 0.10);
  EXPECT_DOUBLE_EQ(p.of(Metric::of(Phase::kForward)), 0.01);
  EXPECT_DOUBLE_EQ(parse_thresholds("0%").of(Metric::of(Phase::kH2D)), 0.0);
  const auto error = [](const std::string& text) {
    return testing_util::error_of([&] { parse_thresholds(text); });
  };
  EXPECT_CONTAINS(error("5"), "--threshold item '5'");
  EXPECT_CONTAINS(error("5"), "with a % sign");
  EXPECT_CONTAINS(error("latency=3%"), "'latency' is not a metric (accepted: throughput, ");
  EXPECT_CONTAINS(error("latency=3%"), "phases");
  EXPECT_CONTAINS(error("throughput=abc%"), "'abc' is not a number");
  EXPECT_CONTAINS(error("throughput=-1%"), "'throughput=-1%'");
  EXPECT_CONTAINS(error("throughput=-1%"), "between 0% and 1000%");
  EXPECT_CONTAINS(error("throughput=3%,throughput=4%"), "names 'throughput' twice");
  EXPECT_CONTAINS(error("5%,3%"), "default threshold twice");
  EXPECT_CONTAINS(error("5%,,3%"), "empty item");
  EXPECT_CONTAINS(error(""), "--threshold is empty");
  EXPECT_CONTAINS(error("throughput=3"), "--threshold item 'throughput=3'");
  EXPECT_CONTAINS(testing_util::error_of([] { parse_percent("1.5", "--min-phase-change"); }),
                  "--min-phase-change '1.5'");
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
