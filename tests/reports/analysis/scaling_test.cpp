#include "reports/analysis/scaling.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <numeric>
#include <optional>
#include <random>
#include <vector>

#include "core/error.h"
#include "tests/test_util.h"

namespace scalescope {
namespace {

// A 40 ms step: compute 30 (10 + 18 + 2), and the rest as the test sets it.
PhaseMedians base_step() {
  PhaseMedians p;
  p[Phase::kForward] = 10;
  p[Phase::kBackward] = 18;
  p[Phase::kOptimizer] = 2;
  p.step_ms = 40;
  return p;
}

std::vector<PhaseMedians> replicas_with_compute(std::vector<double> compute) {
  std::vector<PhaseMedians> out;
  for (const double c : compute) {
    PhaseMedians p = base_step();
    p[Phase::kForward] = c - 20;  // backward 18 + optimizer 2
    out.push_back(p);
  }
  return out;
}

// A copy: the verdicts the tests pass in are temporaries.
std::optional<Finding> find(const Verdict& v, const std::string& kind) {
  for (const Finding& f : v.findings) {
    if (f.kind == kind) return f;
  }
  return std::nullopt;
}

TEST(PhaseMedians, ComputeIsForwardBackwardOptimizer) {
  EXPECT_DOUBLE_EQ(base_step().compute_ms(), 30.0);
}

TEST(Verdict, InputBoundAtItsThresholds) {
  VerdictInput in;
  in.group = base_step();
  in.group[Phase::kInput] = 1.5;
  in.group[Phase::kH2D] = 0.49;  // 1.99 of 40: 4.975%
  EXPECT_FALSE(find(diagnose(in), "input-bound"));
  in.group[Phase::kH2D] = 0.5;  // exactly 5%
  std::optional<Finding> f = find(diagnose(in), "input-bound");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->severity, kSeverityModerate);
  EXPECT_DOUBLE_EQ(f->share, 0.05);
  in.group[Phase::kInput] = 7.49;  // 7.99 of 40: still moderate
  EXPECT_EQ(find(diagnose(in), "input-bound")->severity, kSeverityModerate);
  in.group[Phase::kInput] = 7.5;  // exactly 20%
  f = find(diagnose(in), "input-bound");
  EXPECT_EQ(f->severity, kSeverityHigh);
  EXPECT_DOUBLE_EQ(f->numbers.at("share"), 0.2);
  EXPECT_DOUBLE_EQ(f->numbers.at("input_ms"), 7.5);
  EXPECT_DOUBLE_EQ(f->numbers.at("h2d_ms"), 0.5);
  EXPECT_EQ(f->explanation,
            "input wait is 20% of the step (8.0 of 40.0 ms: input 7.5, exposed host-to-device copy "
            "0.5)");
  // A copy that ran longer than the step waited for it was partly hidden: the finding says so.
  in.group[Phase::kH2DTotal] = 3.0;
  f = find(diagnose(in), "input-bound");
  EXPECT_DOUBLE_EQ(f->numbers.at("h2d_total_ms"), 3.0);
  EXPECT_CONTAINS(f->explanation,
                  "; the copy ran 3.0 ms in total, the rest hidden behind the "
                  "step before)");
}

TEST(Verdict, CommunicationBoundAtItsThresholds) {
  VerdictInput in;
  in.group = base_step();
  in.group[Phase::kAllReduce] = 12;
  in.group[Phase::kAllReduceExposed] = 1.99;
  EXPECT_FALSE(find(diagnose(in), "communication-bound"));
  in.group[Phase::kAllReduceExposed] = 2;
  EXPECT_EQ(find(diagnose(in), "communication-bound")->severity, kSeverityModerate);
  in.group[Phase::kAllReduceExposed] = 7.99;
  EXPECT_EQ(find(diagnose(in), "communication-bound")->severity, kSeverityModerate);
  in.group[Phase::kAllReduceExposed] = 8;
  std::optional<Finding> f = find(diagnose(in), "communication-bound");
  EXPECT_EQ(f->severity, kSeverityHigh);
  EXPECT_DOUBLE_EQ(f->share, 0.2);
  EXPECT_DOUBLE_EQ(f->numbers.at("allreduce_ms"), 12.0);
  EXPECT_EQ(f->explanation,
            "exposed all-reduce is 20% of the step (8.0 of 40.0 ms; 12.0 ms in total, the rest "
            "hidden behind backward)");
}

TEST(Verdict, StragglerAtItsThresholds) {
  VerdictInput in;
  in.group = base_step();
  in.replicas = replicas_with_compute({20, 20, 21.99, 20});  // 1.0995x
  EXPECT_FALSE(find(diagnose(in), "straggler"));
  in.replicas = replicas_with_compute({20, 20, 22, 20});  // exactly 1.1x
  std::optional<Finding> f = find(diagnose(in), "straggler");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->severity, kSeverityModerate);
  EXPECT_DOUBLE_EQ(f->numbers.at("ratio"), 1.1);
  EXPECT_DOUBLE_EQ(f->numbers.at("slowest_compute_ms"), 22.0);
  EXPECT_DOUBLE_EQ(f->numbers.at("median_compute_ms"), 20.0);
  EXPECT_DOUBLE_EQ(f->share, 2.0 / 40.0);
  in.replicas = replicas_with_compute({20, 20, 24.99, 20});
  EXPECT_EQ(find(diagnose(in), "straggler")->severity, kSeverityModerate);
  in.replicas = replicas_with_compute({20, 25, 20, 20});  // exactly 1.25x
  EXPECT_EQ(find(diagnose(in), "straggler")->severity, kSeverityHigh);
  in.replicas = replicas_with_compute({20, 26, 20, 20});
  f = find(diagnose(in), "straggler");
  EXPECT_EQ(f->severity, kSeverityHigh);
  EXPECT_EQ(f->explanation,
            "slowest replica computes 1.30x the median replica (26.0 vs 20.0 ms), 15% of the "
            "step");
  // One replica cannot straggle behind itself.
  in.replicas = replicas_with_compute({40});
  EXPECT_FALSE(find(diagnose(in), "straggler"));
}

