// The loss scaler's rule (PyTorch GradScaler's, with its defaults): what each step's verdict
// does to the scale, and the error when no scale can help any more.
#include "harness/trainer/loss_scaler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/error.h"
#include "tests/test_util.h"

namespace scalescope {
namespace {

TEST(LossScaler, StartsAtGradScalersDefaults) {
  const LossScaler s;
  EXPECT_EQ(s.scale(), 65536.0f);
  EXPECT_EQ(s.config().growth_factor, 2.0f);
  EXPECT_EQ(s.config().backoff_factor, 0.5f);
  EXPECT_EQ(s.config().growth_interval, 2000);
  EXPECT_TRUE(s.skipped_steps().empty());
}

TEST(LossScaler, AnOverflowSkipsTheStepAndHalvesTheScale) {
  LossScaler s;
  EXPECT_FALSE(s.update(1, false));
  EXPECT_TRUE(s.update(2, true));
  EXPECT_EQ(s.scale(), 32768.0f);
  EXPECT_FALSE(s.update(3, false));
  EXPECT_TRUE(s.update(4, true));
  EXPECT_EQ(s.scale(), 16384.0f);
  EXPECT_EQ(s.skipped_steps(), (std::vector<int64_t>{2, 4}));
}

// Growth needs `growth_interval` clean steps in a row; an overflow starts the count again.
TEST(LossScaler, GrowsAfterEachIntervalOfCleanSteps) {
  LossScaler s({.initial_scale = 8.0f, .growth_interval = 3});
  int64_t step = 0;
  for (int i = 0; i < 2; ++i) s.update(++step, false);
  EXPECT_EQ(s.scale(), 8.0f);
  s.update(++step, true);  // the count restarts
  EXPECT_EQ(s.scale(), 4.0f);
  for (int i = 0; i < 2; ++i) s.update(++step, false);
  EXPECT_EQ(s.scale(), 4.0f);
  s.update(++step, false);
  EXPECT_EQ(s.scale(), 8.0f);
  for (int i = 0; i < 3; ++i) s.update(++step, false);
  EXPECT_EQ(s.scale(), 16.0f);
}

TEST(LossScaler, NeverGrowsPastFloat) {
  const float big = std::numeric_limits<float>::max() / 1.5f;
  LossScaler s({.initial_scale = big, .growth_interval = 1});
  s.update(1, false);
  EXPECT_EQ(s.scale(), big);
}

// Overflow after overflow until the scale is below fp16's smallest value: no gradient can be
// represented any more, so the run stops with the steps that overflowed instead of going on
// without updates.
TEST(LossScaler, StopsWhenEveryStepOverflowsWhateverTheScale) {
  LossScaler s({.initial_scale = 1.0f});
  s.update(1, false);
  for (int64_t step = 2; step <= 25; ++step) ASSERT_TRUE(s.update(step, true)) << step;
  EXPECT_CONTAINS(testing_util::error_of([&] { s.update(26, true); }),
                  "overflowed in every step from step 2 to 26");
}

// A checkpoint's state: the scale and the clean steps counted towards the next growth.
TEST(LossScaler, GoesOnFromARestoredState) {
  LossScaler s({.growth_interval = 3});
  s.restore(512.0f, 2);
  EXPECT_EQ(s.scale(), 512.0f);
  s.update(1, false);
  EXPECT_EQ(s.scale(), 1024.0f);
  EXPECT_EQ(s.clean_steps(), 0);
  EXPECT_CONTAINS(testing_util::error_of([&] { s.restore(0.0f, 0); }), "cannot go on training");
  EXPECT_CONTAINS(testing_util::error_of([&] { s.restore(1.0f, 3); }),
                  "not below the growth interval 3");
}

TEST(LossScaler, RefusesAScaleOrRuleThatCannotWork) {
  for (const float bad : {0.0f, -1.0f, std::numeric_limits<float>::infinity()}) {
    EXPECT_CONTAINS(testing_util::error_of([&] { LossScaler({.initial_scale = bad}); }),
                    "must be positive");
  }
  EXPECT_THROW(LossScaler({.backoff_factor = 1.0f}), Error);
  EXPECT_THROW(LossScaler({.growth_factor = 1.0f}), Error);
  EXPECT_THROW(LossScaler({.growth_interval = 0}), Error);
}

}  // namespace
}  // namespace scalescope
