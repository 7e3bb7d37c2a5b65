// The launch shape of our element-wise kernels (models/cuda/*.cu): blocks of kThreads, and
// grid-stride loops with 64-bit indices (activations may pass 2^31 elements) over a grid
// capped at kMaxBlocks: more blocks than the GPU holds at once buy nothing for memory-bound
// loops.
#pragma once

#include <algorithm>
#include <cstdint>

namespace scalescope::cuda_ops {

inline constexpr int kThreads = 256;
inline constexpr int64_t kMaxBlocks = 8192;

inline unsigned grid_for(int64_t threads_needed) {
  return static_cast<unsigned>(
      std::min<int64_t>((threads_needed + kThreads - 1) / kThreads, kMaxBlocks));
}

__device__ inline int64_t first_index() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline int64_t grid_stride() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

}  // namespace scalescope::cuda_ops
