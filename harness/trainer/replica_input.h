// A replica's batches: its shard of every step from the input pipeline, staged to the
// device; or, with synthetic:device data, one batch staged once and reused by every step,
// so that input costs nothing at all. On devices that copy, the next step's batch is copied
// during the current step when the pipeline has it ready by then (prefetch()).
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
  // Replica `rank` reads `replica_batch` samples per step (all its micro-batches);
  // `prefetch`: whether prefetch() copies ahead.
  ReplicaInput(Device& device, const RunData& data, const DataOptions& options,
               const Sampler& sampler, int rank, int64_t replica_batch, uint64_t seed,
               bool prefetch);

  struct Batch {
    const float* inputs = nullptr;  // device memory
    const float* labels = nullptr;
  };
  // The next step's batch, ready for the work enqueued on `compute` from now: the input
  // wait and the compute's wait for the copy are the step's input and h2d phases on `timer`,
  // and the copy itself is its h2d total.
  Batch next(StepTimer& timer, int64_t step, Stream& compute);
  // Starts copying the next step's batch now when the pipeline has it ready, so that the
  // copy runs while the work already enqueued computes; never waits for the pipeline (a
  // batch that is not ready is waited for in the next step's input phase, where the device
  // really waits). Nothing on devices that read host memory, with device-resident data, or
  // without prefetching. Call after enqueuing a step's work, before the host waits for it.
  void prefetch();
  // The step's work enqueued on `compute` so far is the batch's last use.
  void release(Stream& compute);

 private:
  bool prefetch_;
  std::optional<InputPipeline> pipeline_;
  std::optional<Stager> stager_;
  Tensor resident_inputs_;
  Tensor resident_labels_;
};

}  // namespace scalescope
