// The data a run trains and evaluates on, opened from a --data spec for one model.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "models/zoo.h"
#include "pipelines/dataset.h"
#include "pipelines/transforms.h"

namespace scalescope {

struct DataOptions {
  std::string spec = "synthetic";
  // Normalise file-backed data per channel with the training split's statistics.
  bool normalize = true;
  int crop_padding = 0;
  bool flip = false;
  // false: every epoch reads the training split in file order (see pipelines/sampler.h), so
  // another framework fed the same file in order sees the same batches in the same steps.
  bool shuffle = true;
  int64_t decode_cost_us = 0;
  // Train on the first this many samples of the training split only (0: all of it).
  int64_t train_samples = 0;
  int workers = 1;
  int queue_depth = 2;
};

struct RunData {
  DataSpec spec;
  // The model's input: the data's sample shape (synthetic data takes the model's own).
  Shape sample_shape;
  std::shared_ptr<const Dataset> train;
  std::shared_ptr<const Dataset> eval;
  // Map stage of training batches, and of evaluation batches (normalisation only).
  TransformConfig train_transforms;
  TransformConfig eval_transforms;
  // synthetic:device: one batch generated once and reused from device memory.
  bool device_resident = false;
};

// Checks the options (throws Error naming the bad value), opens the data (reading and
// checking every file) and checks that `model` can train on it: its input shape and its
// loss's label format. `seed` seeds synthetic data.
RunData open_run_data(const DataOptions& options, const ModelDef& model, uint64_t seed);

}  // namespace scalescope
