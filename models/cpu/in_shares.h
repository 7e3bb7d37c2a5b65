// Splitting a flat pass over n values among an OpenMP team: each thread takes one contiguous
// share, so that its loop runs over consecutive memory (and a vector clone over long spans).
#pragma once

#include <omp.h>

#include <cstdint>

namespace scalescope::cpu_shares {

// f(begin, end) over a contiguous share of [0, n) on each thread of a team of `threads` (the
// calling thread's team size when 0), or on the calling thread alone when `parallel` is false.
template <class F>
void in_shares(int64_t n, const F& f, int threads = 0, bool parallel = true) {
  const int team = threads > 0 ? threads : omp_get_max_threads();
#pragma omp parallel num_threads(team) if (parallel)
  {
    const int64_t share = omp_get_thread_num(), shares = omp_get_num_threads();
    f(n * share / shares, n * (share + 1) / shares);
  }
}

}  // namespace scalescope::cpu_shares
