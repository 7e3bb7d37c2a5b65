// Training a model with batch norm (cifar-resnet): each replica normalizes with its own
// batch's statistics, as DDP does without SyncBatchNorm, so N replicas are not one replica on
// the global batch; but replica 0's running statistics go to every replica before each
// forward, so the replicas stay bit-identical, buffers included, and the guard checks both.
// On simulated devices the same run ends with the same bits as on CPU replicas. With
// --sync-batchnorm the statistics cover every replica's batch, and N replicas are one replica
// on the global batch again, on CPU replicas (the communication thread's path) and on
// simulated devices (the communication stream's).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>
#include <vector>

#include "harness/trainer/trainer.h"
#include "tests/harness/trainer/train_helpers.h"

namespace scalescope {
namespace {

TrainOptions resnet_run(const std::string& devices, int64_t batch) {
  TrainOptions o = testing_util::short_run("cifar-resnet:depth=8", devices, batch, 4);
  o.optimizer.kind = OptimizerKind::kSgd;
  o.optimizer.lr = 0.05f;
  o.optimizer.momentum = 0.9f;
  o.check_every = 1;
  o.bucket_cap_mb = 0.05;  // several buckets, overlapping backward
  return o;
}

bool has_buffers(const std::vector<NamedTensor>& tensors) {
  for (const NamedTensor& t : tensors) {
    if (t.name == "layer2.0.bn1.running_var") return true;
  }
  return false;
}

TEST(ResNetTrainer, ReplicasStayIdenticalBuffersIncludedAndEveryStepIsChecked) {
  // Weights and buffers are compared after every step (4 checks of each); a difference throws.
  EXPECT_EQ(train(resnet_run("cpu:2", 4)).consistency_checks, 4);
}

TEST(ResNetTrainer, PerReplicaStatisticsAreNotOneReplicaOnTheGlobalBatch) {
  const auto two = testing_util::trained_weights(resnet_run("cpu:2", 4), "two");
  const auto one = testing_util::trained_weights(resnet_run("cpu:1", 8), "one");
  ASSERT_TRUE(has_buffers(two));
  // Batch norm over 4 samples is not batch norm over 8: the runs part ways at the first step.
  EXPECT_GT(testing_util::worst_difference(two, one), 1e-3);
}

TEST(ResNetTrainer, SimulatedDevicesTrainLikeCpuReplicas) {
  const auto cpu = testing_util::trained_weights(resnet_run("cpu:2", 4), "cpu");
  setenv("SCALESCOPE_SIM_JITTER_US", "200", 1);
  const auto sim = testing_util::trained_weights(resnet_run("sim:2", 4), "sim");
  unsetenv("SCALESCOPE_SIM_JITTER_US");
  ASSERT_TRUE(has_buffers(sim));
  EXPECT_TRUE(testing_util::identical(sim, cpu));
}

struct SyncCase {
  const char* devices;
  bool gloo;
  int jitter_us;
};

class SyncBatchNorm : public testing::TestWithParam<SyncCase> {};

// At a learning rate of 0.005: at 0.05, batch norm over these small batches amplifies the
// rounding of any two summation orders (4 replicas' against one's) from 1e-7 after two steps
// to 8e-5 absolute after four, as PyTorch's float32 against float64 does
// (tests/models/torch_training_test.py).
TEST_P(SyncBatchNorm, ReplicasMatchOneReplicaOnTheGlobalBatch) {
  const SyncCase c = GetParam();
  TrainOptions many = resnet_run(c.devices, 4);
  many.sync_batchnorm = true;
  many.cpu_shared_memory = !c.gloo;
  many.optimizer.lr = 0.005f;
  const int replicas = c.devices[4] - '0';
  TrainOptions one = resnet_run("cpu:1", 4 * replicas);
  one.optimizer.lr = many.optimizer.lr;
  const auto reference = testing_util::trained_weights(one, "one");
  setenv("SCALESCOPE_SIM_JITTER_US", std::to_string(c.jitter_us).c_str(), 1);
  const auto synced = testing_util::trained_weights(many, "synced");
  unsetenv("SCALESCOPE_SIM_JITTER_US");
  EXPECT_LT(testing_util::worst_difference(synced, reference), 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Devices, SyncBatchNorm,
                         testing::Values(SyncCase{"cpu:2", false, 0}, SyncCase{"cpu:4", true, 0},
                                         SyncCase{"cpu:4", false, 0}, SyncCase{"cpu:2", true, 0},
                                         SyncCase{"sim:2", false, 300}),
                         [](const testing::TestParamInfo<SyncCase>& info) {
                           return std::string(info.param.devices).substr(0, 3) +
                                  std::string(1, info.param.devices[4]) +
                                  (info.param.gloo ? "Gloo" : "");
                         });

// The sync sums are a phase of their own, which forward and backward wait for: present with
// the option, zero without it and on one replica.
TEST(ResNetTrainer, TheSyncSumsAreTheirOwnPhase) {
  TrainOptions o = resnet_run("cpu:2", 4);
  o.sync_batchnorm = true;
  const RunReport synced = train(o);
  o.sync_batchnorm = false;
  const RunReport plain = train(o);
  ASSERT_FALSE(synced.steps.empty());
  for (const auto& step : synced.steps) {
    for (const PhaseTimes& p : step.replicas) EXPECT_GT(p[Phase::kBatchNormSync], 0.0);
  }
  for (const auto& step : plain.steps) {
    for (const PhaseTimes& p : step.replicas) EXPECT_EQ(p[Phase::kBatchNormSync], 0.0);
  }
}

}  // namespace
}  // namespace scalescope
