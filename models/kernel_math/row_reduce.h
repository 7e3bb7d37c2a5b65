// How a row's math is shared among the threads that compute it, for the row functions of
// kernel_math/ (softmax cross-entropy, the causal softmax): each thread takes the columns
// first, first + step, ... and a reduce combines the threads' partial maxima and sums. On the
// GPU a warp shares a row (cuda_ops::WarpReduce); on the host one thread takes it all.
#pragma once

#include <cstdint>

#include "models/kernel_math/host_device.h"

namespace scalescope::kernel_math {

struct RowShare {
  int64_t first = 0;
  int64_t step = 1;
};

// The reduce of a row one thread computes alone: its partial values are the row's.
struct SerialReduce {
  SS_HOST_DEVICE float max(float v) const { return v; }
  SS_HOST_DEVICE float sum(float v) const { return v; }
  SS_HOST_DEVICE double sum(double v) const { return v; }
};

}  // namespace scalescope::kernel_math
