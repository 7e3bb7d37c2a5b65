#include "harness/trainer/results.h"

#include <gtest/gtest.h>

#include "tests/reports/json_round_trip.h"
#include "tests/test_util.h"

namespace scalescope {
namespace {

PhaseTimes phases(double step_ms) {
  PhaseTimes p;
  p[Phase::kForward] = step_ms / 2;
  p[Phase::kBackward] = step_ms / 2;
  p.step_ms = step_ms;
  p.start_ms = 3 * step_ms;
  p.buckets = {{.start_ms = 1.0, .ms = 0.25}};
  p.copy = {.start_ms = 0.5, .ms = 0.125};
  return p;
}

// What a process sends the others: its replicas' records, the group's, its GPUs' sampling.
RunResults sample() {
  RunResults r(2);
  for (size_t rank = 0; rank < 2; ++rank) {
    ReplicaRecord& replica = r.replicas[rank];
    replica.phases = {phases(10.0), phases(11.0)};
    replica.losses = {2.5, 2.25};
    replica.grad_sq_local = {4.0, 3.5};
    replica.grad_sq_global = {1.0, 0.75};
    replica.peak_memory_bytes = int64_t{1} << 30;
    replica.measured_allocations = 3;
    replica.library_memory_bytes = int64_t{64} << 20;
    replica.wait_overshoot_ms = 0.05;
  }
  GroupRecord& g = r.group;
  g.steps = 2;
  g.warmup_steps = 1;
  g.warmup_settled = false;
  g.bucket_ms = {{1.0, 2.0}, {1.5, 2.5}};
  g.bucket_bytes = {4096, 8192};
  g.evals = {{.epoch = 1, .step = 2, .loss = 2.0, .accuracy = 0.25}};
  g.target_step = 2;
  g.target_wall_ms = 25.0;
  g.lrs = {0.01, 0.02};
  g.consistency_checks = 1;
  g.allreduce_split =
      AllReduceSplit{.bytes = 12288, .nodes = 2, .repeats = 3, .global_ms = 2.0, .node_ms = 1.0};
  g.threads_per_device = 4;
  g.communication_threads_per_device = 2;
  g.kernels = {{.layer = 1,
                .layer_name = "dense(10)",
                .pass = "forward",
                .algorithm = "gemm",
                .math = "fp32",
                .layout = "NC",
                .deterministic = false,
                .workspace_bytes = 64,
                .workspace_limit_bytes = 128,
                .workspace_limit_rule = "128 = max(shared 0, 1024 free / 8)",
                .fallback = "none fits"}};
  g.layer_profile = {{.layer = 2,
                      .layer_name = "fc Dense(10)",
                      .forward_ms = 0.5,
                      .backward_ms = 1.25,
                      .forward_flops = 2560}};
  g.loss_scaling = LossScalingRecord{.initial_scale = 1024.0,
                                     .growth_factor = 4.0,
                                     .backoff_factor = 0.25,
                                     .growth_interval = 7,
                                     .final_scale = 256.0,
                                     .skipped_steps = {1}};
  r.gpu_utilization = {{.host = "node7",
                        .pci_bus_id = "00000000:18:00.0",
                        .samples = 10,
                        .failed_samples = 1,
                        .mean_gpu_util_percent = 50.0,
                        .max_gpu_util_percent = 90.0,
                        .mean_memory_util_percent = 20.0,
                        .max_memory_used_bytes = 1024,
                        .error = "one reading timed out"}};
  return r;
}

// Every key of the records that cross processes is read back into its field.
TEST(Results, EveryKeyRoundTrips) {
  const RunResults sent = sample();
  const nlohmann::json message = results_to_json(sent, 0, 2, true);
  RunResults received(2);
  add_results(received, message, "node7", "the results of process 1");

  RunResults defaults(1);
  defaults.group.evals = {EvalRecord{}};
  defaults.group.kernels = {KernelChoiceRecord{}};
  defaults.group.layer_profile = {LayerTimeRecord{}};
  defaults.group.loss_scaling = LossScalingRecord{};
  defaults.gpu_utilization = {GpuUtilization{}};
  nlohmann::json default_message = results_to_json(defaults, 0, 1, true);
  default_message["replicas"][0].erase("rank");  // replica 0's is a default record's
  testing_util::expect_round_trip(message, default_message, results_to_json(received, 0, 2, true));
}

}  // namespace
}  // namespace scalescope
