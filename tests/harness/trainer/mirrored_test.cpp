// The mirrored trainer: N replicas equal one replica on the global batch, the phases add up,
// the guards (weights, loss, a failing replica) name what went wrong.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <variant>
#include <vector>

#include "core/error.h"
#include "harness/trainer/results.h"
#include "harness/trainer/trainer.h"
#include "models/checkpoint.h"
#include "models/zoo.h"
#include "tests/harness/trainer/train_helpers.h"
#include "tests/test_util.h"

namespace scalescope {
namespace {

using testing_util::trained_weights;
using testing_util::worst_difference;

struct EquivalenceCase {
  int replicas;
  OptimizerKind optimizer;
  bool overlap;
  int accumulation = 1;
};

class Equivalence : public testing::TestWithParam<EquivalenceCase> {};

TEST_P(Equivalence, ReplicasMatchOneReplicaOnTheGlobalBatch) {
  const EquivalenceCase c = GetParam();
  const TrainOptions o = testing_util::equivalence_options(c.optimizer, c.overlap);
  // The same global batch of 8 · N · K samples per step, in one piece or split over N
  // replicas and K accumulated micro-batches.
  TrainOptions one = o;
  one.devices = "cpu:1";
  one.batch = 8 * c.replicas * c.accumulation;
  TrainOptions many = o;
  many.devices = "cpu:" + std::to_string(c.replicas);
  many.batch = 8;
  many.accumulation = c.accumulation;
  const std::vector<NamedTensor> reference = trained_weights(one, "one");
  const std::vector<NamedTensor> mirrored = trained_weights(many, "many");
  EXPECT_LT(worst_difference(mirrored, reference), 1e-4);
  // And training did move the weights: the comparison is not between two initialisations.
  TrainOptions untrained = one;
  untrained.optimizer.lr = 1e-12f;
  const std::vector<NamedTensor> initial = trained_weights(untrained, "initial");
  double moved = 0.0;
  for (size_t t = 0; t < initial.size(); ++t) {
    for (size_t i = 0; i < initial[t].data.size(); ++i) {
      moved =
          std::max(moved, static_cast<double>(std::abs(initial[t].data[i] - reference[t].data[i])));
    }
  }
  EXPECT_GT(moved, 1e-3);
}

INSTANTIATE_TEST_SUITE_P(Cases, Equivalence,
                         testing::Values(EquivalenceCase{2, OptimizerKind::kSgd, true},
                                         EquivalenceCase{2, OptimizerKind::kAdam, true},
                                         EquivalenceCase{4, OptimizerKind::kSgd, true},
                                         EquivalenceCase{4, OptimizerKind::kAdam, false},
                                         EquivalenceCase{2, OptimizerKind::kSgd, false},
                                         EquivalenceCase{1, OptimizerKind::kSgd, true, 3},
                                         EquivalenceCase{2, OptimizerKind::kAdam, true, 2},
                                         EquivalenceCase{4, OptimizerKind::kSgd, false, 2}),
                         [](const testing::TestParamInfo<EquivalenceCase>& info) {
                           return std::to_string(info.param.replicas) + "x" +
                                  (info.param.optimizer == OptimizerKind::kSgd ? "Sgd" : "Adam") +
                                  (info.param.overlap ? "Overlap" : "NoOverlap") +
                                  (info.param.accumulation > 1
                                       ? "Accumulate" + std::to_string(info.param.accumulation)
                                       : "");
                         });

TEST(Mirrored, ExposedPhasesAddUpToTheStep) {
  TrainOptions o;
  o.model = "cifar-cnn";
  o.devices = "cpu:2";
  o.batch = 16;
  o.steps = 12;
  o.eval = false;
  const RunReport r = train(o);
  ASSERT_EQ(r.steps.size(), 12u);
  for (const StepRecord& s : r.steps) {
    ASSERT_EQ(s.replicas.size(), 2u);
    double slowest = 0.0;
    for (const PhaseTimes& p : s.replicas) {
      const double sum = p.exposed_sum_ms();
      EXPECT_NEAR(sum, p.step_ms, 0.02 * p.step_ms) << "step " << s.step;
      EXPECT_GT(p[Phase::kAllReduce], 0.0);
      EXPECT_GT(p[Phase::kForward], 0.0);
      EXPECT_GT(p[Phase::kBackward], 0.0);
      slowest = std::max(slowest, p.step_ms);
    }
    EXPECT_EQ(s.step_ms, slowest);  // the group waits for its slowest replica
  }
  EXPECT_LT(r.steps.back().loss, r.steps.front().loss);
}

// The GPU replicas' reduction (StreamReducer: events and the communication stream) on CPU
// devices, against the communication thread's: the same buckets reduced in the same order
// must give bit-identical weights and losses, with and without accumulation.
TEST(Mirrored, TheStreamReducerMatchesTheCommunicationThreadBitForBit) {
  for (const int accumulation : {1, 2}) {
    TrainOptions o;
    o.model = "dense-100";
    o.devices = "cpu:2";
    o.batch = 8;
    o.accumulation = accumulation;
    o.steps = 6;
    o.threads = 1;
    o.first_bucket_mb = 0.001;  // several buckets
    o.bucket_cap_mb = 0.01;
    o.check_every = 2;
    const std::string tag = "acc" + std::to_string(accumulation);
    TrainHooks streams;
    streams.reduce_on_streams = true;
    const std::vector<NamedTensor> thread_weights = trained_weights(o, "thread_" + tag);
    const std::vector<NamedTensor> stream_weights = trained_weights(o, "streams_" + tag, streams);
    EXPECT_TRUE(testing_util::identical(stream_weights, thread_weights)) << tag;
    o.eval = false;
    const RunReport a = train(o);
    const RunReport b = train(o, streams);
    ASSERT_EQ(a.steps.size(), b.steps.size());
    std::vector<double> unattributed;  // of each replica's step, as a fraction
    for (size_t i = 0; i < a.steps.size(); ++i) {
      EXPECT_EQ(a.steps[i].loss, b.steps[i].loss) << tag << " step " << i + 1;
      ASSERT_EQ(b.steps[i].bucket_ms.size(), b.bucket_bytes.size());
      for (const PhaseTimes& p : b.steps[i].replicas) {
        ASSERT_EQ(p.buckets.size(), b.bucket_bytes.size());
        // Inline on CPU: the buckets ran one after another, inside the step.
        for (size_t k = 0; k < p.buckets.size(); ++k) {
          EXPECT_GE(p.buckets[k].start_ms, p.start_ms - 1e-6);
          if (k > 0) {
            EXPECT_GE(p.buckets[k].start_ms,
                      p.buckets[k - 1].start_ms + p.buckets[k - 1].ms - 1e-6);
          }
        }
        EXPECT_GT(p[Phase::kAllReduce], 0.0);
        unattributed.push_back(std::abs(p.step_ms - p.exposed_sum_ms()) / p.step_ms);
      }
    }
    // The exposed phases add up to the step (DESIGN.md's 2%) in the typical step. These steps
    // last about 2 ms, so one preemption between two of the host clock's readings (40 µs
    // under the sanitizers) can break the bound in a single step without any phase missing;
    // a phase left out would show in every step.
    std::sort(unattributed.begin(), unattributed.end());
    EXPECT_LT(unattributed[unattributed.size() / 2], 0.02) << tag;
    EXPECT_LT(unattributed.back(), 0.25) << tag;
    EXPECT_EQ(b.consistency_checks, 3);
  }
}

// A step in steady state takes all its memory from what earlier steps allocated: the count
// of the devices' own allocations does not move over the measured steps (on a GPU, the
// caching allocator's blocks; on CPU, every allocate()).
TEST(Mirrored, MeasuredStepsAllocateNoDeviceMemory) {
  TrainOptions o;
  o.model = "cifar-cnn";
  o.devices = "cpu:2";
  o.batch = 8;
  o.accumulation = 2;
  o.steps = 8;
  o.warmup_steps = 2;
  o.eval = false;
  const RunReport r = train(o);
  ASSERT_EQ(r.measured_device_allocations.size(), 2u);
  EXPECT_EQ(r.measured_device_allocations, (std::vector<int64_t>{0, 0}));
  ASSERT_EQ(r.host_wait_overshoot_ms.size(), 2u);  // per replica
  EXPECT_FALSE(r.tf32.has_value());                // CPU runs: no TF32 to speak of
  EXPECT_FALSE(r.deterministic.has_value());       // nor non-deterministic kernels
  EXPECT_TRUE(r.gpu_utilization.empty());
}

// The report names what oneDNN chose for each pass of every convolution and dense layer (of
// the training batch, as replica 0 planned it), and nothing for the layers of our own.
TEST(Mirrored, TheReportNamesTheKernelsTheLibrariesChose) {
  TrainOptions o;
  o.model = "cifar-cnn";
  o.devices = "cpu:2";
  o.batch = 4;
  o.steps = 2;
  o.warmup_steps = 1;
  o.eval = false;
  const RunReport r = train(o);
  const ModelDef def = make_model(o.model);
  // Each weighted layer's passes, in order; the first layer (on the model's input) has no
  // backward-data.
  std::vector<std::pair<int, std::string>> expected;
  for (size_t i = 0; i < def.layers.size(); ++i) {
    if (!std::holds_alternative<Conv2DSpec>(def.layers[i]) &&
        !std::holds_alternative<DenseSpec>(def.layers[i]))
      continue;
    for (const char* pass : {"forward", "backward-data", "backward-weights"}) {
      if (i > 0 || pass != std::string("backward-data"))
        expected.emplace_back(static_cast<int>(i), pass);
    }
  }
  ASSERT_EQ(expected.front(), (std::pair<int, std::string>{0, "forward"}));
  ASSERT_EQ(r.kernels.size(), expected.size());
  for (size_t k = 0; k < r.kernels.size(); ++k) {
    const KernelChoiceRecord& c = r.kernels[k];
    const int layer = expected[k].first;
    EXPECT_EQ(c.layer, layer);
    EXPECT_EQ(c.layer_name, describe(def.layers[static_cast<size_t>(layer)]));
    EXPECT_EQ(c.pass, expected[k].second);
    EXPECT_FALSE(c.algorithm.empty());
    EXPECT_EQ(c.math, "fp32");
    EXPECT_EQ(c.layout, std::holds_alternative<Conv2DSpec>(def.layers[static_cast<size_t>(layer)])
                            ? "NHWC"
                            : "NC");
    EXPECT_TRUE(c.deterministic);
    EXPECT_GE(c.workspace_bytes, 0);
  }
  const nlohmann::json j = to_json(r);
  ASSERT_TRUE(j.contains("kernels"));
  EXPECT_EQ(j["kernels"].size(), r.kernels.size());
  EXPECT_EQ(j["kernels"][0]["algorithm"], r.kernels[0].algorithm);
}

// Multi-process runs send replica 0's group record to the other processes: the kernel
// choices travel with it, and a mistyped one is refused by name.
TEST(Mirrored, KernelChoicesCrossProcessesIntact) {
  RunResults sent(1);
  sent.group.kernels = {{2, "conv2d(8, 3x3)", "backward-filter",
                         "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1", "CUDNN_FMA_MATH", "NCHW", true,
                         4096}};
  nlohmann::json message = results_to_json(sent, 0, 1, true);
  RunResults received(1);
  add_results(received, message, "host", "the message");
  ASSERT_EQ(received.group.kernels.size(), 1u);
  const KernelChoiceRecord& k = received.group.kernels[0];
  EXPECT_EQ(k.layer, 2);
  EXPECT_EQ(k.algorithm, "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1");
  EXPECT_EQ(k.layout, "NCHW");
  EXPECT_EQ(k.workspace_bytes, 4096);
  message["group"]["kernels"][0]["workspace_bytes"] = -1;
  RunResults refused(1);
  EXPECT_NE(testing_util::error_of([&] {
              add_results(refused, message, "host", "the message");
            }).find("workspace_bytes"),
            std::string::npos);
}

// Found by tests/fuzz (run_results): a bucket time that is not a number escaped as
// nlohmann's type_error instead of an Error naming the key.
TEST(Mirrored, MistypedBucketTimesFromAnotherProcessAreRefusedByName) {
  RunResults sent(1);
  sent.group.bucket_ms = {{1.0, 2.0}};
  nlohmann::json message = results_to_json(sent, 0, 1, true);
  message["group"]["bucket_ms"][0][1] = "2.0";
  RunResults refused(1);
  EXPECT_CONTAINS(
      testing_util::error_of([&] { add_results(refused, message, "host", "the message"); }),
      "'group.bucket_ms[0]' must be a list of numbers");
}

TEST(Mirrored, AFailingReplicaStopsTheOthersWithItsError) {
  TrainOptions o;
  o.model = "dense-100";
  o.devices = "cpu:3";
  o.steps = 5;
  // Only replica 0 loads: a whole file (which the checks before the run pass) of another
  // model's tensors fails it alone.
  o.load = ::testing::TempDir() + "/another-model.safetensors";
  write_safetensors(o.load,
                    {.tensors = {{"other.weight", Shape{2}, {1.0f, 2.0f}}}, .metadata = {}});
  try {
    train(o);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.rank(), 0);
    EXPECT_NE(std::string(e.what()).find(o.load + "' has no tensor"), std::string::npos)
        << e.what();
  }
}

TEST(Mirrored, DivergenceNamesTheReplicaAndTheStep) {
  TrainOptions o;
  o.model = "dense-100";
  o.devices = "cpu:2";
  o.steps = 50;
  o.eval = false;
  o.optimizer.kind = OptimizerKind::kSgd;
  o.optimizer.lr = 1e30f;
  try {
    train(o);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_GE(e.rank(), 0);
    EXPECT_NE(std::string(e.what()).find("the loss became"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("at step"), std::string::npos) << e.what();
  }
}

TEST(Mirrored, ThroughputCountsTheGlobalBatch) {
  TrainOptions o;
  o.model = "dense-100";
  o.devices = "cpu:2";
  o.batch = 8;
  o.steps = 10;
  o.eval = false;
  const RunReport r = train(o);
  EXPECT_EQ(r.replicas, 2);
  const RunSummary s = summarize(r);
  EXPECT_NEAR(s.samples_per_second, 16.0 * 1e3 / s.step_ms_median, 1e-6);
}

// The progress hook gets the step as the report has it: the global batch's mean loss and the
// slowest replica's times, not replica 0's own.
TEST(Mirrored, ProgressShowsTheStepAsTheReportHasIt) {
  TrainOptions o;
  o.model = "dense-100";
  o.devices = "cpu:3";
  o.batch = 8;
  o.steps = 6;
  o.eval = false;
  std::vector<StepRecord> seen;
  TrainHooks hooks;
  hooks.on_step = [&](const StepRecord& r) { seen.push_back(r); };
  const RunReport r = train(o, hooks);
  ASSERT_EQ(seen.size(), r.steps.size());
  for (size_t i = 0; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i].step, r.steps[i].step);
    EXPECT_DOUBLE_EQ(seen[i].loss, r.steps[i].loss) << "step " << seen[i].step;
    EXPECT_DOUBLE_EQ(seen[i].step_ms, r.steps[i].step_ms) << "step " << seen[i].step;
    EXPECT_DOUBLE_EQ(seen[i].input_ms, r.steps[i].input_ms) << "step " << seen[i].step;
  }
  ASSERT_EQ(r.steps.front().replicas.size(), 3u);  // shards whose losses differ
}

