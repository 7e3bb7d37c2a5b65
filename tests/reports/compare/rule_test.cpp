// The regression rule: metric names, the --threshold syntax, and the decision for one metric.
#include "reports/compare/rule.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/error.h"
#include "tests/test_util.h"

namespace scalescope {
namespace {

TEST(CompareRule, ThresholdSyntax) {
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
  EXPECT_EQ(error("5").find("'5' '5'"), std::string::npos) << "the item named twice";
  EXPECT_CONTAINS(error("latency=3%"), "'latency' is not a metric (accepted: throughput, ");
  EXPECT_CONTAINS(error("latency=3%"), "phases");
  EXPECT_CONTAINS(error("througput=3%"), "'througput' is not a metric (did you mean throughput?)");
  EXPECT_CONTAINS(error("phase=3%"), "'phase' is not a metric (did you mean phases?)");
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

TEST(CompareRule, StepMetricsThenOnePerPhaseOfTheSchema) {
  const auto all = Metric::all();
  ASSERT_EQ(all.size(), 3 + kPhaseCount);
  EXPECT_EQ(all[0], Metric::kThroughput);
  EXPECT_EQ(all[1], Metric::kStepTime);
  EXPECT_EQ(all[2], Metric::kEfficiency);
  for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i].index(), i);
  for (const PhaseDef& d : kPhases) {
    const Metric m = Metric::of(d.phase);
    EXPECT_EQ(m.phase(), d.phase);
    EXPECT_EQ(metric_name(m), d.key);
    EXPECT_EQ(metric_unit(m), "ms");
    EXPECT_TRUE(is_phase(m));
    EXPECT_FALSE(higher_is_better(m));
  }
  EXPECT_FALSE(Metric::kEfficiency.phase().has_value());
  EXPECT_TRUE(higher_is_better(Metric::kThroughput));
  EXPECT_FALSE(higher_is_better(Metric::kStepTime));
  EXPECT_EQ(metric_names(),
            "throughput, step_time, efficiency, input, h2d, h2d_total, forward, backward, "
            "allreduce, allreduce_exposed, optimizer, grad_cast, batchnorm_sync, phases");
}

// A test whose p-value and direction are as given.
MannWhitney test_with(double p_value, double z) {
  MannWhitney t;
  t.p_value = p_value;
  t.z = z;
  t.exact_enough = true;
  return t;
}

TEST(CompareRule, SizeThenSignificanceInTheSameDirectionThenMateriality) {
  const CompareOptions o;  // 5%, alpha 0.05
  const MannWhitney slower = test_with(0.001, 3.0);
  const MannWhitney faster = test_with(0.001, -3.0);
  const auto change = [&](Metric m, double base, double cur, const MannWhitney& t,
                          bool material = true) {
    return compare_metric(m, base, cur, t, material, o).change;
  };
  // Within 5%: unchanged, however significant.
  EXPECT_EQ(change(Metric::kStepTime, 10.0, 10.4, slower), Change::kUnchanged);
  // Beyond it: the direction of the change and of the test decide.
  EXPECT_EQ(change(Metric::kStepTime, 10.0, 11.0, slower), Change::kRegressed);
  EXPECT_EQ(change(Metric::kStepTime, 10.0, 9.0, faster), Change::kImproved);
  EXPECT_EQ(change(Metric::kStepTime, 10.0, 11.0, faster), Change::kNotSignificant);
  EXPECT_EQ(change(Metric::kStepTime, 10.0, 11.0, test_with(0.05, 3.0)), Change::kNotSignificant);
  // Throughput is better higher: a drop is a regression when the step times grew.
  EXPECT_EQ(change(Metric::kThroughput, 100.0, 90.0, slower), Change::kRegressed);
  EXPECT_EQ(change(Metric::kThroughput, 100.0, 110.0, faster), Change::kImproved);
  // Too small to matter.
  EXPECT_EQ(change(Metric::of(Phase::kH2D), 0.1, 0.2, slower, false), Change::kNegligible);
  const MetricComparison m = compare_metric(Metric::kStepTime, 10.0, 11.0, slower, true, o);
  EXPECT_DOUBLE_EQ(m.relative_change, 0.1);
  EXPECT_DOUBLE_EQ(m.threshold, 0.05);
  EXPECT_EQ(m.baseline, 10.0);
  EXPECT_EQ(m.current, 11.0);
  // A phase the baseline did not have.
  const MetricComparison fresh =
      compare_metric(Metric::of(Phase::kAllReduce), 0.0, 1.0, slower, true, o);
  EXPECT_EQ(fresh.relative_change, std::numeric_limits<double>::infinity());
  EXPECT_EQ(fresh.change, Change::kRegressed);
}

}  // namespace
}  // namespace scalescope
