// An fp32 dense layer's weight gradient, dW = dyᵀ·x, where oneDNN 2.6 runs it as gemm:jit (a CPU
// without AVX-512, whose matmul has no brgemm kernel). gemm:jit packs the operand it reads
// transposed by walking its rows, and a row pitch of 4 KiB puts those rows in few sets of the L1
// cache: on 2 threads of an AVX2 AMD EPYC, dW of 2048 rows at 256 → 1024
// (gpt:preset=mini's c_fc, dy's rows 4 KiB long) took 13.2-17.1 ms (69-81 GFLOP/s), and with
// both operands at a pitch 16 floats longer 6.3-6.4 ms (167-170 GFLOP/s). So such a layer copies
// its rows a chunk at a time to a padded pitch and sums the chunks' products. The same holds for
// the inner product's weight gradient (gemm:jit with or without AVX-512), which dense layers of
// fewer rows run; wanted() says where.
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

  // Whether this layer's weight gradient, which oneDNN planned as `implementation`, is computed
  // here: gemm:jit on a CPU without AVX-512, at least kMinRows rows, and a row of x or dy of
  // exactly 4 KiB with the other kNarrow floats long. Measured (2 threads of an AVX2 EPYC, dW
  // and db, ms) against the inner product's gemm:jit, 512 rows: 256 → 1024 3.8-4.4 against
  // 2.7-2.9 here, 1024 → 256 3.8-4.5 against 1.9-2.6, 1024 → 128 1.5 against 0.9; 256 rows
  // 2.0 against 1.2-1.5 and 1.1-1.3 against 1.2. But 128 rows at 1024 → 256 ran as fast in
  // oneDNN's kernel, and wider layers faster: 512 rows at 1024 → 512 3.8-4.9 against 4.9-6.2,
  // 1024 → 4096 60 against 68, 2048 rows at 3072 → 768 60-61 against 66-68, 1024 rows at 4096
  // → 64 4.4-4.9 against 6.3-6.7.
  bool wanted(const std::string& implementation) const;
  // SCALESCOPE_WEIGHT_GRADIENT=matmul: oneDNN's kernel everywhere, for comparing the two;
  // =padded (the default) where wanted() says. Throws Error naming the variable otherwise.
  static bool matmul_asked();
  static constexpr int64_t kMinRows = 256;
  static constexpr int64_t kNarrow[2] = {128, 256};

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
