// The options of a run: every bad value refused before any work, naming it; the learning
// rate's scaling rules and warm-up.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "harness/trainer/options.h"
#include "tests/test_util.h"

namespace scalescope {
namespace {

TEST(TrainOptions, BadValuesAreRefusedBeforeWorkNamingThem) {
  const auto refused = [](TrainOptions o, const std::string& fragment) {
    try {
      validate(o);
      ADD_FAILURE() << "accepted; expected an error about " << fragment;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  TrainOptions o;
  o.batch = 0;
  refused(o, "batch 0 must be a positive number of samples");
  o = TrainOptions{};
  o.steps = -3;
  refused(o, "steps -3");
  o = TrainOptions{};
  o.model = "nope";
  refused(o, "unknown model 'nope'");
  o = TrainOptions{};
  o.devices = "cpu:x";
  refused(o, "cpu:x");
  o = TrainOptions{};
  o.optimizer.lr = -1.0f;
  refused(o, "lr -1");
  o = TrainOptions{};
  o.threads = -2;
  refused(o, "threads -2");
  o = TrainOptions{};
  o.threads = 5000;  // libgomp exited the process, "Thread creation failed"
  refused(o, "threads 5000 must be 0 (automatic) or between 1 and 4096");
  o = TrainOptions{};
  o.devices = "cpu:2";
  o.threads = 2049;
  refused(o, "threads 2049: 2 devices in this process × 2049 threads need 4098 threads");
  o.threads = 2048;
  EXPECT_NO_THROW(validate(o));
  o = TrainOptions{};
  o.optimizer.momentum = 1.0f;  // refused only inside the replicas, after the data was read
  refused(o, "momentum 1 must be in [0, 1)");
}

// Unset by default: deterministic algorithms preferred, not required, so that a layer without
// one within the workspace limit runs (and is named) instead of failing the run.
TEST(TrainOptions, DeterminismIsPreferredByDefaultRequiredOrOffWhenAskedFor) {
  TrainOptions o;
  EXPECT_EQ(determinism_of(o), Determinism::kPreferred);
  o.deterministic = true;
  EXPECT_EQ(determinism_of(o), Determinism::kRequired);
  o.deterministic = false;
  EXPECT_EQ(determinism_of(o), Determinism::kOff);
}

TEST(TrainOptions, BatchesMustSplitOverTheDevicesAndMicroBatches) {
  TrainOptions o;
  o.model = "dense-100";
  o.devices = "cpu:3";
  o.global_batch = 100;
  EXPECT_CONTAINS(testing_util::error_of([&] { validate(o); }),
                  "global_batch 100 does not divide over 3 device(s)");
  o.global_batch = 96;
  o.accumulation = 5;
  EXPECT_CONTAINS(testing_util::error_of([&] { validate(o); }), "multiple of 15");
  o.global_batch = 0;
  o.accumulation = 0;
  EXPECT_CONTAINS(testing_util::error_of([&] { validate(o); }), "accumulate 0");
  o.accumulation = 1;
  o.steps = -3;
  EXPECT_CONTAINS(testing_util::error_of([&] { validate(o); }), "steps -3");
  o.steps = 5;
  o.bucket_cap_mb = 0;
  EXPECT_CONTAINS(testing_util::error_of([&] { validate(o); }), "bucket_cap_mb 0");
  o.bucket_cap_mb = 25;
  o.check_every = -1;
  EXPECT_CONTAINS(testing_util::error_of([&] { validate(o); }), "check_every -1");
  o.check_every = 10;
  o.global_batch = 96;
  EXPECT_EQ(per_replica_batch(o, 3), 32);
}

TEST(LearningRate, ScalingRulesAndWarmup) {
  EXPECT_DOUBLE_EQ(scheduled_lr(0.1, LrScaling::kNone, 8, 0, 1), 0.1);
  EXPECT_DOUBLE_EQ(scheduled_lr(0.1, LrScaling::kLinear, 8, 0, 1), 0.8);
  EXPECT_DOUBLE_EQ(scheduled_lr(0.1, LrScaling::kSqrt, 4, 0, 1), 0.2);
  // Warm-up: linear from the base rate to the scaled one over 4 steps, then constant.
  EXPECT_DOUBLE_EQ(scheduled_lr(0.1, LrScaling::kLinear, 5, 4, 1), 0.1 + 0.4 * 0.25);
  EXPECT_DOUBLE_EQ(scheduled_lr(0.1, LrScaling::kLinear, 5, 4, 2), 0.1 + 0.4 * 0.5);
  EXPECT_DOUBLE_EQ(scheduled_lr(0.1, LrScaling::kLinear, 5, 4, 4), 0.5);
  EXPECT_DOUBLE_EQ(scheduled_lr(0.1, LrScaling::kLinear, 5, 4, 100), 0.5);
  EXPECT_EQ(parse_lr_scaling("sqrt"), LrScaling::kSqrt);
  EXPECT_CONTAINS(testing_util::error_of([] { parse_lr_scaling("cubic"); }), "cubic");
}

}  // namespace
}  // namespace scalescope
