// The device memory one replica's training takes at a batch size, by what holds it: the
// model's plan (Model::memory), the optimizer's state, the batch and the loss. `scalescope
// models SPEC --batch B` prints it; a run's measured peak stays within 5% of it when it
// evaluates nothing (TrainingMemory.* tests). An evaluation plans its own batch sizes, and
// gradient accumulation, compression and the noise scale add buffers of their own: not
// counted here.
#pragma once

#include <cstdint>

#include "core/backend.h"
#include "models/model.h"
#include "models/optimizer.h"

namespace scalescope {

struct TrainingMemory {
  Model::Memory model;
  int64_t optimizer = 0;  // the optimizer's state
  int64_t input = 0;      // the batch on the device, inputs and labels (the stager's two slots)
  int64_t loss = 0;       // the step's loss value
  int64_t total() const { return model.total() + optimizer + input + loss; }
};

// `staged`: batches come through the stager (data not resident on the device), which holds
// Stager::device_bytes; otherwise one batch resident on the device.
TrainingMemory training_memory(Model& model, int64_t batch, const OptimizerConfig& optimizer,
                               bool staged);

// training_memory of `def` for samples of `sample` on a device of `kind` opened with `options`
// (made current on the calling thread), in the precision in effect. With `options.plan_only`
// (where can_plan_only) nothing is allocated; otherwise the device allocates what it plans.
// `threads` (when not null) gets the device's CPU threads, which size oneDNN's scratchpads.
TrainingMemory plan_training(const ModelDef& def, const Shape& sample, DeviceKind kind,
                             const BackendOptions& options, int64_t batch,
                             const OptimizerConfig& optimizer, bool staged, int* threads = nullptr);

}  // namespace scalescope
