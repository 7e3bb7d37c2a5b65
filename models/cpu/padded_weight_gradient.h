// An fp32 dense layer's weight gradient, dW = dyᵀ·x, where oneDNN 2.6 runs it as gemm:jit (a CPU
// without AVX-512, whose matmul has no brgemm kernel). gemm:jit packs the operand it reads
// transposed by walking its rows, and a row pitch that is a multiple of 4 KiB puts those rows in
// one set of the L1 cache: on 2 threads of an AVX2 AMD EPYC, dW of 2048 rows at 256 → 1024
// (gpt:preset=mini's c_fc, dy's rows 4 KiB long) took 13.2-17.1 ms (69-81 GFLOP/s), and with
// both operands at a pitch 16 floats longer 6.3-6.4 ms (167-170 GFLOP/s). So such a layer copies
// its rows a chunk at a time to a padded pitch and sums the chunks' products.
#pragma once

#include <cstdint>
#include <string>

namespace scalescope {

struct PaddedWeightGradient {
  // Rows a chunk: its two copies stay in the L2 cache, and its products are long enough sums
  // (256 measured fastest of 256-2048 at the shape above, 7.2 against 9.7-9.9 ms).
  static constexpr int64_t kChunkRows = 256;
  static constexpr int64_t kPad = 16;  // floats past each copied row

  int64_t rows = 0, features = 0, units = 0;

  // Whether a layer of `features` → `units` whose weight gradient oneDNN planned as
  // `implementation` computes it here: gemm:jit, and a row of x or dy a multiple of 4 KiB.
  static bool wanted(int64_t features, int64_t units, const std::string& implementation);

  // The scratch run() needs: one chunk of both operands at the padded pitch.
  int64_t scratch_bytes() const;

  // dw[units, features] = Σ_r dy[r, ·]ᵀ·x[r, ·] over the rows, dy [rows, units] and x [rows,
  // features] by rows; across the calling thread's OpenMP team. Deterministic for a fixed
  // thread count (the chunks are summed in order).
  void run(const float* dy, const float* x, float* dw, float* scratch) const;

  // The kernel's name in the run report's kernels list.
  static std::string implementation_name();
};

}  // namespace scalescope
