// One run of the trainer end to end: it learns, it is deterministic, it resumes from a
// checkpoint, it reads real data and refuses data that does not fit the model.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "core/error.h"
#include "harness/trainer/trainer.h"
#include "models/checkpoint.h"
#include "tests/test_util.h"

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

constexpr const char* kFashionMnist = "/usr/share/datasets/fashion-mnist";
constexpr const char* kFashionMnistSpec = "idx:/usr/share/datasets/fashion-mnist";

bool have_fashion_mnist() {
  return std::filesystem::exists(std::filesystem::path(kFashionMnist) /
                                 "train-labels-idx1-ubyte.gz");
}

TEST(Train, CifarCnnLearnsFashionMnistInOneEpoch) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "Debian's dataset-fashion-mnist is not installed";
  TrainOptions o;
  o.model = "cifar-cnn";  // built for 28x28x1 from the data
  o.data.spec = kFashionMnistSpec;
  o.batch = 64;
  o.steps = 0;
  o.epochs = 1;
  const RunReport r = train(o);
  EXPECT_EQ(r.steps.size(), 60000u / 64u);  // the remainder is dropped
  ASSERT_EQ(r.evals.size(), 1u);
  EXPECT_EQ(r.evals[0].epoch, 1);
  EXPECT_GE(r.evals[0].accuracy, 0.80) << "test loss " << r.evals[0].loss;
  EXPECT_LT(r.evals[0].loss, 0.6);
  EXPECT_EQ(r.input_shape, "[28, 28, 1]");
}

// With the weights fixed (lr 0), a step's loss tells which samples it read: on two global
// batches of data, file order repeats steps 0-1 in 2-3 on 1 and on 2 replicas; shuffling
// draws a new order each epoch.
TEST(Train, NoShuffleReadsTheFileInOrderEveryEpoch) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "Debian's dataset-fashion-mnist is not installed";
  TrainOptions o;
  o.model = "cifar-cnn";
  o.data.spec = kFashionMnistSpec;
  o.data.train_samples = 64;
  o.data.shuffle = false;
  o.optimizer.kind = OptimizerKind::kSgd;
  o.optimizer.lr = 0.0f;
  o.batch = 32;
  o.steps = 4;
  o.eval = false;
  const RunReport ordered = train(o);
  ASSERT_EQ(ordered.steps.size(), 4u);
  EXPECT_NE(ordered.steps[0].loss, ordered.steps[1].loss);
  EXPECT_EQ(ordered.steps[0].loss, ordered.steps[2].loss);
  EXPECT_EQ(ordered.steps[1].loss, ordered.steps[3].loss);

  o.devices = "cpu:2";
  o.batch = 16;
  const RunReport two = train(o);
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(two.steps[i].loss, ordered.steps[i].loss, 1e-5);

  o.devices = "cpu:1";
  o.batch = 32;
  o.data.shuffle = true;
  const RunReport shuffled = train(o);
  EXPECT_NE(shuffled.steps[0].loss, shuffled.steps[2].loss);
}

TEST(Train, DeviceResidentSyntheticDataHasNoInputCost) {
  TrainOptions o;
  o.model = "dense-100";
  o.data.spec = "synthetic:device";
  o.batch = 16;
  o.steps = 30;
  o.eval = false;
  const RunReport r = train(o);
  // The input phases are empty ranges: only the moment between two event records. Measured
  // steps, by their median: the first steps carry first-use costs (26 µs seen under ASan).
  std::vector<double> input_ms;
  for (size_t i = static_cast<size_t>(r.warmup_steps); i < r.steps.size(); ++i) {
    input_ms.push_back(r.steps[i].input_ms);
  }
  ASSERT_FALSE(input_ms.empty());
  std::nth_element(input_ms.begin(), input_ms.begin() + input_ms.size() / 2, input_ms.end());
  EXPECT_LT(input_ms[input_ms.size() / 2], 0.01);
  EXPECT_LT(r.steps.back().loss, r.steps.front().loss);  // one batch, learnt by heart
}

TEST(Train, PartialEpochEndsWithAnEvaluation) {
  TrainOptions o;
  o.model = "dense-100";
  o.batch = 32;
  o.steps = 40;
  const RunReport r = train(o);
  ASSERT_EQ(r.evals.size(), 1u);
  EXPECT_EQ(r.evals[0].step, 40);
  EXPECT_GT(r.evals[0].accuracy, 0.2);  // 10 classes: well above chance after 40 steps
}

TEST(Train, DataThatDoesNotFitTheModelIsRefused) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "Debian's dataset-fashion-mnist is not installed";
  using testing_util::error_of;
  TrainOptions o;
  o.data.spec = kFashionMnistSpec;
  o.model = "mlp-41m";
  EXPECT_CONTAINS(error_of([&] { train(o); }), "cannot take the samples");
  o.model = "cifar-cnn";
  o.batch = 70000;
  EXPECT_CONTAINS(error_of([&] { train(o); }), "larger than the dataset");
  o.batch = 64;
  o.data.spec = "idx:/nonexistent/dir";
  EXPECT_CONTAINS(error_of([&] { train(o); }), "/nonexistent/dir");
  o.data.spec = "imagenet:/x";
  EXPECT_CONTAINS(error_of([&] { validate(o); }), "imagenet:/x");
  o.data.spec = "synthetic";
  o.data.workers = 0;
  EXPECT_CONTAINS(error_of([&] { train(o); }), "workers 0");
  o.data.workers = 1;
  o.steps = 10;
  o.epochs = 2;
  EXPECT_CONTAINS(error_of([&] { validate(o); }), "not both");
}

}  // namespace
}  // namespace scalescope
