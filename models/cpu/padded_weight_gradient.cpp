#include "models/cpu/padded_weight_gradient.h"

#include <fmt/format.h>

#include <oneapi/dnnl/dnnl.h>
#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "core/env.h"

namespace scalescope {
namespace {

// rows × cols floats from `src` (pitch cols) to `dst` (pitch cols + kPad).
void copy_padded(const float* src, int64_t rows, int64_t cols, float* dst) {
  const int64_t ld = cols + PaddedWeightGradient::kPad;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(dst + r * ld, src + r * cols, static_cast<size_t>(cols) * sizeof(float));
  }
}

}  // namespace

bool PaddedWeightGradient::matmul_asked() {
  return choice_from_environment("SCALESCOPE_WEIGHT_GRADIENT", {"padded", "matmul"}) == 1;
}

bool PaddedWeightGradient::wanted(const std::string& implementation) const {
  if (matmul_asked()) return false;
  // The slowdown was measured on a CPU without AVX-512, the only one where oneDNN 2.6's
  // matmul runs gemm:jit; its inner product runs gemm:jit there and with AVX-512 too. The
  // matmul names it "gemm:jit", the inner product "x64:gemm:jit".
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  if (avx512 || implementation.find("gemm:jit") == std::string::npos) return false;
  constexpr int64_t kRowOf4KiB = 4096 / sizeof(float);
  const auto narrow = [](int64_t n) { return n >= kNarrow[0] && n <= kNarrow[1]; };
  return rows >= kMinRows &&
         ((features == kRowOf4KiB && narrow(units)) || (units == kRowOf4KiB && narrow(features)));
}

int64_t PaddedWeightGradient::scratch_bytes() const {
  const int64_t chunk = std::min(kChunkRows, rows);
  return chunk * (units + features + 2 * kPad) * static_cast<int64_t>(sizeof(float));
}

void PaddedWeightGradient::run(const float* dy, const float* x, float* dw, float* scratch) const {
  const int64_t ld_dy = units + kPad, ld_x = features + kPad;
  float* dy_rows = scratch;
  float* x_rows = scratch + std::min(kChunkRows, rows) * ld_dy;
  for (int64_t r0 = 0; r0 < rows; r0 += kChunkRows) {
    const int64_t n = std::min(kChunkRows, rows - r0);
    copy_padded(dy + r0 * units, n, units, dy_rows);
    copy_padded(x + r0 * features, n, features, x_rows);
    const float beta = r0 == 0 ? 0.0f : 1.0f;
    const dnnl_status_t status = dnnl_sgemm('T', 'N', units, features, n, 1.0f, dy_rows, ld_dy,
                                            x_rows, ld_x, beta, dw, features);
    SS_CHECK(status == dnnl_success, "dnnl_sgemm failed for a dense layer's weight gradient");
  }
}

std::string PaddedWeightGradient::implementation_name() {
  return fmt::format("dnnl_sgemm on chunks of {} rows at a padded pitch", kChunkRows);
}

}  // namespace scalescope
