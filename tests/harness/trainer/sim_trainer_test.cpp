// The trainer on simulated devices. Against CPU replicas: the same run on sim:N and cpu:N ends
// with the same weights, with the streams' operations delayed at random (chaos jitter) or
// not; a missing event wait in the accelerator path shows here as different weights or a
// failed check. And a failing replica stops the others at once, naming itself.
//
// With one or two replicas the bits are the same: the same kernels run the same arithmetic,
// and a sum of two floats does not depend on the order. With four, the CPU replicas' Gloo ring
// adds each chunk's four values in another order than the simulated devices' rank-order sum,
// so the weights agree to rounding (1e-4 relative, the tolerance of every equivalence test).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <string>
#include <vector>

#include "core/error.h"
#include "harness/trainer/trainer.h"
#include "tests/harness/trainer/train_helpers.h"
#include "tests/test_util.h"

namespace scalescope {
namespace {

struct SimCase {
  int replicas;
  OptimizerKind optimizer;
  bool overlap;
  int accumulation;
  int jitter_us;
};

class SimEquivalence : public testing::TestWithParam<SimCase> {};

TEST_P(SimEquivalence, SimulatedDevicesTrainLikeCpuReplicas) {
  const SimCase c = GetParam();
  TrainOptions o = testing_util::equivalence_options(c.optimizer, c.overlap);
  o.batch = 8;
  o.accumulation = c.accumulation;
  o.check_every = 2;
  TrainOptions cpu = o;
  cpu.devices = "cpu:" + std::to_string(c.replicas);
  TrainOptions sim = o;
  sim.devices = "sim:" + std::to_string(c.replicas);
  const std::vector<NamedTensor> expected = testing_util::trained_weights(cpu, "cpu");
  setenv("SCALESCOPE_SIM_JITTER_US", std::to_string(c.jitter_us).c_str(), 1);
  const std::vector<NamedTensor> got = testing_util::trained_weights(sim, "sim");
  unsetenv("SCALESCOPE_SIM_JITTER_US");
  if (c.replicas <= 2) {
    EXPECT_TRUE(testing_util::identical(got, expected));
  } else {
    EXPECT_LT(testing_util::worst_difference(got, expected), 1e-4);
  }
}

std::string name(const testing::TestParamInfo<SimCase>& info) {
  const SimCase& c = info.param;
  return std::to_string(c.replicas) + "x" + (c.optimizer == OptimizerKind::kSgd ? "Sgd" : "Adam") +
         (c.overlap ? "Overlap" : "NoOverlap") +
         (c.accumulation > 1 ? "Accumulate" + std::to_string(c.accumulation) : "") +
         (c.jitter_us > 0 ? "Jitter" : "");
}

INSTANTIATE_TEST_SUITE_P(Cases, SimEquivalence,
                         testing::Values(SimCase{1, OptimizerKind::kSgd, true, 1, 0},
                                         SimCase{1, OptimizerKind::kAdam, true, 2, 200},
                                         SimCase{2, OptimizerKind::kSgd, true, 1, 0},
                                         SimCase{2, OptimizerKind::kSgd, true, 1, 200},
                                         SimCase{2, OptimizerKind::kAdam, false, 1, 200},
                                         SimCase{2, OptimizerKind::kSgd, true, 3, 200},
                                         SimCase{2, OptimizerKind::kAdam, true, 2, 0},
                                         SimCase{4, OptimizerKind::kSgd, true, 1, 200},
                                         SimCase{4, OptimizerKind::kAdam, true, 1, 0},
                                         SimCase{4, OptimizerKind::kSgd, false, 2, 200},
                                         SimCase{4, OptimizerKind::kAdam, true, 2, 200}),
                         name);

// A collective timeout far longer than the tests' runs: waiting it out shows.
TrainOptions with_long_timeout(TrainOptions o) {
  o.collective_timeout_ms = 30000;
  return o;
}

TrainHooks replica_1_fails_after_step_2() {
  TrainHooks hooks;
  hooks.after_step = [](int rank, int64_t step, std::span<float>) {
    if (rank == 1 && step == 2) throw_error("injected fault");
  };
  return hooks;
}

// Replica 1 fails after step 2 while the others are already inside step 3, their collectives
// enqueued and waiting for it: the abort stops them long before the collective timeout, the
// run's error is replica 1's own, and the streams and communicators tear down without hanging.
TEST(SimTrainer, AFailingReplicaStopsItsPeersAtOnce) {
  const TrainOptions o = with_long_timeout(testing_util::short_run("dense-100", "sim:3", 8, 10));
  const TrainHooks hooks = replica_1_fails_after_step_2();
  const auto start = std::chrono::steady_clock::now();
  try {
    train(o, hooks);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.rank(), 1);
    EXPECT_NE(std::string(e.what()).find("injected fault"), std::string::npos) << e.what();
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 10.0) << "the peers waited for the collective timeout";
}

// Replica 1 fails after step 2, and replica 0 fails in step 3 after queueing its gradients'
// all-reduce (which replica 1 never joins), by an error of its own before the step's host
// wait. Like an NCCL kernel, that all-reduce waits on replica 0's stream until replica 0's
// communicator is aborted; tearing the replica down frees pinned memory, which waits for the
// device as cudaFreeHost does. So the communicators must be aborted before the teardown, or
// the run would stall until the collective timeout (on a GPU, forever).
TEST(SimTrainer, AReplicaThatFailsWithCollectivesQueuedAbortsThemBeforeItsTeardown) {
  const TrainOptions o = with_long_timeout(testing_util::short_run("dense-100", "sim:2", 8, 10));
  TrainHooks hooks = replica_1_fails_after_step_2();
  hooks.before_step_wait = [](int rank, int64_t step) {
    if (rank == 0 && step == 3) throw_error("second fault, with the all-reduce queued");
  };
  const auto start = std::chrono::steady_clock::now();
  testing::internal::CaptureStderr();
  const std::string e = testing_util::error_of([&] { train(o, hooks); });
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_NE(e.find("fault"), std::string::npos) << e;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 10.0) << "a replica's teardown waited for its queued all-reduce";
  // The aborted all-reduce faults replica 0's device, which every later wait of its three
  // streams and its freed buffers then rethrows: the log says so once at most (not at all when
  // no wait of the teardown comes after the fault, as a ThreadSanitizer run's timing once had
  // it), not once per stream and buffer.
  EXPECT_LE(testing_util::count_of(log, "sim device 0: waiting for a stream's work failed"), 1u)
      << log;
}

