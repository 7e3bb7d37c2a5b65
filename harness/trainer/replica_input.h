// A replica's batches: its shard of every step from the input pipeline, staged to the
// device; or, with synthetic:device data, one batch staged once and reused by every step,
// so that input costs nothing at all.
#pragma once

#include <cstdint>
#include <optional>

#include "core/tensor.h"
#include "harness/trainer/data.h"
#include "harness/trainer/step_timer.h"
#include "pipelines/pipeline.h"
#include "pipelines/sampler.h"
#include "pipelines/stager.h"

namespace scalescope {

class ReplicaInput {
 public:
  // Replica `rank` reads `replica_batch` samples per step (all its micro-batches).
  ReplicaInput(Device& device, const RunData& data, const DataOptions& options,
               const Sampler& sampler, int rank, int64_t replica_batch, uint64_t seed);

  struct Batch {
    const float* inputs = nullptr;  // device memory
    const float* labels = nullptr;
  };
  // The next step's batch, ready for the work enqueued on `compute` from now: the input
  // wait and the hand-over to the device are the step's input and h2d phases on `timer`.
  Batch next(StepTimer& timer, int64_t step, Stream& compute);
  // The step's work enqueued on `compute` so far is the batch's last use.
  void release(Stream& compute);

 private:
  std::optional<InputPipeline> pipeline_;
  std::optional<Stager> stager_;
  Tensor resident_inputs_;
  Tensor resident_labels_;
};

}  // namespace scalescope