TEST(Verdict, HostBoundOnlyWhenDeviceBusyIsKnown) {
  VerdictInput in;
  in.group = base_step();
  in.device_busy_ms = 32.01;  // idle 19.975%
  EXPECT_FALSE(find(diagnose(in), "host-bound"));
  in.device_busy_ms = 32;  // idle exactly 20%
  std::optional<Finding> f = find(diagnose(in), "host-bound");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->severity, kSeverityModerate);
  EXPECT_DOUBLE_EQ(f->share, 0.2);
  EXPECT_EQ(f->explanation, "device idle 20% of the step (busy 32.0 of 40.0 ms)");
  in.device_busy_ms = 20;  // idle 50%
  EXPECT_EQ(find(diagnose(in), "host-bound")->severity, kSeverityHigh);
  in.device_busy_ms = std::nullopt;  // CPU: no rule
  EXPECT_FALSE(find(diagnose(in), "host-bound"));
  in.device_busy_ms = 45;  // busier than the step (clock skew): idle negative, no finding
  EXPECT_FALSE(find(diagnose(in), "host-bound"));
}

TEST(Verdict, ComputeBoundWhenNothingFires) {
  VerdictInput in;
  in.group = base_step();
  in.group[Phase::kInput] = 1;
  in.group[Phase::kAllReduceExposed] = 1;
  in.replicas = replicas_with_compute({30, 31, 30, 32});
  in.device_busy_ms = 38;
  const Verdict v = diagnose(in);
  ASSERT_EQ(v.findings.size(), 1u);
  EXPECT_EQ(v.top().kind, "compute-bound");
  EXPECT_EQ(v.top().severity, kSeverityInfo);
  EXPECT_DOUBLE_EQ(v.top().share, 0.75);
  EXPECT_EQ(v.top().explanation, "compute is 75% of the step (30.0 of 40.0 ms)");
}

