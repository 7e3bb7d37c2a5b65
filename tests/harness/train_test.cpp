#include <gtest/gtest.h>

#include <cstdio>
#include <numeric>
#include <string>

#include "core/error.h"
#include "harness/trainer/single_trainer.h"
#include "models/checkpoint.h"

namespace scalescope {
namespace {

double mean_loss(const RunReport& r, size_t begin, size_t end) {
  double sum = 0.0;
  for (size_t i = begin; i < end; ++i) sum += r.steps[i].loss;
  return sum / static_cast<double>(end - begin);
}

TEST(Train, CifarCnnLossFallsClearlyWithin200Steps) {
  TrainOptions o;
  o.model = "cifar-cnn";
  o.batch = 32;
  o.steps = 200;
  const RunReport r = train(o);
  ASSERT_EQ(r.steps.size(), 200u);
  const double first = mean_loss(r, 0, 10);
  const double last = mean_loss(r, 190, 200);
  EXPECT_GT(first, 1.8);  // ~ln(10) at the start: 10 balanced classes
  EXPECT_LT(last, 0.25 * first) << "first " << first << " last " << last;
  for (const StepRecord& s : r.steps) {
    EXPECT_GT(s.step_ms, 0.0);
    EXPECT_GE(s.input_ms, 0.0);
    EXPECT_LE(s.input_ms, s.step_ms);
  }
}

TEST(Train, SameSeedSameLosses) {
  TrainOptions o;
  o.model = "dense-100";
  o.batch = 16;
  o.steps = 20;
  const RunReport a = train(o);
  const RunReport b = train(o);
  for (size_t i = 0; i < a.steps.size(); ++i) EXPECT_EQ(a.steps[i].loss, b.steps[i].loss);
}

TEST(Train, ResumesFromACheckpointAsIfNeverStopped) {
  const std::string path = testing::TempDir() + "/train_resume.safetensors";
  TrainOptions o;
  o.model = "dense-100";
  o.batch = 16;
  o.optimizer.kind = OptimizerKind::kAdam;
  o.steps = 40;
  o.save = path;
  const RunReport first = train(o);
  TrainOptions more = o;
  more.save.clear();
  more.load = path;
  const RunReport resumed = train(more);
  TrainOptions fresh = more;
  fresh.load.clear();
  const RunReport scratch = train(fresh);
  // The same seed gives the same data and initial weights: a fresh run repeats the first.
  EXPECT_EQ(scratch.steps.front().loss, first.steps.front().loss);
  // The resumed run starts where the first ended, far below a fresh model on the same data.
  EXPECT_LT(resumed.steps.front().loss, 0.5 * first.steps.front().loss);
  std::remove(path.c_str());
  std::remove(optimizer_state_path(path).c_str());
}

TEST(Train, BadOptionsAreRefusedBeforeWork) {
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
  refused(o, "--batch 0");
  o = TrainOptions{};
  o.steps = -3;
  refused(o, "--steps -3");
  o = TrainOptions{};
  o.model = "nope";
  refused(o, "unknown model 'nope'");
  o = TrainOptions{};
  o.devices = "cpu:x";
  refused(o, "cpu:x");
  o = TrainOptions{};
  o.optimizer.lr = -1.0f;
  refused(o, "--lr -1");
  o = TrainOptions{};
  o.threads = -2;
  refused(o, "--threads -2");
}

TEST(Train, MissingCheckpointIsAnErrorNamingIt) {
  TrainOptions o;
  o.model = "dense-100";
  o.steps = 1;
  o.load = "/nonexistent/ckpt.safetensors";
  try {
    train(o);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/ckpt.safetensors"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace scalescope
