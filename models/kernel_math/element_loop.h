// The loop of our element-wise kernels, as a plain function of the thread's first element and
// the grid's stride (launch_shape.cuh's for_each_element passes first_index() and
// grid_stride()), so that host tests check which elements each thread takes.
//
// Each thread takes kElementsAhead of its grid-stride elements a step, reading all of them
// (`load(i)`: every value the element needs from memory) before writing any (`store(i, loaded)`).
// Written as one loop of reads and writes, nvcc keeps a thread's reads and writes in program
// order (they might alias), so a thread had one element's reads in flight at a time: the sm_90
// SASS showed LDG, LDG, STG per element. An H200 SM's 2048 threads then keep about 8 KB of
// reads in flight, where its share of the memory bandwidth (4.8 TB/s over 132 SMs) times a
// load's latency (about 0.6 µs) is about three times that. The same elements get the same
// results: only the order of a thread's accesses to different elements changes.
#pragma once

#include <cstdint>

#include "models/kernel_math/host_device.h"

namespace scalescope::kernel_math {

inline constexpr int kElementsAhead = 4;

template <class Load, class Store>
SS_HOST_DEVICE void for_each_element(int64_t first, int64_t stride, int64_t count, const Load& load,
                                     const Store& store) {
  for (int64_t base = first; base < count; base += kElementsAhead * stride) {
    decltype(load(base)) loaded[kElementsAhead];
    SS_UNROLL
    for (int u = 0; u < kElementsAhead; ++u) {
      if (base + u * stride < count) loaded[u] = load(base + u * stride);
    }
    SS_UNROLL
    for (int u = 0; u < kElementsAhead; ++u) {
      if (base + u * stride < count) store(base + u * stride, loaded[u]);
    }
  }
}

// The threads a kernel over `count` elements needs: kElementsAhead elements each.
SS_HOST_DEVICE inline int64_t element_threads(int64_t count) {
  return (count + kElementsAhead - 1) / kElementsAhead;
}

}  // namespace scalescope::kernel_math