TEST(Verdict, RanksFindingsByHowMuchOfTheStepTheyExplain) {
  VerdictInput in;
  in.group = base_step();
  in.group[Phase::kInput] = 3;                            // 7.5%
  in.group[Phase::kAllReduceExposed] = 10;                // 25%
  in.replicas = replicas_with_compute({20, 20, 26, 20});  // 6 ms: 15%
  in.device_busy_ms = 28;                                 // idle 30%
  const Verdict v = diagnose(in);
  ASSERT_EQ(v.findings.size(), 4u);
  EXPECT_EQ(v.findings[0].kind, "host-bound");
  EXPECT_EQ(v.findings[1].kind, "communication-bound");
  EXPECT_EQ(v.findings[2].kind, "straggler");
  EXPECT_EQ(v.findings[3].kind, "input-bound");
  EXPECT_EQ(v.top().kind, "host-bound");
  EXPECT_FALSE(find(v, "compute-bound"));
}

TEST(Verdict, RejectsAZeroStep) {
  VerdictInput in;
  EXPECT_THROW(diagnose(in), Error);
  EXPECT_THROW(Verdict{}.top(), Error);
}

// The default sweep's cifar-cnn cpu:2 batch 32 as a new user saw it: exposed all-reduce 12.4%
// of the step, per-replica compute slowdown 22.9%. The step rule calls it
// communication-bound; the loss says the replicas slow each other down.
ScalingInput contended_point() {
  ScalingInput in;
  in.step_ms = 100;
  in.loss.lost = 0.353;
  in.loss.efficiency = 0.647;
  in.loss.share(LossCause::kAllReduce) = 0.124;
  in.loss.share(LossCause::kContention) = 0.229;
  in.loss.compute_ms = 87.6;
  in.loss.ideal_compute_ms = 64.7;
  return in;
}

Verdict step_verdict_of(double exposed_ms) {
  VerdictInput step;
  step.group = base_step();
  step.group.step_ms = 100;
  step.group[Phase::kAllReduceExposed] = exposed_ms;
  return diagnose(step);
}

TEST(ScalingVerdict, TheLargestLossLeadsWhereTheStepRuleWouldDisagree) {
  const Verdict old_rule = step_verdict_of(12.4);
  ASSERT_EQ(old_rule.top().kind, "communication-bound");
  const Verdict v = explain_scaling(old_rule, contended_point());
  ASSERT_EQ(v.findings.size(), 2u);
  EXPECT_EQ(v.top().kind, "contention");
  EXPECT_EQ(v.top().severity, kSeverityHigh);
  EXPECT_DOUBLE_EQ(v.top().share, 0.229);
  EXPECT_NEAR(v.top().numbers.at("ratio"), 87.6 / 64.7, 1e-12);
  EXPECT_EQ(v.top().explanation,
            "each replica computes 1.35x as long as one device alone (87.6 vs 64.7 ms), 23% of "
            "the step: the replicas slow each other down (shared cores, memory bandwidth, "
            "communication threads)");
  EXPECT_EQ(v.findings[1].kind, "communication-bound");
  EXPECT_EQ(v.findings[1].severity, kSeverityModerate);
  EXPECT_DOUBLE_EQ(v.findings[1].share, 0.124);
  EXPECT_EQ(v.findings[1].explanation,
            "exposed all-reduce costs 12% of the step (35% lost against ideal in all)");
}

