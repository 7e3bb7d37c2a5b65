// The precision a run computes in (--precision): which devices take which, bf16 training
// against fp32 from the same weights and batches, on CPU and on simulated accelerators (whose
// replicas must still end with the same weights), and the option's errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "harness/trainer/options.h"
#include "harness/trainer/trainer.h"
#include "models/checkpoint.h"
#include "models/kernel_settings.h"
#include "models/kernels.h"
#include "tests/harness/trainer/train_helpers.h"
#include "tests/models/precision_scope.h"
#include "tests/test_util.h"

namespace scalescope {

// How gtest shows the kernel settings a test compares (found by argument-dependent lookup).
void PrintTo(const KernelSettings& s, std::ostream* os) {
  *os << to_string(s.precision) << ", determinism " << to_string(s.determinism) << ", search "
      << to_string(s.conv_search) << ", fusion " << (s.fuse_layers ? "on" : "off");
}

namespace {

using testing_util::error_of;
using testing_util::expect_follows_fp32;
using testing_util::losses;

// SGD with momentum: Adam's first steps move every weight by the learning rate whatever the
// gradient's size, so that rounding flips the sign of the smallest gradients' steps.
TrainOptions cnn_run(const std::string& devices, const std::string& precision) {
  TrainOptions o = testing_util::short_run("cifar-cnn", devices, 16, 20);
  o.optimizer.kind = OptimizerKind::kSgd;
  o.optimizer.lr = 0.01f;
  o.optimizer.momentum = 0.9f;
  o.precision = precision;
  return o;
}

TEST(Precision, EachDeviceKindHasItsDefaultAndRefusesWhatItsKernelsDoNotCompute) {
  EXPECT_EQ(run_precision("", DeviceKind::kCpu), Precision::kFp32);
  EXPECT_EQ(run_precision("", DeviceKind::kSim), Precision::kFp32);
  // bf16 where oneDNN has bf16 kernels for this CPU (CliValues tests the refusal elsewhere).
  const std::string bf16_refusal = testing_util::cpu_bf16_refusal();
  const std::string cpu_computes = bf16_refusal.empty() ? "fp32 or bf16" : "fp32";
  if (bf16_refusal.empty()) {
    EXPECT_EQ(run_precision("bf16", DeviceKind::kSim), Precision::kBf16);
  }
  EXPECT_CONTAINS(error_of([] { (void)run_precision("tf32", DeviceKind::kCpu); }),
                  "precision tf32: cpu devices compute in " + cpu_computes +
                      " (TF32 is a format of GPU tensor cores)");
  EXPECT_EQ(run_precision("fp16", DeviceKind::kSim), Precision::kFp16);
  EXPECT_CONTAINS(error_of([] { (void)run_precision("fp16", DeviceKind::kCpu); }),
                  "precision fp16: cpu devices compute in " + cpu_computes +
                      " (oneDNN 2.6 has no fp16 kernels for CPUs)");
  EXPECT_CONTAINS(error_of([] { (void)run_precision("fp8", DeviceKind::kCpu); }),
                  "precision 'fp8': unknown; use fp32, tf32, bf16 or fp16");
  EXPECT_CONTAINS(error_of([] { (void)run_precision("bf61", DeviceKind::kCpu); }),
                  "precision 'bf61': unknown (did you mean bf16?); use fp32, tf32, bf16 or fp16");
  if (find_backend(DeviceKind::kCuda) != nullptr) {
    EXPECT_EQ(run_precision("", DeviceKind::kCuda), Precision::kTf32);
    EXPECT_EQ(run_precision("bf16", DeviceKind::kCuda), Precision::kBf16);
    EXPECT_EQ(run_precision("fp16", DeviceKind::kCuda), Precision::kFp16);
    EXPECT_CONTAINS(kernel_backend(DeviceKind::kCuda).precision_note(Precision::kBf16),
                    "GPUs compute bf16 in the dense layers, convolutions and attention");
    EXPECT_EQ(kernel_backend(DeviceKind::kCuda).precision_note(Precision::kTf32), "");
  }
}

// From the same weights and batches, bf16 losses follow fp32's within 5e-2 while not being
// fp32's: the kernels did compute on bf16 copies. (Seen within 2.2% over these 20 steps; as the
// model goes on to memorise the synthetic batches, the two drift further apart: 26% by step 30.)
TEST(Precision, Bf16TrainsCifarCnnLikeFp32OnCpu) {
  SKIP_WITHOUT_CPU_BF16();
  const RunReport fp32 = train(cnn_run("cpu:1", ""));
  const RunReport bf16 = train(cnn_run("cpu:1", "bf16"));
  EXPECT_EQ(fp32.precision, Precision::kFp32);
  EXPECT_EQ(bf16.precision, Precision::kBf16);
  expect_follows_fp32(bf16, fp32);
  for (const KernelChoiceRecord& k : bf16.kernels) EXPECT_EQ(k.math, "bf16") << k.layer_name;
  for (const KernelChoiceRecord& k : fp32.kernels) EXPECT_EQ(k.math, "fp32") << k.layer_name;
}

// Kernels read the precision and the other kernel settings when they are built, so a run sets
// them process-wide; once it ends, whatever the process builds next must not get its settings.
TEST(Precision, ARunSetsTheKernelSettingsItRunsWithAndGivesBackTheOnesItFound) {
  const KernelSettings before{.precision = Precision::kTf32,
                              .determinism = Determinism::kRequired,
                              .conv_search = ConvSearch::kBenchmark,
                              .fuse_layers = false};
  const ScopedKernelSettings scope(before);
  // A 16-bit run, in fp16 (emulated on sim) where this CPU computes no bf16.
  const Precision sixteen =
      testing_util::bf16_refused_here(Precision::kBf16) ? Precision::kFp16 : Precision::kBf16;
  TrainOptions o = cnn_run("sim:2", to_string(sixteen));
  o.steps = 2;
  std::mutex mutex;
  std::vector<KernelSettings> during;
  TrainHooks hooks;
  hooks.on_step = [&](const StepRecord&) {
    const std::lock_guard lock(mutex);
    during.push_back(kernel_settings());
  };
  (void)train(o, hooks);
  const KernelSettings run{.precision = sixteen,
                           .determinism = Determinism::kPreferred,
                           .conv_search = ConvSearch::kHeuristic,
                           .fuse_layers = true};
  ASSERT_EQ(during.size(), 2u);
  for (const KernelSettings& s : during) EXPECT_EQ(s, run);
  EXPECT_EQ(kernel_settings(), before);

  // A run whose replicas fail gives them back too.
  TrainHooks failing;
  failing.before_step_wait = [](int, int64_t) { throw Error("test", "", "planted failure"); };
  EXPECT_CONTAINS(error_of([&] { (void)train(o, failing); }), "planted failure");
  EXPECT_EQ(kernel_settings(), before);
}

// Two simulated accelerators in bf16: the GPU path's orchestration with 16-bit compute; the
// trainer's consistency check holds their weights equal after the last step (it throws
// otherwise), and their mean gradient trains like one device's whole batch.
TEST(Precision, Bf16ReplicasOnSimulatedAcceleratorsStayIdentical) {
  SKIP_WITHOUT_CPU_BF16();
  TrainOptions two = cnn_run("sim:2", "bf16");
  two.batch = 8;
  two.steps = 10;
  const RunReport r = train(two);
  EXPECT_EQ(r.precision, Precision::kBf16);
  EXPECT_GE(r.consistency_checks, 1);
  TrainOptions one = cnn_run("cpu:1", "bf16");
  one.steps = 10;
  const std::vector<double> a = losses(train(one));
  const std::vector<double> b = losses(r);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(b[i], a[i], 2e-2 * std::abs(a[i])) << i + 1;
}

// fp16 on two simulated accelerators: emulated fp16 kernels under dynamic loss scaling, with
// the GPU path's orchestration. From the same weights and batches the losses follow fp32's,
// the scale stays at its start (20 steps, none overflowing) and the report says so.
TEST(Precision, Fp16WithLossScalingTrainsLikeFp32OnSimulatedAccelerators) {
  TrainOptions o = cnn_run("sim:2", "fp16");
  o.batch = 8;
  const RunReport fp16 = train(o);
  o.precision = "fp32";
  const RunReport fp32 = train(o);
  EXPECT_EQ(fp16.precision, Precision::kFp16);
  EXPECT_FALSE(fp32.loss_scaling);
  ASSERT_TRUE(fp16.loss_scaling);
  EXPECT_EQ(fp16.loss_scaling->initial_scale, 65536.0);
  EXPECT_EQ(fp16.loss_scaling->final_scale, 65536.0);
  EXPECT_TRUE(fp16.loss_scaling->skipped_steps.empty());
  EXPECT_CONTAINS(fp16.precision_note, "emulate fp16");
  for (const KernelChoiceRecord& k : fp16.kernels) EXPECT_EQ(k.math, "fp16-emulated");
  expect_follows_fp32(fp16, fp32);
}

// A loss scaled so far on one replica that its gradients overflow fp16 at step 3: the
// all-reduce carries the infinity to every replica, each skips that step (its weights stay
// those of step 2) and halves the scale, and training goes on from there; the replicas end
// identical (the trainer's consistency check).
TEST(Precision, APlantedFp16OverflowSkipsThatStepOnEveryReplica) {
  TrainOptions o = cnn_run("sim:2", "fp16");
  o.batch = 8;
  o.steps = 6;
  o.optimizer = OptimizerConfig{};  // Adam: a skipped step must not count for its bias correction
  std::map<std::pair<int, int64_t>, std::vector<float>> weights;
  std::mutex mutex;
  TrainHooks hooks;
  hooks.loss_scale_factor = [](int rank, int64_t step) {
    return rank == 1 && step == 3 ? std::ldexp(1.0f, 40) : 1.0f;
  };
  hooks.after_step = [&](int rank, int64_t step, std::span<float> w) {
    const std::lock_guard lock(mutex);
    weights[{rank, step}].assign(w.begin(), w.end());
  };
  const RunReport r = train(o, hooks);
  ASSERT_TRUE(r.loss_scaling);
  EXPECT_EQ(r.loss_scaling->skipped_steps, (std::vector<int64_t>{3}));
  EXPECT_EQ(r.loss_scaling->final_scale, 32768.0);
  EXPECT_GE(r.consistency_checks, 1);
  for (int rank = 0; rank < 2; ++rank) {
    SCOPED_TRACE(rank);
    EXPECT_EQ(weights.at({rank, 3}), weights.at({rank, 2}));
    EXPECT_NE(weights.at({rank, 2}), weights.at({rank, 1}));
    EXPECT_NE(weights.at({rank, 4}), weights.at({rank, 3}));
    for (const float w : weights.at({rank, 6})) ASSERT_TRUE(std::isfinite(w));
  }
  // The loss of the planted step is still the loss (the scale is taken out again).
  for (const StepRecord& s : r.steps) EXPECT_TRUE(std::isfinite(s.loss)) << s.step;
  EXPECT_NEAR(r.steps[2].loss, r.steps[1].loss, 0.5 * r.steps[1].loss);
}

// The scale goes into the checkpoint beside the optimizer's state (GradScaler's state_dict), and
// a run that loads it goes on from it on every replica; a run of another precision ignores it.
TEST(Precision, AnFp16CheckpointKeepsItsLossScale) {
  const std::string path = testing::TempDir() + "/fp16_scale.safetensors";
  TrainOptions o = cnn_run("sim:2", "fp16");
  o.batch = 4;
  o.steps = 3;
  o.save = path;
  TrainHooks hooks;
  hooks.loss_scale_factor = [](int rank, int64_t step) {
    return rank == 0 && step == 2 ? std::ldexp(1.0f, 40) : 1.0f;
  };
  EXPECT_EQ(train(o, hooks).loss_scaling->final_scale, 32768.0);
  const TrainerState saved = load_trainer_state(path);
  EXPECT_EQ(saved.at("loss_scale"), "32768");
  EXPECT_EQ(saved.at("loss_scale_clean_steps"), "1");
  o.save.clear();
  o.load = path;
  o.steps = 1;
  const RunReport resumed = train(o);
  EXPECT_EQ(resumed.loss_scaling->final_scale, 32768.0);
  EXPECT_TRUE(resumed.loss_scaling->skipped_steps.empty());
  o.precision = "fp32";
  EXPECT_FALSE(train(o).loss_scaling);
  SafetensorsFile state = read_safetensors(optimizer_state_path(path));
  state.metadata["trainer.loss_scale"] = "lots";
  write_safetensors(optimizer_state_path(path), state);
  o.precision = "fp16";
  EXPECT_CONTAINS(error_of([&] { train(o); }),
                  "the checkpoint's loss_scale 'lots' is not a number");
  std::remove(path.c_str());
  std::remove(optimizer_state_path(path).c_str());
}

TEST(Precision, Fp16RefusesTheNoiseScaleWhoseStepsItMaySkip) {
  TrainOptions o = cnn_run("sim:2", "fp16");
  o.noise_scale = true;
  EXPECT_CONTAINS(error_of([&] { validate(o); }), "measure the noise scale in fp32 or bf16");
}

TEST(Precision, TheRetiredNoTf32FlagNamesItsReplacement) {
  TrainOptions o = cnn_run("cpu:1", "");
  o.retired_tf32 = false;
  EXPECT_CONTAINS(error_of([&] { validate(o); }), "is now --precision fp32");
}

}  // namespace
}  // namespace scalescope
