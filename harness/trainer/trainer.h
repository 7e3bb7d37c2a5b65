// The mirrored (synchronous data-parallel) trainer: one thread per device, each with its own
// model copy, optimizer state and input shard; weights broadcast from replica 0 before the
// first step; gradients all-reduced (averaged) in buckets, as backward makes them ready.
// Status: CPU replicas with Gloo. Not yet: LR scaling rules, gradient accumulation, the
// weight-consistency guard, NCCL/GPU replicas (see the trainer issue).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "harness/trainer/data.h"
#include "models/kernels.h"
#include "reports/run_report.h"

namespace scalescope {

struct TrainOptions {
  std::string model = "cifar-cnn";
  std::string devices = "cpu:1";
  int threads = 0;  // per CPU device; 0: all cores divided by the device count
  int64_t batch = 64;
  // Length: `steps` steps, or `epochs` passes over the training data (exactly one > 0).
  int64_t steps = 200;
  int64_t epochs = 0;
  DataOptions data;
  // Evaluate on the eval split after every epoch (and after a final partial one).
  bool eval = true;
  OptimizerConfig optimizer;
  uint64_t seed = 1;
  std::string save;  // checkpoint to write at the end ("" = none)
  std::string load;  // checkpoint to start from ("" = fresh weights from the seed)
  int64_t warmup_steps = 5;
  // Gradient buckets: all-reduced during backward (overlap) or after it.
  double bucket_cap_mb = 25.0;
  double first_bucket_mb = 1.0;
  bool overlap = true;
  // Every collective gives up after this long (a lost replica must not hang the others).
  int64_t collective_timeout_ms = 60000;
  std::string command_line;
  // Progress: after every step, and after every evaluation.
  std::function<void(const StepRecord&)> on_step;
  std::function<void(const EvalRecord&)> on_eval;
};

// Checks the options that need no data before any work starts; throws Error naming the bad
// value and what would be accepted.
void validate(const TrainOptions& options);

// Trains and returns the record of the run. Throws Error on failure.
RunReport train(const TrainOptions& options);

}  // namespace scalescope
