// The launch shape of our element-wise kernels (models/cuda/*.cu): blocks of kThreads, and
// grid-stride loops with 64-bit indices (activations may pass 2^31 elements) over a grid
// capped at kMaxBlocks: more blocks than the GPU holds at once buy nothing for memory-bound
// loops.
#pragma once

#include <algorithm>
#include <cstdint>

#include "models/kernel_math/element_loop.h"
#include "models/kernel_math/int_divider.h"

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

// The element-wise kernels' loop (kernel_math/element_loop.h): this thread's grid-stride
// elements, kElementsAhead at a time, all read before any is written.
template <class Load, class Store>
__device__ void for_each_element(int64_t count, const Load& load, const Store& store) {
  kernel_math::for_each_element(first_index(), grid_stride(), count, load, store);
}

// The grid of a for_each_element kernel over `count` elements: kElementsAhead a thread.
inline unsigned grid_for_elements(int64_t count) {
  return grid_for(kernel_math::element_threads(count));
}

// Calls launch(by) with `by` dividing by `divisor`: a kernel_math::IntDivider where every index
// below `count` is within its limit (a multiply-high where nvcc divides in about 20
// instructions), plain division otherwise.
template <class Launch>
void with_divider(int64_t count, int64_t divisor, const Launch& launch) {
  if (count < kernel_math::IntDivider::kLimit) {
    launch(kernel_math::IntDivider{divisor});
  } else {
    launch(kernel_math::PlainDivider{divisor});
  }
}

// Kernels that give each row to a warp: warps stride over the rows, and all lanes of a warp stay
// on one row, so the shuffles always see all 32.
inline constexpr int kWarp = 32;
static_assert(kThreads % kWarp == 0, "whole warps per block");
__device__ inline int64_t first_warp() {
  return first_index() / kWarp;
}
__device__ inline int64_t warp_stride() {
  return grid_stride() / kWarp;
}
__device__ inline int lane() {
  return static_cast<int>(threadIdx.x % kWarp);
}

// Combines the partial values of a warp's lanes: lane i adds (or takes the max with) lane
// i ^ offset's value for offset 16, 8, ..., 1. Every lane gets the same result (each step
// combines the same pair on both sides, and addition commutes), in the pairwise order the host
// math of kernel_math/ reproduces.
struct WarpReduce {
  __device__ float max(float v) const {
    for (int offset = kWarp / 2; offset > 0; offset /= 2) {
      v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
    }
    return v;
  }
  template <class T>
  __device__ T sum(T v) const {
    for (int offset = kWarp / 2; offset > 0; offset /= 2) {
      v = v + __shfl_xor_sync(0xffffffffu, v, offset);
    }
    return v;
  }
};

}  // namespace scalescope::cuda_ops
