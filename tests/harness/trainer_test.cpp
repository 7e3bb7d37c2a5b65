// The mirrored trainer: buckets, equivalence with one replica on the global batch, phase
// accounting.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "core/cpu/cpu_device.h"
#include "core/error.h"
#include "harness/trainer/buckets.h"
#include "harness/trainer/evaluate.h"
#include "harness/trainer/trainer.h"
#include "models/checkpoint.h"
#include "models/zoo.h"
#include "tests/test_util.h"

namespace scalescope {
namespace {

TEST(Buckets, TileTheGradientsInBackwardOrder) {
  CpuDevice dev(0, 1);
  Model m(make_model("cifar-cnn"), Shape{32, 32, 3}, dev, 1);
  // 1 KiB first bucket, 128 KiB the rest: dense 10 (650 floats = 2.5 KiB) alone, then
  // dense 64 (1 MiB) alone (larger than the cap), then both convs (18,496 + 896 floats =
  // 76 KiB, under the cap: the last bucket closes with the first layer).
  const std::vector<Bucket> b = plan_buckets(m, 128 * 1024, 1024);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].begin, 0);
  EXPECT_EQ(b[0].first_layer, 9);
  EXPECT_EQ(b[1].first_layer, 7);
  EXPECT_EQ(b[2].first_layer, 0);
  EXPECT_EQ(b[2].last_layer, 3);
  for (size_t i = 1; i < b.size(); ++i) EXPECT_EQ(b[i].begin, b[i - 1].end);
  EXPECT_EQ(b.back().end, m.param_count());
  // One huge cap: a single bucket after the first.
  EXPECT_EQ(plan_buckets(m, int64_t{1} << 30, 1024).size(), 2u);
  EXPECT_THROW(plan_buckets(m, 0, 1024), Error);
}

struct Weights {
  std::vector<NamedTensor> tensors;
};

Weights train_and_read(TrainOptions o, const std::string& name, const TrainHooks& hooks = {}) {
  // Unique per process: ctest runs the cases of this binary in parallel processes.
  o.save =
      testing::TempDir() + "/equiv_" + std::to_string(::getpid()) + "_" + name + ".safetensors";
  o.eval = false;
  train(o, hooks);
  Weights w{read_safetensors(o.save).tensors};
  std::remove(o.save.c_str());
  std::remove(optimizer_state_path(o.save).c_str());
  return w;
}

void expect_same_weights(const Weights& a, const Weights& b, double tolerance,
                         const std::string& what) {
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  double worst = 0.0;
  for (size_t t = 0; t < a.tensors.size(); ++t) {
    ASSERT_EQ(a.tensors[t].name, b.tensors[t].name);
    ASSERT_EQ(a.tensors[t].data.size(), b.tensors[t].data.size());
    for (size_t i = 0; i < a.tensors[t].data.size(); ++i) {
      const double x = a.tensors[t].data[i];
      const double y = b.tensors[t].data[i];
      worst = std::max(worst, std::abs(x - y) / (1e-3 + std::abs(y)));
    }
  }
  EXPECT_LT(worst, tolerance) << what;
}

struct EquivalenceCase {
  int replicas;
  OptimizerKind optimizer;
  bool overlap;
  int accumulation = 1;
};

class Equivalence : public testing::TestWithParam<EquivalenceCase> {};

