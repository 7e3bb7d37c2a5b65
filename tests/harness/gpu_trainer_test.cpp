// The mirrored trainer on GPU replicas against CPU replicas on the same data and seed, and
// the GPU path's own promises: no device allocation in steady state, phases that add up,
// NVML's utilisation in the report. Built only with SCALESCOPE_WITH_CUDA; skips without a
// GPU (and the two-GPU case without two).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "core/backend.h"
#include "harness/collectives/benchmark.h"
#include "harness/trainer/trainer.h"
#include "models/checkpoint.h"

namespace scalescope {
namespace {

int gpus() {
  return backend(DeviceKind::kCuda).device_count();
}

#define SKIP_WITHOUT_GPUS(n)                                                            \
  do {                                                                                  \
    if (gpus() < (n)) {                                                                 \
      GTEST_SKIP() << "needs " << (n) << " GPU(s), this machine has " << gpus() << " (" \
                   << backend(DeviceKind::kCuda).unavailable_reason() << ")";           \
    }                                                                                   \
  } while (0)

std::vector<NamedTensor> trained_weights(TrainOptions o, const std::string& name) {
  o.save = testing::TempDir() + "/gpu_" + std::to_string(::getpid()) + "_" + name + ".safetensors";
  o.eval = false;
  train(o);
  std::vector<NamedTensor> w = read_safetensors(o.save).tensors;
  std::remove(o.save.c_str());
  std::remove(optimizer_state_path(o.save).c_str());
  return w;
}

// Worst relative difference, |x - y| / (1e-3 + |y|), over every weight.
double worst_difference(const std::vector<NamedTensor>& a, const std::vector<NamedTensor>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0.0;
  for (size_t t = 0; t < std::min(a.size(), b.size()); ++t) {
    EXPECT_EQ(a[t].data.size(), b[t].data.size());
    for (size_t i = 0; i < std::min(a[t].data.size(), b[t].data.size()); ++i) {
      worst = std::max(worst, std::abs(static_cast<double>(a[t].data[i]) - b[t].data[i]) /
                                  (1e-3 + std::abs(static_cast<double>(b[t].data[i]))));
    }
  }
  return worst;
}

TrainOptions small_run(const std::string& model, const std::string& devices) {
  TrainOptions o;
  o.model = model;
  o.devices = devices;
  o.batch = 16;
  o.steps = 6;
  o.threads = 1;
  o.tf32 = false;  // strict fp32: comparable with the CPU kernels
  o.optimizer.kind = OptimizerKind::kSgd;
  o.optimizer.lr = 0.05f;
  o.optimizer.momentum = 0.9f;
  o.first_bucket_mb = 0.01;
  o.bucket_cap_mb = 0.05;
  o.check_every = 2;
  return o;
}

TEST(GpuTrainer, OneGpuTrainsLikeOneCpuReplica) {
  SKIP_WITHOUT_GPUS(1);
  for (const char* model : {"dense-100", "cifar-cnn"}) {
    for (const int accumulation : {1, 2}) {
      TrainOptions gpu = small_run(model, "cuda:0");
      gpu.accumulation = accumulation;
      TrainOptions cpu = gpu;
      cpu.devices = "cpu:1";
      EXPECT_LT(worst_difference(trained_weights(gpu, "gpu"), trained_weights(cpu, "cpu")), 1e-3)
          << model << " accumulating " << accumulation;
    }
  }
}

TEST(GpuTrainer, TwoGpusTrainLikeTwoCpuReplicas) {
  SKIP_WITHOUT_GPUS(2);
  TrainOptions gpu = small_run("cifar-cnn", "cuda:0,1");
  TrainOptions cpu = gpu;
  cpu.devices = "cpu:2";
  EXPECT_LT(worst_difference(trained_weights(gpu, "gpu2"), trained_weights(cpu, "cpu2")), 1e-3);
}

TEST(GpuTrainer, SteadyStepsAllocateNothingAndTheirPhasesAddUp) {
  SKIP_WITHOUT_GPUS(1);
  TrainOptions o;
  o.model = "cifar-cnn";
  o.devices = "cuda:0";
  o.batch = 64;
  o.accumulation = 2;
  o.steps = 20;
  o.warmup_steps = 5;
  o.eval = false;
  const RunReport r = train(o);
  EXPECT_EQ(r.measured_device_allocations, std::vector<int64_t>{0});
  ASSERT_TRUE(r.tf32.has_value());
  EXPECT_TRUE(*r.tf32);
  for (size_t i = static_cast<size_t>(r.warmup_steps); i < r.steps.size(); ++i) {
    const PhaseTimes& p = r.steps[i].replicas.at(0);
    const double sum = p.exposed_sum_ms();
    EXPECT_NEAR(sum, p.step_ms, 0.02 * p.step_ms + 0.05) << "step " << i + 1;
    EXPECT_GT(p[Phase::kForward], 0.0);
    EXPECT_GT(p[Phase::kBackward], 0.0);
  }
  EXPECT_LT(r.steps.back().loss, r.steps.front().loss);
  // One GPU sampled: readings, or the reason there are none (no NVML in a container).
  ASSERT_EQ(r.gpu_utilization.size(), 1u);
  EXPECT_TRUE(r.gpu_utilization[0].samples > 0 || !r.gpu_utilization[0].error.empty());
  EXPECT_FALSE(r.gpu_utilization[0].pci_bus_id.empty());
}

// `scalescope collectives --devices cuda:0`: NCCL on the GPU's communication stream, with the
// data check.
TEST(GpuCollectives, NcclAllReduceOnOneGpuPassesTheDataCheck) {
  SKIP_WITHOUT_GPUS(1);
  AllReduceBenchOptions o;
  o.sizes = message_sizes(4096, 1 << 20, 16);
  o.warmup_iters = 2;
  o.iters = 5;
  o.op = ReduceOp::kAverage;
  const AllReduceBenchResult r = benchmark_all_reduce_on(
      DeviceSpec{.kind = DeviceKind::kCuda, .indices = {0}}, o, std::chrono::seconds(60));
  EXPECT_EQ(r.backend, "nccl");
  EXPECT_EQ(r.wrong(), 0);
  ASSERT_EQ(r.sizes.size(), o.sizes.size());
  for (const AllReduceSizeResult& s : r.sizes) EXPECT_GT(s.time_us, 0.0);
}

}  // namespace
}  // namespace scalescope