TEST(Mirrored, AccumulationTimesEveryMicroBatch) {
  TrainOptions o;
  o.model = "cifar-cnn";
  o.devices = "cpu:2";
  o.batch = 8;
  o.accumulation = 3;
  o.steps = 4;
  o.eval = false;
  const RunReport r = train(o);
  EXPECT_EQ(r.global_batch(), 48);
  for (const StepRecord& s : r.steps) {
    for (const PhaseTimes& p : s.replicas) {
      const double sum = p.exposed_sum_ms();
      EXPECT_NEAR(sum, p.step_ms, 0.02 * p.step_ms) << "step " << s.step;
    }
    EXPECT_EQ(s.bucket_ms.size(), r.bucket_bytes.size());
  }
}

TEST(LearningRate, TheRunAppliesTheSchedule) {
  TrainOptions o;
  o.model = "dense-100";
  o.devices = "cpu:2";
  o.batch = 4;
  o.steps = 6;
  o.eval = false;
  o.optimizer.kind = OptimizerKind::kSgd;
  o.optimizer.lr = 0.01f;
  o.lr_scaling = LrScaling::kLinear;
  o.lr_warmup_steps = 4;
  const RunReport r = train(o);
  for (const StepRecord& s : r.steps) {
    EXPECT_NEAR(s.lr, scheduled_lr(0.01f, LrScaling::kLinear, 2, 4, s.step), 1e-9);
  }
  EXPECT_NEAR(r.steps.back().lr, 0.02, 1e-8);
}

