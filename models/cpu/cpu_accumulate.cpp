// Gradient accumulation on CPU memory: one element-wise pass, so the sum of each element is
// the same whatever the thread count.
#include <algorithm>
#include <cstdint>

#include "models/cpu/cpu_kernels.h"

namespace scalescope {

void accumulate_into_cpu(float* acc, const float* grads, int64_t count, bool first) {
  if (first) {
    // A copy rather than zeroing `acc` first: one pass over the memory instead of two.
    std::copy(grads, grads + count, acc);
    return;
  }
  // The team of the calling thread: a replica's device set its thread count (make_current).
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < count; ++i) acc[i] += grads[i];
}

}  // namespace scalescope
