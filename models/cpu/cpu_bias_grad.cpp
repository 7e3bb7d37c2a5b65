// A dense layer's bias gradient on CPU, db[c] = Σ_r dy[r, c], in bias_math.h's order: the CUDA
// kernel's bits, and one pass over dy in row order. oneDNN 2.6 has no column sum of its own: as
// a matmul of a row of ones against dy (brg:avx512_core, M = 1) it took 0.78 ms for gpt mini's
// 2048 × 1024 gradient on one thread inside a step, more than reading those 8 MB needs.
#include <omp.h>

#include <cstdint>
#include <vector>

#include "models/cpu/cpu_kernels.h"
#include "models/cpu/vector_clones.h"
#include "models/kernel_math/bias_math.h"
#include "models/kernel_math/half_math.h"

namespace scalescope {
namespace {

namespace km = kernel_math;

// Flattened, so that the part's loops are compiled as each clone (GCC inlined none on its own).
SCALESCOPE_VECTOR_CLONES [[gnu::flatten]] void part_sums(const float* dy, int64_t rows,
                                                         int64_t channels,
                                                         const km::BiasGradPlan& plan, int64_t part,
                                                         float* acc, float* out) {
  km::bias_grad_part_on_host([dy](int64_t i) { return dy[i]; }, rows, channels, plan, part, acc,
                             out);
}

SCALESCOPE_VECTOR_CLONES [[gnu::flatten]] void part_sums_bf16(const uint16_t* dy, int64_t rows,
                                                              int64_t channels,
                                                              const km::BiasGradPlan& plan,
                                                              int64_t part, float* acc,
                                                              float* out) {
  km::bias_grad_part_on_host([dy](int64_t i) { return km::bf16_to_float(dy[i]); }, rows, channels,
                             plan, part, acc, out);
}

}  // namespace

void bias_grad_cpu(const float* dy, const uint16_t* dy_bf16, int64_t rows, int64_t channels,
                   float* db) {
  const km::BiasGradPlan plan = km::bias_grad_plan(rows);
  const int64_t parts = plan.parts;
  // With one part its sums are db; with more, each part's sums, then added in part order (in
  // the calling thread's buffer, kept between calls: this runs in every backward).
  thread_local std::vector<float> partial;
  partial.resize(static_cast<size_t>(parts > 1 ? parts * channels : 0));
  float* out = parts > 1 ? partial.data() : db;
#pragma omp parallel if (parts > 1)
  {
    thread_local std::vector<float> acc;
    acc.resize(static_cast<size_t>(km::kBiasTileRows * channels));
#pragma omp for schedule(static)
    for (int64_t p = 0; p < parts; ++p) {
      if (dy != nullptr) {
        part_sums(dy, rows, channels, plan, p, acc.data(), out + p * channels);
      } else {
        part_sums_bf16(dy_bf16, rows, channels, plan, p, acc.data(), out + p * channels);
      }
    }
  }
  if (parts == 1) return;
  for (int64_t c = 0; c < channels; ++c) db[c] = km::ordered_sum(out + c, parts, channels);
}

}  // namespace scalescope
