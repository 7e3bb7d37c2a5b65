// The launch shape of our element-wise kernels (models/cuda/*.cu): blocks of kThreads, and
// grid-stride loops with 64-bit indices (activations may pass 2^31 elements) over a grid
// capped at kMaxBlocks: more blocks than the GPU holds at once buy nothing for memory-bound
// loops. And the one gather kernel that the layout copies of several .cu files share.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "models/kernel_math/element_loop.h"
#include "models/kernel_math/half_math.h"
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

// Where a kernel writes its fp32 results: as they are, or under bf16 and fp16 rounded into the
// model's saved 16-bit copy (to_half, as the model's save rounds), with no fp32 written.
// BitsStore: 16-bit values already rounded (read from a saved copy), stored as they are.
template <class T>
struct PlainStore {
  T* at;
  __device__ void operator()(int64_t i, T v) const { at[i] = v; }
};
using FloatStore = PlainStore<float>;
using BitsStore = PlainStore<uint16_t>;
struct HalfStore {
  uint16_t* at;
  kernel_math::HalfFormat format;
  __device__ void operator()(int64_t i, float v) const { at[i] = kernel_math::to_half(v, format); }
};
// HalfStore with the format a template argument (kernel_math::HalfValuesIn's reason).
template <kernel_math::HalfFormat F>
struct HalfStoreIn {
  uint16_t* at;
  __device__ void operator()(int64_t i, float v) const { at[i] = kernel_math::to_half(v, F); }
};

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

// out[i] = in[from(i)], 0 where from(i) < 0, for i below count: the copies that move elements
// between layouts (zero extension, crop, the pad shortcut both ways), each `from` a functor
// over its kernel_math index function.
template <class From>
__global__ void gather_or_zero_kernel(From from, int64_t count, const float* in, float* out) {
  for_each_element(
      count,
      [&](int64_t i) {
        const int64_t at = from(i);
        return at < 0 ? 0.0f : in[at];
      },
      [&](int64_t i, float v) { out[i] = v; });
}

// A gather's `from`: element i's source index by a kernel_math index function of a shape and
// its dividers (extend_source, shortcut_reader, ...), resolved at compile time.
template <class Shape, class Dividers, auto Index>
struct IndexFrom {
  Shape s;
  Dividers d;
  __device__ int64_t operator()(int64_t i) const { return Index(s, d, i); }
};

// Launches gather_or_zero_kernel over count elements on stream.
template <class From>
void gather_or_zero(From from, int64_t count, const float* in, float* out, cudaStream_t stream) {
  gather_or_zero_kernel<<<grid_for_elements(count), kThreads, 0, stream>>>(from, count, in, out);
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