TEST_P(Equivalence, ReplicasMatchOneReplicaOnTheGlobalBatch) {
  const EquivalenceCase c = GetParam();
  TrainOptions o;
  o.model = "dense-100";
  o.steps = 6;
  o.threads = 1;
  o.optimizer.kind = c.optimizer;
  o.optimizer.lr = c.optimizer == OptimizerKind::kSgd ? 0.05f : 1e-3f;
  o.optimizer.momentum = c.optimizer == OptimizerKind::kSgd ? 0.9f : 0.0f;
  o.overlap = c.overlap;
  o.first_bucket_mb = 0.001;  // several buckets even for this small model
  o.bucket_cap_mb = 0.01;
  // The same global batch of 8 · N · K samples per step, in one piece or split over N
  // replicas and K accumulated micro-batches.
  TrainOptions one = o;
  one.devices = "cpu:1";
  one.batch = 8 * c.replicas * c.accumulation;
  TrainOptions many = o;
  many.devices = "cpu:" + std::to_string(c.replicas);
  many.batch = 8;
  many.accumulation = c.accumulation;
  const Weights reference = train_and_read(one, "one");
  const Weights mirrored = train_and_read(many, "many");
  expect_same_weights(mirrored, reference, 1e-4, "");
  // And training did move the weights: the comparison is not between two initialisations.
  TrainOptions untrained = one;
  untrained.optimizer.lr = 1e-12f;
  const Weights initial = train_and_read(untrained, "initial");
  double moved = 0.0;
  for (size_t t = 0; t < initial.tensors.size(); ++t) {
    for (size_t i = 0; i < initial.tensors[t].data.size(); ++i) {
      moved = std::max(moved, static_cast<double>(std::abs(initial.tensors[t].data[i] -
                                                           reference.tensors[t].data[i])));
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
    const Weights thread_weights = train_and_read(o, "thread_" + tag);
    const Weights stream_weights = train_and_read(o, "streams_" + tag, streams);
    expect_same_weights(stream_weights, thread_weights, 1e-300, tag);
    o.eval = false;
    const RunReport a = train(o);
    const RunReport b = train(o, streams);
    ASSERT_EQ(a.steps.size(), b.steps.size());
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
        const double sum = p.exposed_sum_ms();
        EXPECT_NEAR(sum, p.step_ms, 0.02 * p.step_ms + 0.01);
      }
    }
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
  EXPECT_FALSE(r.tf32.has_value());  // CPU runs: no TF32 to speak of
  EXPECT_TRUE(r.gpu_utilization.empty());
}

TEST(Mirrored, AFailingReplicaStopsTheOthersWithItsError) {
  TrainOptions o;
  o.model = "dense-100";
  o.devices = "cpu:3";
  o.steps = 5;
  o.load = "/nonexistent/checkpoint.safetensors";  // only replica 0 loads
  try {
    train(o);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.rank(), 0);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/checkpoint.safetensors"), std::string::npos);
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

TEST(Mirrored, BadOptionsAreRefusedBeforeAnyWork) {
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

}  // namespace
}  // namespace scalescope

namespace scalescope {
namespace {

TEST(Evaluation, ShardsAddUpToTheWholeDataset) {
  const ModelDef def = make_model("dense-100");
  const RunData data = open_run_data(DataOptions{}, def, 1);
  CpuDevice dev(0, 1);
  Model model(def, data.sample_shape, dev, 1);
  const EvalResult whole = evaluate(model, *data.eval, data.eval_transforms, 64, 1);
  EvalSums total;
  for (int shard = 0; shard < 3; ++shard) {
    const EvalSums s = evaluate_shard(model, *data.eval, data.eval_transforms, 64, 1, shard, 3);
    total.loss += s.loss;
    total.correct += s.correct;
    total.samples += s.samples;
  }
  EXPECT_EQ(total.samples, data.eval->size());
  EXPECT_EQ(whole.samples, data.eval->size());
  EXPECT_NEAR(total.result().loss, whole.loss, 1e-6 * whole.loss);
  EXPECT_DOUBLE_EQ(total.result().accuracy, whole.accuracy);
  EXPECT_GT(whole.accuracy, 0.0);
}

TEST(Evaluation, ReplicasEvaluateTogetherWhatOneReplicaWould) {
  TrainOptions o;
  o.model = "dense-100";
  o.steps = 5;
  o.threads = 1;
  o.optimizer.kind = OptimizerKind::kSgd;
  o.optimizer.lr = 0.05f;
  TrainOptions one = o;
  one.batch = 16;
  TrainOptions two = o;
  two.devices = "cpu:2";
  two.batch = 8;
  const RunReport a = train(one);
  const RunReport b = train(two);
  ASSERT_EQ(a.evals.size(), 1u);
  ASSERT_EQ(b.evals.size(), 1u);
  EXPECT_NEAR(b.evals[0].loss, a.evals[0].loss, 1e-4 * a.evals[0].loss);
  // Weights equal up to rounding: at most a borderline sample may change class.
  EXPECT_NEAR(b.evals[0].accuracy, a.evals[0].accuracy, 1e-3);
}

}  // namespace
}  // namespace scalescope
