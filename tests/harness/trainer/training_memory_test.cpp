// training_memory (what `scalescope models SPEC --batch B` prints) against the peak that
// training measures: on CPU and simulated devices, sequential models and graphs, each
// optimizer's state, each precision, the measured peak of a run without evaluation within 5% of
// the plan.
#include "harness/trainer/training_memory.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/units.h"
#include "harness/trainer/trainer.h"
#include "models/kernels.h"
#include "models/zoo.h"
#include "tests/harness/trainer/train_helpers.h"
#include "tests/models/precision_scope.h"
#include "tests/test_util.h"

namespace scalescope {
namespace {

struct MemoryCase {
  std::string model;
  int64_t batch;
  OptimizerKind optimizer;
  float momentum;
};

std::vector<MemoryCase> cases() {
  return {{"cifar-cnn", 16, OptimizerKind::kSgd, 0.0f},              // sequential, ping-pong
          {"dense-100", 8, OptimizerKind::kAdam, 0.0f},              // two states
          {"cifar-resnet:depth=20", 8, OptimizerKind::kAdam, 0.0f},  // a graph's arenas
          {"gpt:preset=micro", 4, OptimizerKind::kSgd, 0.9f}};       // attention, tied weights
}

// The plan of training case `c` on one device of `kind`, in the precision in effect: on a
// device that only plans, as `models --batch` makes it, unless `plan_only` is false.
TrainingMemory planned(const MemoryCase& c, DeviceKind kind, const OptimizerConfig& optimizer,
                       bool plan_only = true) {
  // One thread, as the runs: oneDNN's scratchpads grow with the threads.
  const ModelDef def = make_model(c.model);
  return plan_training(def, def.default_input, kind,
                       BackendOptions{.cpu_threads = 1, .cpu_devices = 1, .plan_only = plan_only},
                       c.batch, optimizer, /*staged=*/true);
}

// The process's resident memory, from /proc/self/statm.
int64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0;
  int64_t resident = 0;
  statm >> size >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

// In every precision the device offers: fp32, bf16 (whose kernels hold bf16 copies of their
// operands) and on `sim` emulated fp16 (fp32 copies rounded to fp16, and the loss scaler's flag).
TEST(TrainingMemory, TheMeasuredPeakIsThePlannedOne) {
  for (const DeviceKind kind : {DeviceKind::kCpu, DeviceKind::kSim}) {
    for (const Precision precision : kernel_backend(kind).precisions()) {
      for (const MemoryCase& c : cases()) {
        SCOPED_TRACE(c.model + " on " + to_string(kind) + " in " + to_string(precision));
        TrainOptions o =
            testing_util::short_run(c.model, std::string(to_string(kind)) + ":1", c.batch, 3);
        o.optimizer.kind = c.optimizer;
        o.optimizer.momentum = c.momentum;
        o.precision = to_string(precision);
        const RunReport run = train(o);
        const auto measured = static_cast<double>(run.peak_memory_bytes.at(0));
        const testing_util::PrecisionScope scope(precision);
        const auto plan = static_cast<double>(planned(c, kind, o.optimizer).total());
        EXPECT_LE(std::abs(measured - plan), 0.05 * plan) << measured << " bytes measured";
      }
    }
  }
}

Model::Memory model_memory(const MemoryCase& c, DeviceKind kind, Precision precision) {
  const testing_util::PrecisionScope scope(precision);
  return planned(c, kind, OptimizerConfig{}).model;
}

// Autocast's saved tensors: under bf16 and fp16 the outputs a backward reads are kept in 16
// bits, half fp32's bytes, and every fp32 output only while its readers' forwards run. With
// the kernels' 16-bit copies in one shared pool, a deep model's bf16 step needs less than
// fp32's; a shallow sequence's need not (cifar-cnn at 16: 14.8 MiB against 12.8, its forward
// arena and its weights' bf16 copies outweighing the 2 MiB saved).
TEST(TrainingMemory, SixteenBitPrecisionsSaveActivationsInHalfTheBytes) {
  for (const DeviceKind kind : {DeviceKind::kCpu, DeviceKind::kSim}) {
    for (const MemoryCase& c : cases()) {
      const Model::Memory fp32 = model_memory(c, kind, Precision::kFp32);
      for (const Precision half : kernel_backend(kind).precisions()) {
        if (!half_format(half)) continue;
        SCOPED_TRACE(c.model + " on " + to_string(kind) + " in " + to_string(half));
        const Model::Memory m = model_memory(c, kind, half);
        EXPECT_EQ(m.kept * 2, fp32.kept);
        EXPECT_EQ(m.parameters, fp32.parameters);
        if (half == Precision::kBf16 && !make_model(c.model).inputs.empty()) {
          EXPECT_LT(m.total(), fp32.total());
        }
      }
    }
  }
}

// What a GPU would allocate, as `sim` plans it, beside PyTorch 2.11's max_memory_allocated
// for the same model, batch and precision on an H200 (2026-12-04, docs/gpu-path.md; the GPU's
// own plan equalled its measured peak): within a tenth of it (issue 39). fp32 stands for TF32,
// whose tensors are fp32's. Not fp16: `sim` emulates it through fp32 copies a GPU has no use
// for (ResNet-50's kernels plan 600 MiB against bf16's 375).
TEST(TrainingMemory, ResNet50AndGpt2SmallPlanWithinATenthOfPyTorchsPeak) {
  struct Anchor {
    MemoryCase c;
    Precision precision;
    double pytorch_gib;
  };
  const MemoryCase resnet{"resnet:depth=50", 64, OptimizerKind::kAdam, 0.0f};
  const MemoryCase gpt{"gpt:preset=small", 8, OptimizerKind::kAdam, 0.0f};
  for (const Anchor& a :
       {Anchor{resnet, Precision::kFp32, 10.16}, Anchor{resnet, Precision::kBf16, 3.09},
        Anchor{gpt, Precision::kFp32, 10.61}, Anchor{gpt, Precision::kBf16, 8.11}}) {
    if (testing_util::bf16_refused_here(a.precision)) continue;
    SCOPED_TRACE(a.c.model + " in " + to_string(a.precision));
    const testing_util::PrecisionScope scope(a.precision);
    OptimizerConfig adam;
    adam.kind = OptimizerKind::kAdam;
    const auto plan = static_cast<double>(planned(a.c, DeviceKind::kSim, adam).total());
    EXPECT_LE(plan, 1.1 * a.pytorch_gib * static_cast<double>(int64_t{1} << 30))
        << plan / static_cast<double>(int64_t{1} << 30) << " GiB planned";
  }
}

// A device that only plans hands out address space and runs nothing; what it plans is, part
// by part, what a device that allocates every tensor plans.
TEST(TrainingMemory, APlanOnlyDevicePlansWhatAnAllocatingOneDoes) {
  for (const DeviceKind kind : {DeviceKind::kCpu, DeviceKind::kSim}) {
    for (const Precision precision : kernel_backend(kind).precisions()) {
      for (const MemoryCase& c : cases()) {
        SCOPED_TRACE(c.model + " on " + to_string(kind) + " in " + to_string(precision));
        const testing_util::PrecisionScope scope(precision);
        const TrainingMemory a = planned(c, kind, OptimizerConfig{}, /*plan_only=*/false);
        const TrainingMemory p = planned(c, kind, OptimizerConfig{}, /*plan_only=*/true);
        EXPECT_EQ(p.model.parameters, a.model.parameters);
        EXPECT_EQ(p.model.kept, a.model.kept);
        EXPECT_EQ(p.model.transient, a.model.transient);
        EXPECT_EQ(p.model.gradients, a.model.gradients);
        EXPECT_EQ(p.model.kernels, a.model.kernels);
        EXPECT_EQ(p.optimizer, a.optimizer);
        EXPECT_EQ(p.input, a.input);
        EXPECT_GT(p.total(), 0);
      }
    }
  }
}

// So a batch past this machine's memory plans (allocating it would fail), and planning it
// takes none of that memory.
TEST(TrainingMemory, APlanPastTheMachinesMemoryTakesNoneOfIt) {
  const int64_t machine = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  for (const DeviceKind kind : {DeviceKind::kCpu, DeviceKind::kSim}) {
    SCOPED_TRACE(to_string(kind));
    MemoryCase c{"gpt:preset=mini", 64, OptimizerKind::kAdam, 0.0f};
    const int64_t at_64 = planned(c, kind, OptimizerConfig{}).total();
    c.batch = 64 * (2 * machine / at_64 + 1);  // about twice the machine
    const int64_t before = resident_bytes();
    const int64_t plan = planned(c, kind, OptimizerConfig{}).total();
    EXPECT_GT(plan, machine) << "batch " << c.batch;
    EXPECT_LT(resident_bytes() - before, int64_t{256} << 20);
  }
}

// A run that runs out of memory says what its batch plans (the plan above), so the user sees
// how far off the batch is; the error reads as the user's, without our source line.
TEST(TrainingMemory, OutOfMemorySaysWhatTheBatchPlans) {
  for (const DeviceKind kind : {DeviceKind::kCpu, DeviceKind::kSim}) {
    SCOPED_TRACE(to_string(kind));
    const MemoryCase c{"dense-100", 2000, OptimizerKind::kSgd, 0.9f};
    TrainOptions o =
        testing_util::short_run(c.model, std::string(to_string(kind)) + ":1", c.batch, 1);
    o.optimizer.kind = c.optimizer;
    o.optimizer.momentum = c.momentum;
    o.memory_limit_mb = 0.5;  // dense-100's weights fit, its batch of 2000 does not
    std::string plan;
    {
      const testing_util::PrecisionScope scope(Precision::kFp32);  // the run's
      plan = memory_size(planned(c, kind, o.optimizer).total());
    }
    try {
      train(o);
      ADD_FAILURE() << "dense-100 at 2000 fit in 0.5 MiB";
    } catch (const OutOfMemoryError& e) {
      EXPECT_CONTAINS(e.brief(), "out of memory");
      EXPECT_CONTAINS(e.brief(), fmt::format("plans a peak of {} on each", plan)) << e.brief();
      EXPECT_CONTAINS(e.brief(), fmt::format("`scalescope models dense-100 --batch 2000 --devices "
                                             "{}:1 --threads 1 --precision fp32 --optimizer sgd "
                                             "--momentum 0.9`",
                                             to_string(kind)));
      EXPECT_EQ(error_text(e, false), e.brief());
    }
  }
}

}  // namespace
}  // namespace scalescope
