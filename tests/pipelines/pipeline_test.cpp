#include "pipelines/pipeline.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "core/check.h"
#include "tests/test_util.h"

namespace scalescope {
namespace {

using namespace std::chrono_literals;
using testing_util::error_of;
using Clock = std::chrono::steady_clock;

// A dataset whose samples say which index they are: value j of sample i is i (or i·1000 + j
// with `distinct`), its label is i mod classes (one-hot or index). It can fail at one index,
// and be slow, and it counts its reads and how many run at once.
class IndexDataset final : public Dataset {
 public:
  struct Options {
    int64_t size = 50;
    Shape shape{2, 2, 1};
    LabelSpec labels{LabelFormat::kClassIndex, 7};
    bool distinct = false;
    int64_t fail_at = -1;
    bool fail_with_std_exception = false;
    std::chrono::microseconds delay{0};
    // Delay of sample i: delay × (i mod 4), so batches finish out of order.
    bool vary_delay = false;
  };

  explicit IndexDataset(Options options) : o_(std::move(options)) {}

  std::string describe() const override {
    return fmt::format("index dataset ({} samples)", o_.size);
  }
  int64_t size() const override { return o_.size; }
  Shape sample_shape() const override { return o_.shape; }
  LabelSpec labels() const override { return o_.labels; }
  void read(int64_t index, float* input, float* label) const override {
    const int64_t now = active_.fetch_add(1) + 1;
    int64_t seen = max_active_.load();
    while (now > seen && !max_active_.compare_exchange_weak(seen, now)) {
    }
    reads_.fetch_add(1);
    struct Leave {
      std::atomic<int64_t>& active;
      ~Leave() { active.fetch_sub(1); }
    } leave{active_};

    if (index == o_.fail_at) {
      if (o_.fail_with_std_exception) throw std::runtime_error("the disk is on fire");
      throw_error(fmt::format("corrupt record {}", index));
    }
    const auto delay = o_.vary_delay ? o_.delay * (index % 4) : o_.delay;
    if (delay.count() > 0) std::this_thread::sleep_for(delay);
    const int64_t numel = o_.shape.numel();
    for (int64_t j = 0; j < numel; ++j) input[j] = value(index, j);
    const int64_t width = o_.labels.width();
    const int64_t label_value = index % o_.labels.classes;
    if (o_.labels.format == LabelFormat::kOneHot) {
      for (int64_t k = 0; k < width; ++k) label[k] = k == label_value ? 1.0f : 0.0f;
    } else {
      label[0] = static_cast<float>(label_value);
    }
  }
  float value(int64_t index, int64_t j) const {
    return static_cast<float>(o_.distinct ? index * 1000 + j : index);
  }
  int64_t reads() const { return reads_.load(); }
  int64_t max_active() const { return max_active_.load(); }

