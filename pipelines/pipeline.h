// The input pipeline of one replica: its shard of every global batch, read, mapped and
// batched by worker threads into a bounded queue of ready batches, handed over in step
// order. The time a replica blocks in next() is its input wait.
#pragma once

#include <cstdint>
#include <memory>

#include "pipelines/batch.h"
#include "pipelines/dataset.h"
#include "pipelines/sampler.h"
#include "pipelines/transforms.h"

namespace scalescope {

struct PipelineConfig {
  int workers = 1;  // threads filling batches (>= 1)
  // Finished batches that may wait for the consumer beyond the ones workers are filling
  // (>= 1). Memory: queue_depth + workers + 1 batches.
  int queue_depth = 2;
  TransformConfig transforms;
  uint64_t seed = 1;  // augmentation seed (shuffling is the sampler's)
};

// Throws Error naming the bad value.
void validate(const PipelineConfig& config, const Shape& sample_shape);

class InputPipeline {
 public:
  // Starts the workers at batch (first_epoch, step 0). `dataset` and `sampler` must outlive
  // the pipeline. Throws Error for a bad configuration.
  InputPipeline(const Dataset& dataset, const Sampler& sampler, int replica,
                const PipelineConfig& config, int64_t first_epoch = 0);
  // Stops and joins the workers, also while they are blocked on a full queue.
  ~InputPipeline();
  InputPipeline(const InputPipeline&) = delete;
  InputPipeline& operator=(const InputPipeline&) = delete;

  // Blocks until the next batch in order (epoch by epoch, step by step) is ready and returns
  // it; valid until the next call. A worker's error (a failed read) is rethrown here.
  const HostBatch& next();
  // next() when the batch is ready now, else null without waiting (also when a worker failed
  // on it: next() rethrows that). A returned batch is valid until the next call of either.
  const HostBatch* try_next();
  // Position of the batch the last next() returned (before the first: first_epoch, -1).
  int64_t epoch() const;
  int64_t step() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace scalescope
