// Time to accuracy in sweep reports: the repeats' medians, the speedup against one device and
// its exact split into hardware × statistical, and the records' JSON.
#include "reports/analysis/time_to_target.h"

#include <gtest/gtest.h>

#include <vector>

#include "reports/sweep_report.h"
#include "tests/reports/sweep_fixtures.h"
#include "tests/test_util.h"

namespace scalescope {
namespace {

TargetRecord reached(int64_t step, int64_t global_batch, double train_ms) {
  return {.metric = "accuracy",
          .value = 0.8,
          .reached = true,
          .step = step,
          .samples = step * global_batch,
          .epochs = static_cast<double>(step * global_batch) / 1000.0,
          .train_ms = train_ms,
          .wall_ms = train_ms * 1.5};
}

TEST(TimeToTarget, MediansOverTheRepeatsThatReachedIt) {
  TargetRecord missed = reached(300, 32, 9000.0);
  missed.reached = false;
  const std::vector<TargetRecord> runs = {reached(100, 32, 1000.0), reached(120, 32, 1400.0),
                                          missed};
  const TimeToTarget t = summarize_targets(runs);
  EXPECT_EQ(t.repeats, 3);
  EXPECT_EQ(t.reached, 2);
  EXPECT_FALSE(t.all_reached());
  EXPECT_DOUBLE_EQ(t.steps, 110.0);
  EXPECT_DOUBLE_EQ(t.samples, 110.0 * 32);
  EXPECT_DOUBLE_EQ(t.train_s, 1.2);
  EXPECT_DOUBLE_EQ(t.wall_s, 1.8);
  const std::vector<TargetRecord> other = {reached(100, 32, 1000.0), TargetRecord{.metric = "loss",
                                                                                  .value = 0.5,
                                                                                  .reached = true,
                                                                                  .step = 1,
                                                                                  .samples = 1,
                                                                                  .epochs = 1.0,
                                                                                  .train_ms = 1.0,
                                                                                  .wall_ms = 1.0}};
  EXPECT_CONTAINS(testing_util::error_of([&] { summarize_targets(other); }), "different targets");
}

TEST(TimeToTarget, TheSpeedupIsHardwareTimesStatistical) {
  // One device: 100 steps of 32 in 2 s. Two: 60 steps of 64 (1.2x the samples) in 1.6 s.
  TimeToTarget one = summarize_targets(std::vector<TargetRecord>{reached(100, 32, 2000.0)});
  TimeToTarget two = summarize_targets(std::vector<TargetRecord>{reached(60, 64, 1600.0)});
  compare_targets(two, one);
  ASSERT_TRUE(two.speedup && two.hardware && two.statistical);
  EXPECT_DOUBLE_EQ(*two.speedup, 1.25);
  EXPECT_DOUBLE_EQ(*two.statistical, 3200.0 / 3840.0);
  EXPECT_DOUBLE_EQ(*two.hardware, 1.25 / (3200.0 / 3840.0));  // 2400 vs 1600 samples/s
  two.predicted_statistical = 0.8;
  EXPECT_EQ(speedup_text(two), "1.25x = 1.50x hardware × 83% statistical (B_noise predicted 80%)");
  // A run that missed the target: no speedup, and why.
  TargetRecord missed = reached(60, 64, 1600.0);
  missed.reached = false;
  TimeToTarget failed = summarize_targets(std::vector<TargetRecord>{missed});
  compare_targets(failed, one);
  EXPECT_FALSE(failed.speedup.has_value());
  EXPECT_EQ(speedup_text(failed), "no speedup: 0 of 1 runs reached the target");
}

TEST(TimeToTarget, RepeatsKeepTheirTargetInTheJsonAndBadOnesAreRefused) {
  testing_util::PointSpec one_spec;
  SweepPoint one = testing_util::make_point(one_spec);
  testing_util::PointSpec two_spec;
  two_spec.devices = 2;
  SweepPoint two = testing_util::make_point(two_spec);
  for (RepeatRecord& r : one.repeats) r.target = reached(100, 32, 2000.0);
  for (RepeatRecord& r : two.repeats) r.target = reached(60, 64, 1600.0);
  const SweepReport r = testing_util::report_of({one, two});
  ASSERT_TRUE(r.points[1].summary.time_to_target.has_value());
  EXPECT_DOUBLE_EQ(*r.points[1].summary.time_to_target->speedup, 1.25);
  const nlohmann::json j = to_json(r);
  EXPECT_DOUBLE_EQ(j["points"][1]["summary"]["time_to_target"]["speedup"].get<double>(), 1.25);
  const SweepReport back = sweep_report_from_json(j, "r.json");
  ASSERT_TRUE(back.points[1].repeats[0].target.has_value());
  EXPECT_EQ(back.points[1].repeats[0].target->step, 60);
  EXPECT_DOUBLE_EQ(*back.points[1].summary.time_to_target->speedup, 1.25);

  nlohmann::json bad = j;
  bad["points"][1]["repeats"][0]["target"]["metric"] = "f1";
  EXPECT_CONTAINS(testing_util::error_of([&] { sweep_report_from_json(bad, "bad.json"); }),
                  "'f1' is not accuracy or loss");
  bad = j;
  bad["points"][1]["repeats"][0]["target"]["wall_ms"] = 1.0;
  EXPECT_CONTAINS(testing_util::error_of([&] { sweep_report_from_json(bad, "bad.json"); }),
                  "wall_ms");
}

}  // namespace
}  // namespace scalescope