TEST(ScalingVerdict, EveryComponentHasItsFindingAtItsThresholds) {
  ScalingInput in;
  in.step_ms = 10;
  in.loss.share(LossCause::kInput) = 0.05;
  in.loss.share(LossCause::kStragglers) = 0.20;
  in.loss.share(LossCause::kOther) = 0.0499;
  in.loss.share(LossCause::kAllReduce) = -0.1;  // faster at N: no finding
  const Verdict v = explain_scaling(step_verdict_of(0), in);
  ASSERT_EQ(v.findings.size(), 2u);
  EXPECT_EQ(v.findings[0].kind, "straggler");
  EXPECT_EQ(v.findings[0].severity, kSeverityHigh);
  EXPECT_EQ(v.findings[1].kind, "input-bound");
  EXPECT_EQ(v.findings[1].severity, kSeverityModerate);
  in.loss.share(LossCause::kOther) = 0.3;
  EXPECT_EQ(explain_scaling(step_verdict_of(0), in).top().kind, "unattributed");
}

// A component above the threshold whose interval holds 0 cannot be told from none: no
// finding. The same share measured without noise is one.
TEST(ScalingVerdict, AComponentWithinMeasurementNoiseIsNoFinding) {
  ScalingInput in = contended_point();
  in.loss.intervals = std::array<LossBreakdown::Range, kLossCauseCount>{
      {{0.10, 0.15}, {0, 0}, {-0.02, 0.41}, {0, 0}, {0, 0}}};
  const Verdict v = explain_scaling(step_verdict_of(12.4), in);
  ASSERT_EQ(v.findings.size(), 1u);
  EXPECT_EQ(v.top().kind, "communication-bound");
  const std::array<LossComponent, kLossCauseCount> c = loss_components(in.loss);
  EXPECT_STREQ(c[2].def->key, "compute_slowdown");
  EXPECT_TRUE(c[2].within_noise());
  EXPECT_FALSE(c[2].beyond_noise());
  EXPECT_TRUE(c[0].beyond_noise());
  (*in.loss.intervals)[2] = {0.2, 0.25};
  EXPECT_EQ(explain_scaling(step_verdict_of(12.4), in).top().kind, "contention");
}

TEST(ScalingVerdict, StepFindingsOfOtherKindsFollowAndComputeBoundGoes) {
  VerdictInput step;
  step.group = base_step();
  step.group[Phase::kInput] = 8;  // 20% of the step on one device too: not a loss
  step.device_busy_ms = 20;       // idle half the step
  const Verdict with_loss = explain_scaling(diagnose(step), contended_point());
  ASSERT_EQ(with_loss.findings.size(), 4u);
  EXPECT_EQ(with_loss.findings[0].kind, "contention");
  EXPECT_EQ(with_loss.findings[1].kind, "communication-bound");
  EXPECT_EQ(with_loss.findings[2].kind, "host-bound");
  EXPECT_EQ(with_loss.findings[3].kind, "input-bound");

  // Nothing lost beyond the threshold: the step verdict stands, compute-bound included.
  ScalingInput small;
  small.loss.share(LossCause::kAllReduce) = 0.03;
  small.loss.share(LossCause::kContention) = 0.04;
  const Verdict healthy = explain_scaling(step_verdict_of(3), small);
  ASSERT_EQ(healthy.findings.size(), 1u);
  EXPECT_EQ(healthy.top().kind, "compute-bound");
  EXPECT_FALSE(find(explain_scaling(step_verdict_of(3), contended_point()), "compute-bound"));
}

TEST(ScalingVerdict, ContentionOnCpuCountsThreadsAgainstCores) {
  ScalingInput in = contended_point();
  in.threads = ThreadBudget{.replicas = 2,
                            .compute_per_replica = 1,
                            .input_per_replica = 1,
                            .communication_per_replica = 2,
                            .usable_cores = 2};
  const Finding f = explain_scaling(step_verdict_of(12.4), in).top();
  EXPECT_NE(f.explanation.find("; 2 replicas x (1 compute + 1 input + 2 communication threads) "
                               "= 8 threads on 2 usable cores"),
            std::string::npos)
      << f.explanation;
  EXPECT_DOUBLE_EQ(f.numbers.at("threads"), 8);
  EXPECT_DOUBLE_EQ(f.numbers.at("usable_cores"), 2);
}

