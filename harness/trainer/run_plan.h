// What a run needs before any replica starts, opened alike by every process: the devices,
// the model, the data and its sampler, the batch and how the replicas spread over the
// processes. Constructing it checks all of it (Error naming the bad value).
#pragma once

#include <cstdint>

#include "core/device_spec.h"
#include "harness/trainer/data.h"
#include "harness/trainer/layout.h"
#include "harness/trainer/options.h"
#include "models/zoo.h"
#include "pipelines/sampler.h"

namespace scalescope {

struct RunPlan {
  DeviceSpec spec;
  Precision precision;  // run_precision: what the kernels compute in
  ModelDef def;
  RunData data;
  ModelSummary summary;
  int replicas = 0;
  int64_t batch = 0;  // per replica and micro-batch
  ProcessLayout layout;
  Sampler sampler;  // a replica's share of a step is `accumulation` micro-batches
  // The run's length in steps when known before it starts (0 with an adaptive warm-up,
  // whose length depends on when the step time settles).
  int64_t steps = 0;

  explicit RunPlan(const TrainOptions& options);
};

}  // namespace scalescope
