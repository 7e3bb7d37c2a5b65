// Evaluation of a model over a whole dataset: mean loss and accuracy.
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

// Runs the model over every sample of `data` in order, `batch` at a time (the last batch
// may be smaller), with `transforms` applied (normalisation; no augmentation).
// REQUIRES: the model's device current. Synchronises once per batch: evaluation is not timed.
EvalResult evaluate(Model& model, const Dataset& data, const TransformConfig& transforms,
                    int64_t batch, uint64_t seed);

}  // namespace scalescope