// A sweep runs more compute threads than cores only with --oversubscribe; such a point's
// verdict says so first, whatever its shares, and one within the cores does not.
TEST(ScalingVerdict, ComputeThreadsBeyondTheCoresAreTheFirstFinding) {
  ScalingInput in = contended_point();
  in.loss.lost = 0.4;
  in.threads = ThreadBudget{.replicas = 2,
                            .compute_per_replica = 2,
                            .input_per_replica = 1,
                            .communication_per_replica = 1,
                            .usable_cores = 2};
  const Verdict v = explain_scaling(step_verdict_of(12.4), in);
  ASSERT_GE(v.findings.size(), 2u);
  EXPECT_EQ(v.top().kind, "oversubscribed");
  EXPECT_EQ(v.top().severity, kSeverityHigh);
  EXPECT_DOUBLE_EQ(v.top().share, 0.4);
  EXPECT_DOUBLE_EQ(v.top().numbers.at("threads"), 4);
  EXPECT_DOUBLE_EQ(v.top().numbers.at("usable_cores"), 2);
  EXPECT_NE(v.top().explanation.find("2 replicas x 2 compute threads = 4 threads on 2 usable "
                                     "cores"),
            std::string::npos)
      << v.top().explanation;
  EXPECT_EQ(v.findings[1].kind, "contention");  // the rest as before
  // Input and communication threads beyond the cores do not count: the sweep allows them.
  in.threads->compute_per_replica = 1;
  EXPECT_FALSE(find(explain_scaling(step_verdict_of(12.4), in), "oversubscribed"));
  in.threads->usable_cores = 0;  // not recorded
  in.threads->compute_per_replica = 8;
  EXPECT_FALSE(find(explain_scaling(step_verdict_of(12.4), in), "oversubscribed"));
}

TEST(EfficiencyLoss, WeakScalingSplitsTheLossIntoKnownShares) {
  // 1 device: input 2 + h2d 1, compute 30, exposed 0, step 34 (1 ms unattributed).
  PhaseMedians one;
  one[Phase::kInput] = 2;
  one[Phase::kH2D] = 1;
  one[Phase::kForward] = 10;
  one[Phase::kBackward] = 18;
  one[Phase::kOptimizer] = 2;
  one.step_ms = 34;
  // At N: replicas compute 31, 31, 32, 35 (median 31.5); the group (slowest per step)
  // computes 34, waits 4 + 1 for input, 5 for all-reduce; step 50.
  const auto replicas = replicas_with_compute({31, 35, 31, 32});
  PhaseMedians group = one;
  group[Phase::kInput] = 4;
  group[Phase::kForward] = 14;
  group[Phase::kAllReduce] = 9;
  group[Phase::kAllReduceExposed] = 5;
  group.step_ms = 50;
  const LossBreakdown b = efficiency_loss(one, replicas, group, /*ideal_step_ms=*/34);
  EXPECT_DOUBLE_EQ(b.efficiency, 34.0 / 50.0);
  EXPECT_DOUBLE_EQ(b.lost, 16.0 / 50.0);
  EXPECT_DOUBLE_EQ(b.share(LossCause::kAllReduce), 5.0 / 50.0);
  EXPECT_DOUBLE_EQ(b.share(LossCause::kInput), 2.0 / 50.0);
  EXPECT_DOUBLE_EQ(b.share(LossCause::kContention), 1.5 / 50.0);
  EXPECT_DOUBLE_EQ(b.share(LossCause::kStragglers), 2.5 / 50.0);
  // 16 - (5 + 2 + 1.5 + 2.5) = 5 ms that no phase accounts for.
  EXPECT_NEAR(b.share(LossCause::kOther), 5.0 / 50.0, 1e-15);
  EXPECT_NEAR(std::accumulate(b.shares.begin(), b.shares.end(), 0.0), 1.0 - b.efficiency, 1e-12);
}

