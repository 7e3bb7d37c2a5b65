// Evaluation of a model over a dataset, or over one replica's shard of it: loss and accuracy.
#pragma once

#include <cstdint>

#include "models/model.h"
#include "pipelines/dataset.h"
#include "pipelines/transforms.h"

namespace scalescope {

struct EvalResult {
  double loss = 0.0;      // mean over the samples
  double accuracy = 0.0;  // fraction correct
  int64_t samples = 0;
};

// Sums over some samples; shards' sums add up to the whole dataset's.
struct EvalSums {
  double loss = 0.0;     // sum of per-sample losses
  double correct = 0.0;  // samples classified right
  int64_t samples = 0;
  EvalResult result() const;
};

// Runs the model over shard `shard` of `shards` of `data` (contiguous, in order; together
// the shards cover every sample once), `batch` at a time (the last batch may be smaller),
// with `transforms` applied (normalisation; no augmentation).
// REQUIRES: the model's device current; 0 <= shard < shards. Synchronises once per batch:
// evaluation is not timed.
EvalSums evaluate_shard(Model& model, const Dataset& data, const TransformConfig& transforms,
                        int64_t batch, uint64_t seed, int shard, int shards);
// The whole dataset on one device.
EvalResult evaluate(Model& model, const Dataset& data, const TransformConfig& transforms,
                    int64_t batch, uint64_t seed);

}  // namespace scalescope
