// Per-sample map stage: normalisation and augmentation of channels-last images, and an
// optional emulated decoding cost. Random choices come from a generator seeded by
// (seed, epoch, sample index), so a sample is augmented the same way whichever worker, and
// however many workers, process it.
#pragma once

#include <cstdint>
#include <vector>

#include "core/shape.h"

namespace scalescope {

struct TransformConfig {
  // Per-channel (x - mean) / stddev; empty vectors: no normalisation. An image [H, W, C]
  // takes C values; any other sample one value, or one per element of its last dimension.
  std::vector<float> mean;
  std::vector<float> stddev;
  // Random crop back to the original size after zero-padding every side by this many
  // pixels (0: off). Images only.
  int crop_padding = 0;
  // Random horizontal flip with probability 1/2. Images only.
  bool flip = false;
  // Busy CPU time per sample, in microseconds, emulating heavy decoding (0: none).
  int64_t decode_cost_us = 0;

  bool any() const { return !mean.empty() || crop_padding > 0 || flip || decode_cost_us > 0; }
};

// Throws Error naming the bad value: stats sized unlike the channels, a non-positive
// stddev, a negative padding or cost, crop or flip on a non-image shape.
void validate(const TransformConfig& config, const Shape& sample_shape);

// Applies `config` to one sample in place. `scratch` holds at least sample_shape.numel()
// floats (the crop's source). REQUIRES: validate() passed.
void apply_transforms(const TransformConfig& config, const Shape& sample_shape, uint64_t seed,
                      int64_t epoch, int64_t index, float* sample, float* scratch);

}  // namespace scalescope
