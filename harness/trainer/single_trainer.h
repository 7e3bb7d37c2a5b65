// Training on one device: the step loop that `scalescope train` runs today. The mirrored
// trainer (several replicas, all-reduce) generalises it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "models/kernels.h"
#include "reports/run_report.h"

namespace scalescope {

struct TrainOptions {
  std::string model = "cifar-cnn";
  std::string devices = "cpu:1";
  int threads = 0;  // per CPU device; 0: all cores divided by the device count
  int64_t batch = 64;
  int64_t steps = 200;
  OptimizerConfig optimizer;
  uint64_t seed = 1;
  std::string save;  // checkpoint to write at the end ("" = none)
  std::string load;  // checkpoint to start from ("" = fresh weights from the seed)
  int64_t warmup_steps = 5;
  std::string command_line;
  // Called after every step (progress output).
  std::function<void(const StepRecord&)> on_step;
};

// Checks every option before any work starts; throws Error naming the bad value and what
// would be accepted.
void validate(const TrainOptions& options);

// Trains and returns the record of the run. Throws Error on failure.
RunReport train(const TrainOptions& options);

}  // namespace scalescope