TEST(EfficiencyLoss, StrongScalingScalesTheBaseline) {
  // Global batch fixed over 4 devices: ideal step 40 / 4 = 10, ideal compute 32 / 4 = 8,
  // ideal input 4 / 4 = 1.
  PhaseMedians one;
  one[Phase::kInput] = 4;
  one[Phase::kForward] = 12;
  one[Phase::kBackward] = 16;
  one[Phase::kOptimizer] = 4;
  one.step_ms = 40;
  std::vector<PhaseMedians> replicas(4);
  for (PhaseMedians& r : replicas) {
    r[Phase::kForward] = 4;
    r[Phase::kBackward] = 4;
    r[Phase::kOptimizer] = 1;  // compute 9
  }
  PhaseMedians group = replicas[0];
  group[Phase::kInput] = 1.5;
  group[Phase::kAllReduceExposed] = 3;
  group.step_ms = 16;
  const LossBreakdown b = efficiency_loss(one, replicas, group, 40.0 / 4);
  EXPECT_DOUBLE_EQ(b.efficiency, 10.0 / 16.0);
  EXPECT_DOUBLE_EQ(b.share(LossCause::kAllReduce), 3.0 / 16.0);
  EXPECT_DOUBLE_EQ(b.share(LossCause::kInput), 0.5 / 16.0);
  EXPECT_DOUBLE_EQ(b.share(LossCause::kContention), 1.0 / 16.0);
  EXPECT_DOUBLE_EQ(b.share(LossCause::kStragglers), 0.0);
  EXPECT_NEAR(b.share(LossCause::kOther), 1.5 / 16.0, 1e-15);
}

TEST(EfficiencyLoss, SharesSumExactlyEvenWhenPhasesGetFaster) {
  std::mt19937_64 gen(5);
  std::uniform_real_distribution<double> u(0.1, 20.0);
  const auto random_phases = [&] {
    PhaseMedians m;
    for (const PhaseDef& d : kPhases) m[d.phase] = u(gen);
    return m;
  };
  for (int t = 0; t < 100; ++t) {
    PhaseMedians one = random_phases();
    one.step_ms = one.exposed_sum_ms();
    std::vector<PhaseMedians> replicas;
    for (int r = 0; r < 3; ++r) replicas.push_back(random_phases());
    PhaseMedians group = random_phases();
    group.step_ms = 5 * u(gen);
    const LossBreakdown b = efficiency_loss(one, replicas, group, one.step_ms);
    EXPECT_NEAR(std::accumulate(b.shares.begin(), b.shares.end(), 0.0), 1.0 - b.efficiency, 1e-12);
  }
  // A phase that got faster gives a negative share, not a clamped one.
  PhaseMedians one = base_step();
  one[Phase::kInput] = 6;
  one.step_ms = 36;
  PhaseMedians group = base_step();
  group[Phase::kInput] = 2;
  group.step_ms = 40;
  const LossBreakdown b = efficiency_loss(one, {group}, group, 36);
  EXPECT_DOUBLE_EQ(b.share(LossCause::kInput), -4.0 / 40.0);
  EXPECT_NEAR(b.share(LossCause::kOther), 8.0 / 40.0, 1e-15);
}

TEST(EfficiencyLoss, RejectsBadInput) {
  const PhaseMedians p = base_step();
  EXPECT_THROW(efficiency_loss(p, {}, p, 40), Error);
  EXPECT_THROW(efficiency_loss(p, {p}, p, 0), Error);
  EXPECT_THROW(efficiency_loss(PhaseMedians{}, {p}, p, 40), Error);
  EXPECT_THROW(efficiency_loss(p, {p}, PhaseMedians{}, 40), Error);
}

}  // namespace
}  // namespace scalescope