TEST(Mirrored, TheGuardNamesTheStepAndTheReplicasThatDiverged) {
  TrainOptions o;
  o.model = "dense-100";
  o.devices = "cpu:3";
  o.batch = 4;
  o.steps = 10;
  o.eval = false;
  o.check_every = 2;
  // A silent fault on replica 2 after step 3: the next check (after step 4) must see it.
  TrainHooks faulty;
  faulty.after_step = [](int rank, int64_t step, std::span<float> weights) {
    if (rank == 2 && step == 3) weights[7] += 1e-3f;
  };
  const std::string message = testing_util::error_of([&] { train(o, faulty); });
  EXPECT_CONTAINS(message, "after step 4");
  EXPECT_CONTAINS(message, "replica(s) 2 differ");
  // Unperturbed, the same run passes every check: 5 periodic ones (the last is step 10).
  EXPECT_EQ(train(o).consistency_checks, 5);
}

// Shared memory and Gloo reduce the same buckets: with two replicas a sum of two floats is the
// same in either order, so the weights are bit-identical; with four the Gloo ring adds in
// another order, so they agree to rounding (the tolerance of every equivalence test).
TEST(Mirrored, SharedMemoryAndGlooCollectivesTrainTheSameReplicas) {
  for (const int replicas : {2, 4}) {
    TrainOptions o = testing_util::equivalence_options(OptimizerKind::kAdam, true);
    o.devices = "cpu:" + std::to_string(replicas);
    o.batch = 8;
    o.cpu_shared_memory = true;
    const auto shared = trained_weights(o, "shm" + std::to_string(replicas));
    o.cpu_shared_memory = false;
    const auto gloo = trained_weights(o, "gloo" + std::to_string(replicas));
    if (replicas == 2) {
      EXPECT_TRUE(testing_util::identical(shared, gloo));
    } else {
      EXPECT_LT(worst_difference(shared, gloo), 1e-4);
    }
  }
}

}  // namespace
}  // namespace scalescope