 private:
  Options o_;
  mutable std::atomic<int64_t> reads_{0};
  mutable std::atomic<int64_t> active_{0};
  mutable std::atomic<int64_t> max_active_{0};
};

struct Expected {
  int64_t epoch;
  int64_t step;
  std::vector<int64_t> indices;
};

// What replica `replica` must receive, batch by batch, straight from the sampler.
std::vector<Expected> expected_batches(const Sampler& sampler, int replica, int64_t first_epoch,
                                       int64_t count) {
  std::vector<Expected> out;
  for (int64_t k = 0; k < count; ++k) {
    const int64_t epoch = first_epoch + k / sampler.steps_per_epoch();
    const int64_t step = k % sampler.steps_per_epoch();
    const std::vector<int64_t> perm = sampler.permutation(epoch);
    Expected e{epoch, step, std::vector<int64_t>(static_cast<size_t>(sampler.per_replica_batch()))};
    sampler.replica_indices(perm, step, replica, e.indices);
    out.push_back(std::move(e));
  }
  return out;
}

// Checks that `batch` holds exactly the untransformed samples `indices` with their labels.
void expect_batch(const HostBatch& batch, const IndexDataset& data,
                  const std::vector<int64_t>& indices, const std::string& where) {
  const int64_t numel = data.sample_shape().numel();
  const LabelSpec labels = data.labels();
  ASSERT_EQ(batch.size, static_cast<int64_t>(indices.size())) << where;
  ASSERT_EQ(batch.sample_shape, data.sample_shape()) << where;
  ASSERT_EQ(batch.inputs.size(), indices.size() * static_cast<size_t>(numel)) << where;
  ASSERT_EQ(batch.labels.size(), indices.size() * static_cast<size_t>(labels.width())) << where;
  for (size_t i = 0; i < indices.size(); ++i) {
    for (int64_t j = 0; j < numel; ++j) {
      ASSERT_EQ(batch.inputs[i * static_cast<size_t>(numel) + static_cast<size_t>(j)],
                data.value(indices[i], j))
          << where << ", sample " << i << " (dataset index " << indices[i] << "), value " << j;
    }
    const int64_t label = indices[i] % labels.classes;
    const float* y = batch.labels.data() + i * static_cast<size_t>(labels.width());
    if (labels.format == LabelFormat::kOneHot) {
      for (int64_t k = 0; k < labels.width(); ++k) {
        ASSERT_EQ(y[k], k == label ? 1.0f : 0.0f) << where << ", sample " << i;
      }
    } else {
      ASSERT_EQ(y[0], static_cast<float>(label)) << where << ", sample " << i;
    }
  }
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Polls `done` for up to `limit`; true when it held.
template <class F>
bool wait_for(F done, std::chrono::milliseconds limit = 10s) {
  const auto until = Clock::now() + limit;
  while (!done()) {
    if (Clock::now() > until) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

// workers × queue depth
class PipelineOrder : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(PipelineOrder, DeliversTheSamplersIndicesInOrderAcrossEpochs) {
  const auto [workers, depth] = GetParam();
  IndexDataset::Options options;
  options.size = 50;
  options.delay = 20us;
  options.vary_delay = true;
  const IndexDataset data(options);
  const Sampler sampler(50, 3, 2, 17);  // G = 6: 8 steps per epoch, 2 dropped
  PipelineConfig config;
  config.workers = workers;
  config.queue_depth = depth;
  const int64_t first_epoch = 1;
  const int64_t count = 30;  // epochs 1 to 4, ending mid-epoch
  const std::vector<Expected> expected = expected_batches(sampler, 1, first_epoch, count);

  InputPipeline pipeline(data, sampler, 1, config, first_epoch);
  for (int64_t k = 0; k < count; ++k) {
    const Expected& e = expected[static_cast<size_t>(k)];
    const std::string where = fmt::format("batch {} (epoch {}, step {})", k, e.epoch, e.step);
    const HostBatch& batch = pipeline.next();
    EXPECT_EQ(pipeline.epoch(), e.epoch) << where;
    EXPECT_EQ(pipeline.step(), e.step) << where;
    expect_batch(batch, data, e.indices, where);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

INSTANTIATE_TEST_SUITE_P(WorkersAndDepths, PipelineOrder,
                         ::testing::Combine(::testing::Values(1, 2, 4), ::testing::Values(1, 3)),
                         [](const auto& info) {
                           return fmt::format("workers{}_depth{}", std::get<0>(info.param),
                                              std::get<1>(info.param));
                         });

TEST(Pipeline, EveryReplicaGetsItsShard) {
  // The replicas' pipelines together deliver each global batch exactly once.
  const IndexDataset data(IndexDataset::Options{});
  const Sampler sampler(50, 4, 3, 5);
  PipelineConfig config;
  config.workers = 2;
  std::vector<std::optional<InputPipeline>> pipelines(3);
  for (int r = 0; r < 3; ++r) pipelines[static_cast<size_t>(r)].emplace(data, sampler, r, config);
  for (int64_t step = 0; step < sampler.steps_per_epoch(); ++step) {
    std::set<int64_t> seen;
    for (auto& p : pipelines) {
      const HostBatch& batch = p->next();
      for (int64_t i = 0; i < batch.size; ++i) {
        seen.insert(static_cast<int64_t>(batch.inputs[static_cast<size_t>(i * 4)]));
      }
    }
    EXPECT_EQ(static_cast<int64_t>(seen.size()), sampler.global_batch()) << "step " << step;
  }
}

TEST(Pipeline, OneHotLabels) {
  IndexDataset::Options options;
  options.labels = LabelSpec{LabelFormat::kOneHot, 5, 1};
  options.shape = Shape{3};
  const IndexDataset data(options);
  const Sampler sampler(50, 8, 1, 3);
  PipelineConfig config;
  config.workers = 3;
  const std::vector<Expected> expected = expected_batches(sampler, 0, 0, 12);
  InputPipeline pipeline(data, sampler, 0, config);
  for (size_t k = 0; k < expected.size(); ++k) {
    expect_batch(pipeline.next(), data, expected[k].indices, fmt::format("batch {}", k));
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(Pipeline, AppliesTheTransformsPerSample) {
  IndexDataset::Options options;
  options.shape = Shape{4, 4, 2};
  options.distinct = true;
  const IndexDataset data(options);
  const Sampler sampler(50, 5, 2, 8);
  PipelineConfig config;
  config.workers = 3;
  config.seed = 99;
  config.transforms.mean = {10.0f, 20.0f};
  config.transforms.stddev = {2.0f, 4.0f};
  config.transforms.crop_padding = 1;
  config.transforms.flip = true;
  const int64_t count = 12;  // two epochs and a bit
  const std::vector<Expected> expected = expected_batches(sampler, 0, 3, count);
  InputPipeline pipeline(data, sampler, 0, config, 3);
  std::vector<float> sample(32);
  std::vector<float> label(1);
  std::vector<float> scratch(32);
  for (int64_t k = 0; k < count; ++k) {
    const Expected& e = expected[static_cast<size_t>(k)];
    const HostBatch& batch = pipeline.next();
    for (size_t i = 0; i < e.indices.size(); ++i) {
      data.read(e.indices[i], sample.data(), label.data());
      apply_transforms(config.transforms, data.sample_shape(), config.seed, e.epoch, e.indices[i],
                       sample.data(), scratch.data());
      const std::vector<float> got(batch.inputs.begin() + static_cast<std::ptrdiff_t>(i * 32),
                                   batch.inputs.begin() + static_cast<std::ptrdiff_t>(i * 32 + 32));
      ASSERT_EQ(got, sample) << "batch " << k << ", sample " << i;
      ASSERT_EQ(batch.labels[i], static_cast<float>(e.indices[i] % 7));
    }
  }
}

TEST(Pipeline, SlowDatasetFastConsumerKeepsTheOrder) {
  IndexDataset::Options options;
  options.delay = 300us;
  options.vary_delay = true;
  const IndexDataset data(options);
  const Sampler sampler(50, 4, 1, 23);
  PipelineConfig config;
  config.workers = 4;
  config.queue_depth = 2;
  const int64_t count = 40;
  const std::vector<Expected> expected = expected_batches(sampler, 0, 0, count);
  InputPipeline pipeline(data, sampler, 0, config);
  for (int64_t k = 0; k < count; ++k) {
    expect_batch(pipeline.next(), data, expected[static_cast<size_t>(k)].indices,
                 fmt::format("batch {}", k));
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(Pipeline, SlowConsumerKeepsTheOrder) {
  const IndexDataset data(IndexDataset::Options{});
  const Sampler sampler(50, 4, 1, 29);
  PipelineConfig config;
  config.workers = 4;
  config.queue_depth = 1;
  const int64_t count = 20;
  const std::vector<Expected> expected = expected_batches(sampler, 0, 0, count);
  InputPipeline pipeline(data, sampler, 0, config);
  for (int64_t k = 0; k < count; ++k) {
    std::this_thread::sleep_for(1ms);
    expect_batch(pipeline.next(), data, expected[static_cast<size_t>(k)].indices,
                 fmt::format("batch {}", k));
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(Pipeline, WorkersReadInParallel) {
  IndexDataset::Options options;
  options.delay = 2ms;
  const IndexDataset data(options);
  const Sampler sampler(50, 4, 1, 31);
  PipelineConfig config;
  config.workers = 4;
  config.queue_depth = 1;  // the depth must not limit how many workers fill batches
  InputPipeline pipeline(data, sampler, 0, config);
  for (int k = 0; k < 12; ++k) pipeline.next();
  EXPECT_GE(data.max_active(), 2) << "the workers never read concurrently";
}

TEST(Pipeline, ReusesItsBatchMemory) {
  const IndexDataset data(IndexDataset::Options{});
  const Sampler sampler(50, 4, 1, 37);
  PipelineConfig config;
  config.workers = 2;
  config.queue_depth = 2;
  InputPipeline pipeline(data, sampler, 0, config);
  std::set<const float*> buffers;
  for (int k = 0; k < 60; ++k) buffers.insert(pipeline.next().inputs.data());
  // The consumer's batch, queue_depth ready ones and one per worker.
  EXPECT_LE(buffers.size(), static_cast<size_t>(config.queue_depth + config.workers + 1));
}

TEST(Pipeline, LooksAheadABoundedNumberOfBatches) {
  const IndexDataset data(IndexDataset::Options{});
  const Sampler sampler(50, 2, 1, 41);
  PipelineConfig config;
  config.workers = 2;
  config.queue_depth = 1;
  const int64_t slots = config.queue_depth + config.workers + 1;
  const int64_t per_batch = sampler.per_replica_batch();
  InputPipeline pipeline(data, sampler, 0, config);
  // Before the first next(): every slot fills, then the workers wait.
  ASSERT_TRUE(wait_for([&] { return data.reads() >= slots * per_batch; }));
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(data.reads(), slots * per_batch);
  // Each next() after the first gives back one slot: one more batch is read.
  pipeline.next();
  pipeline.next();
  ASSERT_TRUE(wait_for([&] { return data.reads() >= (slots + 1) * per_batch; }));
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(data.reads(), (slots + 1) * per_batch);
}

TEST(Pipeline, DestroysPromptlyWhileWorkersWaitOnAFullQueue) {
  const IndexDataset data(IndexDataset::Options{});
  const Sampler sampler(50, 2, 1, 43);
  PipelineConfig config;
  config.workers = 4;
  config.queue_depth = 1;
  auto pipeline = std::make_unique<InputPipeline>(data, sampler, 0, config);
  pipeline->next();
  ASSERT_TRUE(wait_for([&] { return data.reads() >= 6 * 2; }));  // all 6 slots filled
  std::this_thread::sleep_for(20ms);
  const auto start = Clock::now();
  pipeline.reset();
  EXPECT_LT(seconds_since(start), 1.0);
}

TEST(Pipeline, DestroysPromptlyWhileWorkersRead) {
  IndexDataset::Options options;
  options.size = 200;
  options.delay = 20ms;
  const IndexDataset data(options);
  const Sampler sampler(200, 100, 1, 47);  // 2 s of reading per batch
  PipelineConfig config;
  config.workers = 2;
  auto pipeline = std::make_unique<InputPipeline>(data, sampler, 0, config);
  ASSERT_TRUE(wait_for([&] { return data.reads() >= 2; }));
  const auto start = Clock::now();
  pipeline.reset();
  // The workers stop between samples rather than finishing their 2 s batches.
  EXPECT_LT(seconds_since(start), 1.0);
}

TEST(Pipeline, DestroysPromptlyBeforeAnyNext) {
  const IndexDataset data(IndexDataset::Options{});
  const Sampler sampler(50, 4, 1, 53);
  for (int workers : {1, 3}) {
    PipelineConfig config;
    config.workers = workers;
    const auto start = Clock::now();
    { InputPipeline pipeline(data, sampler, 0, config); }
    EXPECT_LT(seconds_since(start), 1.0);
  }
}

// A read failing at the sample of batch 5: batches 0 to 4 arrive, then next() throws an
// error naming the sample, again on every later call, and destruction still returns.
void expect_failure_at_batch_5(bool std_exception, int workers, const std::string& cause) {
  const Sampler sampler(50, 3, 2, 59);  // 8 steps per epoch: batch 5 is in epoch 0
  const std::vector<Expected> expected = expected_batches(sampler, 1, 0, 6);
  const int64_t bad = expected[5].indices[1];
  IndexDataset::Options options;
  options.fail_at = bad;
  options.fail_with_std_exception = std_exception;
  const IndexDataset data(options);
  PipelineConfig config;
  config.workers = workers;
  config.queue_depth = 3;
  auto pipeline = std::make_unique<InputPipeline>(data, sampler, 1, config);
  for (size_t k = 0; k < 5; ++k) {
    expect_batch(pipeline->next(), data, expected[k].indices, fmt::format("batch {}", k));
  }
  for (int attempt = 0; attempt < 2; ++attempt) {
    const std::string message = error_of([&] { pipeline->next(); });
    EXPECT_CONTAINS(message, fmt::format("sample {}", bad));
    EXPECT_CONTAINS(message, "epoch 0, step 5");
    EXPECT_CONTAINS(message, cause);
  }
  const auto start = Clock::now();
  pipeline.reset();
  EXPECT_LT(seconds_since(start), 1.0);
}

TEST(Pipeline, ReadErrorIsRethrownFromNext) {
  expect_failure_at_batch_5(false, 1, fmt::format("corrupt record"));
  expect_failure_at_batch_5(false, 4, fmt::format("corrupt record"));
  expect_failure_at_batch_5(true, 3, "the disk is on fire");
}

TEST(Pipeline, ErrorsCarryTheRankOfTheReplica) {
  // Workers report with the rank of the thread that built the pipeline (the replica's).
  const Sampler sampler(50, 4, 1, 67);
  const std::vector<Expected> expected = expected_batches(sampler, 0, 0, 1);
  IndexDataset::Options options;
  options.fail_at = expected[0].indices[2];
  const IndexDataset data(options);
  set_thread_rank(3);
  std::string message;
  {
    InputPipeline pipeline(data, sampler, 0, PipelineConfig{});
    message = error_of([&] { pipeline.next(); });
  }
  set_thread_rank(-1);
  EXPECT_EQ(message.rfind("[rank 3] ", 0), 0u) << message;
  EXPECT_EQ(message.find("[rank 3]", 1), std::string::npos) << "rank given twice: " << message;
  EXPECT_CONTAINS(message, fmt::format("corrupt record {}", options.fail_at));
}

TEST(Pipeline, ErrorInTheFirstBatchAndDestroyWithoutNext) {
  const Sampler sampler(50, 4, 1, 61);
  const std::vector<Expected> expected = expected_batches(sampler, 0, 0, 1);
  IndexDataset::Options options;
  options.fail_at = expected[0].indices[0];
  const IndexDataset data(options);
  PipelineConfig config;
  config.workers = 4;
  {
    InputPipeline pipeline(data, sampler, 0, config);
    EXPECT_CONTAINS(error_of([&] { pipeline.next(); }),
                    fmt::format("sample {}", expected[0].indices[0]));
  }
  {
    // Failed before anyone asked: the destructor must not rethrow or hang.
    InputPipeline pipeline(data, sampler, 0, config);
    ASSERT_TRUE(wait_for([&] { return data.reads() > 0; }));
    std::this_thread::sleep_for(10ms);
  }
}

TEST(Pipeline, RejectsABadConfiguration) {
  const IndexDataset data(IndexDataset::Options{});
  const Sampler sampler(50, 4, 2, 1);
  const auto make = [&](PipelineConfig config, int replica = 0, int64_t first_epoch = 0) {
    return error_of([&] { InputPipeline pipeline(data, sampler, replica, config, first_epoch); });
  };
  PipelineConfig config;
  EXPECT_EQ(make(config), "<no error thrown>");
  config.workers = 0;
  EXPECT_CONTAINS(make(config), "pipeline workers 0");
  config.workers = 100000;
  EXPECT_CONTAINS(make(config), "pipeline workers 100000");
  config = PipelineConfig{};
  config.queue_depth = 0;
  EXPECT_CONTAINS(make(config), "queue depth 0");
  config = PipelineConfig{};
  config.transforms.mean = {0.0f, 0.0f};
  config.transforms.stddev = {1.0f, 1.0f};
  EXPECT_CONTAINS(make(config), "2 per-channel statistics");
  EXPECT_CONTAINS(make(PipelineConfig{}, 2), "replica 2");
  EXPECT_CONTAINS(make(PipelineConfig{}, -1), "replica -1");
  EXPECT_CONTAINS(make(PipelineConfig{}, 0, -1), "first epoch -1");
  const Sampler other(60, 4, 2, 1);
  EXPECT_CONTAINS(error_of([&] { InputPipeline pipeline(data, other, 0, PipelineConfig{}); }),
                  "covers 60 samples");

  PipelineConfig bad;
  bad.queue_depth = -2;
  EXPECT_CONTAINS(error_of([&] { validate(bad, Shape{2, 2, 1}); }), "queue depth -2");
}

}  // namespace
}  // namespace scalescope
