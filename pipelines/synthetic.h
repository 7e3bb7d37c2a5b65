// Synthetic data with learnable labels: every class has a fixed random template, and a
// sample is its class's template plus noise. A model can learn it, so the loss of a
// synthetic run falls, yet it costs no disk and any shape can be made.
#pragma once

#include <cstdint>
#include <vector>

#include "core/random.h"
#include "pipelines/batch.h"

namespace scalescope {

class SyntheticSource {
 public:
  // `noise` is the standard deviation of the (uniform) noise around each template, whose
  // values are standard normal.
  SyntheticSource(Shape sample_shape, LabelSpec labels, uint64_t seed, float noise = 1.0f);

  const Shape& sample_shape() const { return sample_shape_; }
  const LabelSpec& labels() const { return labels_; }
  // Generates the next batch into `batch` (reusing its memory). Generation happens on the
  // host and costs time, as a real input pipeline does.
  void next(int64_t size, HostBatch& batch);

 private:
  Shape sample_shape_;
  LabelSpec labels_;
  float noise_;
  std::vector<std::vector<float>> templates_;
  Rng rng_;
};

}  // namespace scalescope
