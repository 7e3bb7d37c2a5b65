// Gradient buckets: consecutive layers' gradients, in reverse layer order, all-reduced as one
// message as soon as the backward of all of them has run.
#pragma once

#include <cstdint>
#include <vector>

#include "models/model.h"

namespace scalescope {

struct Bucket {
  int64_t begin = 0;  // range of Model::grads(), in floats
  int64_t end = 0;
  int first_layer = 0;  // the lowest layer index in the bucket: its backward completes it
  int last_layer = 0;
  int64_t bytes() const { return (end - begin) * static_cast<int64_t>(sizeof(float)); }
};

// Buckets of at most `cap_bytes` (a layer larger than the cap is a bucket of its own); the
// first bucket, which the last layers fill early in backward, is capped at
// `first_cap_bytes` so that communication starts soon (PyTorch DDP's 1 MB / 25 MB).
// Buckets are returned in the order backward completes them and tile grads() exactly.
// Throws Error for a non-positive cap.
std::vector<Bucket> plan_buckets(const Model& model, int64_t cap_bytes, int64_t first_cap_bytes);

}  // namespace scalescope
