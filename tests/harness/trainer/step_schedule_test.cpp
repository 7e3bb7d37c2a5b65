// Which steps of a replica are warm-up and which are measured, fixed or adaptive.
#include <gtest/gtest.h>

#include "harness/trainer/step_schedule.h"

namespace scalescope {
namespace {

TEST(StepSchedule, AFixedWarmUpPrecedesTheMeasuredSteps) {
  TrainOptions o;
  o.warmup_steps = 3;
  const StepSchedule s(o, 10);
  EXPECT_FALSE(s.deciding());
  EXPECT_EQ(s.last_step(), 10);
  EXPECT_EQ(s.warmup_steps(), 3);
  EXPECT_EQ(s.measured(3), 0);
  EXPECT_EQ(s.measured(4), 1);
  EXPECT_EQ(s.measured(10), 7);
  EXPECT_TRUE(s.settled());
}

TEST(StepSchedule, AShortRunKeepsOneMeasuredStep) {
  TrainOptions o;
  o.warmup_steps = 5;
  const StepSchedule s(o, 2);
  EXPECT_EQ(s.warmup_steps(), 1);
  EXPECT_EQ(s.measured(2), 1);
}

TrainOptions adaptive(int64_t max_steps, int64_t steps) {
  TrainOptions o;
  o.steps = steps;
  o.adaptive_warmup.enabled = true;
  o.adaptive_warmup.max_steps = max_steps;
  o.adaptive_warmup.steady = {.window = 2, .tolerance = 0.05, .min_steps = 1};
  return o;
}

TEST(StepSchedule, AnAdaptiveWarmUpEndsWhenTheStepTimeSettles) {
  const TrainOptions o = adaptive(40, 5);
  StepSchedule s(o, 0);
  EXPECT_TRUE(s.deciding());
  EXPECT_EQ(s.last_step(), 45);  // the most it could be until decided
  const double times[] = {50.0, 30.0, 10.0, 10.0, 10.0, 10.0, 10.0, 10.0, 10.0, 10.0};
  int64_t step = 0;
  while (s.deciding()) {
    ASSERT_LT(step, 10);
    EXPECT_EQ(s.measured(step + 1), 0);
    s.observe(step + 1, times[step]);
    ++step;
  }
  EXPECT_TRUE(s.settled());
  EXPECT_EQ(s.warmup_steps(), step);
  EXPECT_EQ(s.last_step(), step + 5);
  EXPECT_EQ(s.measured(step + 1), 1);
  EXPECT_LT(step, 10);  // settled, not bounded
}

TEST(StepSchedule, AnAdaptiveWarmUpStopsAtItsBoundUnsettled) {
  const TrainOptions o = adaptive(4, 3);
  StepSchedule s(o, 0);
  for (int64_t step = 1; step <= 4; ++step) s.observe(step, step % 2 == 0 ? 10.0 : 30.0);
  EXPECT_FALSE(s.deciding());
  EXPECT_FALSE(s.settled());
  EXPECT_EQ(s.warmup_steps(), 4);
  EXPECT_EQ(s.last_step(), 7);
}

}  // namespace
}  // namespace scalescope
