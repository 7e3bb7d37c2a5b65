// The fp32 attention's products (cpu_attention.cpp) in AVX-512 registers. Its products are
// small (gpt micro's: 64 × 64 × 32, a few µs each), where a library call's fixed cost and the
// causal mask's dead half weigh: oneDNN's sgemm ran them at 135-165 GFLOP/s a core including
// the upper triangle that the softmax then drops, and costs about 0.4 µs a call. Here a block
// of rows of C stays in registers over the whole sum, and the blocks and terms the mask makes
// zero are never multiplied.
#pragma once

#include <cstdint>

namespace scalescope::cpu_attention {

// Operand A of a product: its element (i, c) at at[i·row + c·col], so that a matrix stored
// by rows (col 1) and one read transposed (row 1) are the same kind of operand.
struct TileOperand {
  const float* at;
  int64_t row, col;
};

// Which part of C = A·B the causal mask leaves, given `diag`:
enum class TileMask {
  kNone,
  kColsUpToRow,   // only C(i, j) with j ≤ i + diag is needed (a tile's scores)
  kTermsUpToRow,  // A(i, c) is zero for c > i + diag (probabilities times values)
  kTermsFromRow,  // A(i, c) is zero for c < i + diag (probabilities read transposed)
};

// C[m, n] = A[m, k]·B[k, n] (+ C where `accumulate`), B and C stored by rows. With kColsUpToRow
// the entries past what a row needs are left as they were, or hold what a block of rows
// computed past its own rows' need; the tile functions mask them (kernel_math).
struct TileProduct {
  int64_t m, n, k;
  TileOperand a;
  const float* b;
  int64_t ldb;
  float* c;
  int64_t ldc;
  bool accumulate = false;
  TileMask mask = TileMask::kNone;
  int64_t diag = 0;
};

// Whether this CPU runs tile_product (AVX-512F): without it, the caller runs sgemm.
bool tile_products_supported();

// REQUIRES: tile_products_supported(); the operands do not overlap C.
void tile_product(const TileProduct& p);

// The row length transpose_rows' callers lay n columns out in: whole vectors.
inline int64_t pack_ld(int64_t n) {
  return (n + 15) / 16 * 16;
}

// dst[c·ld + j] = src[j·src_ld + c] for j < rows, c < cols: B's layout for the products whose
// B is a matrix read transposed (the keys for the scores, the values for dout·vᵀ).
// REQUIRES: tile_products_supported().
void transpose_rows(const float* src, int64_t src_ld, int64_t rows, int64_t cols, float* dst,
                    int64_t ld);

}  // namespace scalescope::cpu_attention