// Libraries' own device memory (NCCL's buffers on a GPU; on sim, what
// SCALESCOPE_SIM_LIBRARY_MB says) is reported and counted against --memory-limit-mb from the
// first step on: a limit that the model alone fits under but the model and the libraries do
// not fails the run as out of memory, naming the libraries' share.
TEST(SimTrainer, LibrariesMemoryCountsAgainstTheMemoryLimit) {
  TrainOptions o = testing_util::short_run("dense-100", "sim:1", 8, 3);
  const RunReport alone = train(o);
  EXPECT_EQ(alone.library_memory_bytes, std::vector<int64_t>{0});
  const int64_t model_bytes = alone.peak_memory_bytes.at(0);

  setenv("SCALESCOPE_SIM_LIBRARY_MB", "8", 1);
  o.memory_limit_mb = static_cast<double>(model_bytes) / (1 << 20) + 12.0;
  const RunReport roomy = train(o);
  EXPECT_EQ(roomy.library_memory_bytes, std::vector<int64_t>{8 << 20});
  o.memory_limit_mb = static_cast<double>(model_bytes) / (1 << 20) + 4.0;
  try {
    train(o);
    ADD_FAILURE() << "the model and 8 MiB of library buffers fit under the model's size + 4 MiB";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("out of memory"), std::string::npos) << what;
    EXPECT_NE(what.find("8388608 bytes held by libraries"), std::string::npos) << what;
  }
  unsetenv("SCALESCOPE_SIM_LIBRARY_MB");
}

}  // namespace
}  // namespace scalescope
