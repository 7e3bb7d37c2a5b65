// The trainer's accelerator path (three streams per replica, events, pinned staging, the
// caching allocator, enqueued collectives, the step's one host wait) against CPU replicas on
// the same data and seed, and that path's own promises: no device allocation in steady
// state, phases that add up. Every test runs on simulated devices (which run that path on
// CPU threads) in every build, and on GPUs where there are any (skipping otherwise).
#include <gtest/gtest.h>

#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>
#include "core/backend.h"
#include "harness/collectives/benchmark.h"
#include "harness/trainer/trainer.h"
#include "tests/harness/trainer/train_helpers.h"
#include "tests/models/precision_scope.h"

namespace scalescope {
namespace {

using testing_util::identical;
using testing_util::trained_weights;
using testing_util::worst_difference;

class GpuTrainer : public testing::TestWithParam<DeviceKind> {
 protected:
  // "cuda:2" or "sim:2"; skips when the machine has fewer such devices.
  std::string devices(int n) {
    if (GetParam() == DeviceKind::kSim) return "sim:" + std::to_string(n);
    Backend* cuda = find_backend(DeviceKind::kCuda);
    const int have = cuda != nullptr ? cuda->device_count() : 0;
    if (have < n) {
      skip_ = fmt::format("needs {} GPU(s), this machine has {} ({})", n, have,
                          cuda != nullptr ? cuda->unavailable_reason()
                                          : missing_backend_message(DeviceKind::kCuda));
      return "";
    }
    return "cuda:" + std::to_string(n);
  }
  // Simulated devices run the CPU kernels: the same bits. GPU kernels in strict fp32 round
  // differently.
  void expect_like_cpu(const std::vector<NamedTensor>& device, const std::vector<NamedTensor>& cpu,
                       const std::string& what) {
    if (GetParam() == DeviceKind::kSim) {
      EXPECT_TRUE(identical(device, cpu)) << what;
    } else {
      EXPECT_LT(worst_difference(device, cpu), 1e-3) << what;
    }
  }
  std::string skip_;
};

#define DEVICES_OR_SKIP(var, n)       \
  const std::string var = devices(n); \
  if (var.empty()) GTEST_SKIP() << skip_;

TrainOptions small_run(const std::string& model, const std::string& devices) {
  TrainOptions o;
  o.model = model;
  o.devices = devices;
  o.batch = 16;
  o.steps = 6;
  o.threads = 1;
  o.precision = "fp32";  // strict fp32: comparable with the CPU kernels
  o.optimizer.kind = OptimizerKind::kSgd;
  o.optimizer.lr = 0.05f;
  o.optimizer.momentum = 0.9f;
  o.first_bucket_mb = 0.01;
  o.bucket_cap_mb = 0.05;
  o.check_every = 2;
  return o;
}

TEST_P(GpuTrainer, OneDeviceTrainsLikeOneCpuReplica) {
  DEVICES_OR_SKIP(one, 1);
  for (const char* model : {"dense-100", "cifar-cnn"}) {
    for (const int accumulation : {1, 2}) {
      TrainOptions device = small_run(model, one);
      device.accumulation = accumulation;
      TrainOptions cpu = device;
      cpu.devices = "cpu:1";
      expect_like_cpu(trained_weights(device, "device"), trained_weights(cpu, "cpu"),
                      fmt::format("{} accumulating {}", model, accumulation));
    }
  }
}

// A ResNet's graph (the adds with their ReLUs fused in, batch norm, the strided shortcut): in
// strict fp32, and on simulated devices in bf16 too, whose saved activations the adds' backward
// restores (the same CPU kernels: the same bits).
TEST_P(GpuTrainer, OneDeviceTrainsAResNetLikeOneCpuReplica) {
  DEVICES_OR_SKIP(one, 1);
  for (const char* precision : {"fp32", "bf16"}) {
    if (GetParam() != DeviceKind::kSim && std::string(precision) != "fp32") continue;
    if (testing_util::bf16_refused_here(parse_precision(precision))) continue;
    TrainOptions device = small_run("cifar-resnet:depth=8", one);
    device.batch = 8;
    device.steps = 4;
    device.eval = false;
    device.precision = precision;
    TrainOptions cpu = device;
    cpu.devices = "cpu:1";
    expect_like_cpu(trained_weights(device, "device-resnet"), trained_weights(cpu, "cpu-resnet"),
                    precision);
  }
}

TEST_P(GpuTrainer, TwoDevicesTrainLikeTwoCpuReplicas) {
  DEVICES_OR_SKIP(two, 2);
  TrainOptions device = small_run("cifar-cnn", two);
  TrainOptions cpu = device;
  cpu.devices = "cpu:2";
  expect_like_cpu(trained_weights(device, "device2"), trained_weights(cpu, "cpu2"), "");
}

// Deterministic kernels (the default): the same run twice gives the same weights, bit for
// bit, on one device and across two (NCCL's sums among two ranks are exact).
TEST_P(GpuTrainer, TheSameRunTwiceGivesBitIdenticalWeights) {
  DEVICES_OR_SKIP(two, 2);
  const TrainOptions o = small_run("cifar-cnn", two);
  EXPECT_TRUE(identical(trained_weights(o, "first"), trained_weights(o, "second")));
}

TEST_P(GpuTrainer, SteadyStepsAllocateNothingAndTheirPhasesAddUp) {
  DEVICES_OR_SKIP(one, 1);
  TrainOptions o;
  o.model = "cifar-cnn";
  o.devices = one;
  o.batch = 64;
  o.accumulation = 2;
  o.steps = 20;
  o.warmup_steps = 5;
  o.threads = 1;
  o.eval = false;
  const RunReport r = train(o);
  EXPECT_EQ(r.measured_device_allocations, std::vector<int64_t>{0});
  // How late the host saw each step end: measured, and far below a step (a sleeping wait
  // would show here, not in the steps' event times).
  ASSERT_EQ(r.host_wait_overshoot_ms.size(), 1u);
  EXPECT_TRUE(std::isfinite(r.host_wait_overshoot_ms[0]));
  EXPECT_LT(std::abs(r.host_wait_overshoot_ms[0]), r.steps.back().step_ms);
  for (size_t i = static_cast<size_t>(r.warmup_steps); i < r.steps.size(); ++i) {
    const PhaseTimes& p = r.steps[i].replicas.at(0);
    EXPECT_NEAR(p.exposed_sum_ms(), p.step_ms, 0.02 * p.step_ms + 0.05) << "step " << i + 1;
    EXPECT_GT(p[Phase::kForward], 0.0);
    EXPECT_GT(p[Phase::kBackward], 0.0);
  }
  EXPECT_LT(r.steps.back().loss, r.steps.front().loss);
  if (GetParam() == DeviceKind::kCuda) {
    EXPECT_EQ(r.precision, Precision::kTf32);  // the GPUs' default
    ASSERT_TRUE(r.tf32.has_value());
    EXPECT_TRUE(*r.tf32);
    ASSERT_TRUE(r.deterministic.has_value());
    EXPECT_TRUE(*r.deterministic);
    // Every pass of every weighted layer names what cuDNN or cuBLAS runs, deterministic.
    ASSERT_FALSE(r.kernels.empty());
    for (const KernelChoiceRecord& k : r.kernels) {
      EXPECT_TRUE(k.algorithm.starts_with("CUDNN_") || k.algorithm.starts_with("cublas"))
          << k.algorithm;
      EXPECT_TRUE(k.deterministic) << k.layer_name << " " << k.pass;
    }
    // One GPU sampled: readings, or the reason there are none (no NVML in a container).
    ASSERT_EQ(r.gpu_utilization.size(), 1u);
    EXPECT_TRUE(r.gpu_utilization[0].samples > 0 || !r.gpu_utilization[0].error.empty());
    EXPECT_FALSE(r.gpu_utilization[0].pci_bus_id.empty());
  } else {
    EXPECT_EQ(r.precision, Precision::kFp32);   // the default of CPU kernels
    EXPECT_FALSE(r.tf32.has_value());           // CPU kernels: no TF32 to speak of
    EXPECT_FALSE(r.deterministic.has_value());  // nor non-deterministic algorithms
    EXPECT_FALSE(r.kernels.empty());            // oneDNN's choices, through the sim kernels
    EXPECT_TRUE(r.gpu_utilization.empty());     // nothing NVML could sample
  }
}

// Trains `o` in bf16 and fp16 after strict fp32: the losses follow fp32's without being fp32's,
// and on GPUs each weighted layer's kernels name the format they computed in: cuBLAS's (dense
// layers, attention) the format ("bf16"), cuDNN's convolutions the format and cuDNN's math type
// ("bf16 CUDNN_TENSOR_OP_MATH"). Leaves `o` in fp16.
void expect_sixteen_bit_training(TrainOptions& o, DeviceKind kind) {
  const RunReport fp32 = train(o);
  for (const Precision p : {Precision::kBf16, Precision::kFp16}) {
    if (kind != DeviceKind::kCuda && testing_util::bf16_refused_here(p)) continue;
    SCOPED_TRACE(to_string(p));
    o.precision = to_string(p);
    const RunReport r = train(o);
    EXPECT_EQ(r.precision, p);
    testing_util::expect_follows_fp32(r, fp32);
    if (kind != DeviceKind::kCuda) continue;
    EXPECT_FALSE(r.kernels.empty());
    for (const KernelChoiceRecord& k : r.kernels) {
      if (k.algorithm.starts_with("CUDNN_")) {
        EXPECT_TRUE(k.math.starts_with(to_string(p) + " CUDNN_")) << k.layer_name << ": " << k.math;
      } else {
        EXPECT_EQ(k.math, to_string(p)) << k.layer_name << ": " << k.algorithm;
      }
    }
  }
}

// bf16 and fp16 on a ResNet: convolutions, batch norm, the shortcuts' adds.
TEST_P(GpuTrainer, SixteenBitPrecisionsTrainAResNetLikeFp32) {
  DEVICES_OR_SKIP(one, 1);
  TrainOptions o = small_run("cifar-resnet:depth=8", one);
  o.batch = 8;
  o.eval = false;
  expect_sixteen_bit_training(o, GetParam());
}

// bf16 and fp16 on a GPT decoder (dense layers and attention), as the ResNet above. In fp16 a
// loss planted 2^40 times too large at step 3 overflows the 16-bit copies of backward's
// operands: that step is skipped and the scale halved.
TEST_P(GpuTrainer, SixteenBitPrecisionsTrainAGptDecoderLikeFp32) {
  DEVICES_OR_SKIP(one, 1);
  TrainOptions o = small_run("gpt:layers=2,d=32,heads=2,seq=16,vocab=64", one);
  o.steps = 8;
  expect_sixteen_bit_training(o, GetParam());
  TrainHooks hooks;
  hooks.loss_scale_factor = [](int, int64_t step) {
    return step == 3 ? std::ldexp(1.0f, 40) : 1.0f;
  };
  const RunReport planted = train(o, hooks);
  ASSERT_TRUE(planted.loss_scaling);
  EXPECT_EQ(planted.loss_scaling->skipped_steps, (std::vector<int64_t>{3}));
  EXPECT_EQ(planted.loss_scaling->final_scale, 32768.0);
}

// The attention's fused passes (SCALESCOPE_ATTENTION=flash, CUDA only) train the decoder above
// in bf16 as the chunks do: the losses within expect_follows_fp32's 5% of the chunks' (they
// round P at another point and recompute the scores with other products), and the run report
// names them for every attention layer.
TEST_P(GpuTrainer, FlashAttentionTrainsAGptDecoderLikeTheChunks) {
  if (GetParam() != DeviceKind::kCuda) GTEST_SKIP() << "the fused attention is CUDA's";
  DEVICES_OR_SKIP(one, 1);
  TrainOptions o = small_run("gpt:layers=2,d=32,heads=2,seq=16,vocab=64", one);
  o.steps = 8;
  o.precision = "bf16";
  const RunReport chunks = train(o);
  setenv("SCALESCOPE_ATTENTION", "flash", 1);
  const RunReport flash = train(o);
  unsetenv("SCALESCOPE_ATTENTION");
  testing_util::expect_follows_fp32(flash, chunks);
  int fused = 0;
  for (const KernelChoiceRecord& k : flash.kernels) {
    fused += k.algorithm.starts_with("fused flash attention") ? 1 : 0;
  }
  EXPECT_EQ(fused, 4);  // forward and backward of 2 layers
}

// The median over the measured steps of replica 0's `phase`.
double median_phase(const RunReport& r, Phase phase) {
  std::vector<double> v;
  for (size_t i = static_cast<size_t>(r.warmup_steps); i < r.steps.size(); ++i)
    v.push_back(r.steps[i].replicas.at(0)[phase]);
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// Each batch is copied while the step before computes: the step waits for next to nothing of
// its copy (h2d exposed), where without prefetching it waits for all of it. Simulated devices
// get a slow host link (100 MB/s: 4 ms for cifar-cnn's 32 images, a fraction of its step) so
// that the copy is long enough to see.
TEST_P(GpuTrainer, TheNextBatchIsCopiedWhileTheStepComputes) {
  DEVICES_OR_SKIP(one, 1);
  TrainOptions o = small_run("cifar-cnn", one);
  o.batch = 32;
  o.steps = 12;
  o.warmup_steps = 2;
  o.eval = false;
  setenv("SCALESCOPE_SIM_LINK_MBPS", "100", 1);
  const RunReport with = train(o);
  o.prefetch = false;
  const RunReport without = train(o);
  unsetenv("SCALESCOPE_SIM_LINK_MBPS");
  const double copy_ms = median_phase(with, Phase::kH2DTotal);
  ASSERT_GT(copy_ms, 0.0);
  EXPECT_LT(median_phase(with, Phase::kH2D), 0.2 * copy_ms)
      << "copy " << copy_ms << " ms, of which the step waited for the median shown";
  // Without, the step waits for all of it (less the moment the compute stream's worker takes
  // to record the copy's start: a thread's wake-up, longer on a loaded machine).
  const double unhidden_ms = median_phase(without, Phase::kH2DTotal);
  ASSERT_GT(unhidden_ms, 0.0);
  EXPECT_GT(median_phase(without, Phase::kH2D), 0.7 * unhidden_ms);
}

// `scalescope collectives --devices cuda:1` (NCCL) or sim:2 (shared memory): the
// collectives on the device's communication stream, with the data check.
TEST_P(GpuTrainer, CollectivesOnTheCommunicationStreamPassTheDataCheck) {
  DEVICES_OR_SKIP(list, GetParam() == DeviceKind::kSim ? 2 : 1);
  AllReduceBenchOptions o;
  o.sizes = message_sizes(4096, 1 << 20, 16);
  o.warmup_iters = 2;
  o.iters = 5;
  o.op = ReduceOp::kAverage;
  const AllReduceBenchResult r =
      benchmark_all_reduce_on(parse_device_spec(list), o, std::chrono::seconds(60));
  EXPECT_EQ(r.backend, GetParam() == DeviceKind::kSim ? "sim" : "nccl");
  EXPECT_EQ(r.wrong(), 0);
  ASSERT_EQ(r.sizes.size(), o.sizes.size());
  for (const AllReduceSizeResult& s : r.sizes) EXPECT_GT(s.time_us, 0.0);
}

INSTANTIATE_TEST_SUITE_P(Devices, GpuTrainer, testing::Values(DeviceKind::kSim, DeviceKind::kCuda),
                         [](const testing::TestParamInfo<DeviceKind>& info) {
                           return std::string(to_string(info.param));
                         });

}  // namespace
}  // namespace scalescope
