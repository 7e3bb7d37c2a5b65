// The attention's fused kernels' tile operations (models/cuda/flash_tiles.cuh) on the host, as
// the WMMA API defines them, over the same pointers and leading dimensions: load_matrix_sync's
// row-major operand A ((i, k) at a[i·lda + k]), B row-major ((k, j) at b[k·ldb + j]) or
// column-major ((k, j) at b[j·ldb + k]), mma_sync adding into fp32 accumulators, and
// store_matrix_sync to row-major memory. The tests that replay the kernels
// (flash_attention_test.cpp, flash_attention_backward_test.cpp) run them one warp after another.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "models/kernel_math/flash_attention_math.h"
#include "models/kernel_math/half_math.h"

namespace scalescope::kernel_math_test::host_wmma {

namespace km = kernel_math;
inline constexpr int kTile = 16;

// A 16 × 16 accumulator, row-major.
struct Accumulator {
  float at[kTile * kTile] = {};
};

inline float operand(const uint16_t* at, km::HalfFormat format) {
  return km::from_half(*at, format);
}

// acc += A[16][16]·B[16][16].
inline void mma(Accumulator& acc, const uint16_t* a, int lda, const uint16_t* b, int ldb,
                bool b_column_major, km::HalfFormat format) {
  for (int i = 0; i < kTile; ++i) {
    for (int j = 0; j < kTile; ++j) {
      float sum = acc.at[i * kTile + j];
      for (int k = 0; k < kTile; ++k) {
        const uint16_t* bk = b_column_major ? b + j * ldb + k : b + k * ldb + j;
        sum += operand(a + i * lda + k, format) * operand(bk, format);
      }
      acc.at[i * kTile + j] = sum;
    }
  }
}

inline void load(Accumulator& acc, const float* from, int ld) {
  for (int i = 0; i < kTile; ++i) std::memcpy(acc.at + i * kTile, from + i * ld, kTile * 4);
}
inline void store(float* to, const Accumulator& acc, int ld) {
  for (int i = 0; i < kTile; ++i) std::memcpy(to + i * ld, acc.at + i * kTile, kTile * 4);
}

// flash::warp_product_nt: c[16][kKeyTile] = a[16][K] · b[kKeyTile][K]ᵀ.
template <int K>
void product_nt(const uint16_t* a, int lda, const uint16_t* b, int ldb, float* c, int ldc,
                km::HalfFormat format) {
  for (int n = 0; n < km::FlashTiling::kKeyTile / kTile; ++n) {
    Accumulator acc;
    for (int kk = 0; kk < K / kTile; ++kk) {
      mma(acc, a + kk * kTile, lda, b + n * kTile * ldb + kk * kTile, ldb, true, format);
    }
    store(c + n * kTile, acc, ldc);
  }
}

// flash::warp_accumulate_nn: acc[n] += a[16][kKeyTile] · b[kKeyTile][HD], columns of n.
template <int HD>
void accumulate_nn(const uint16_t* a, int lda, const uint16_t* b, int ldb, Accumulator* acc,
                   km::HalfFormat format) {
  for (int kk = 0; kk < km::FlashTiling::kKeyTile / kTile; ++kk) {
    for (int n = 0; n < HD / kTile; ++n) {
      mma(acc[n], a + kk * kTile, lda, b + kk * kTile * ldb + n * kTile, ldb, false, format);
    }
  }
}

// flash::load_head_tile: rows [first, first + kQueryRows) of head `head` of a head-major buffer
// into a [rows][LD] tile, rows past the sequence zeros.
template <int HD, int LD>
void load_head_tile(const std::vector<uint16_t>& heads, int64_t head, int64_t first, int64_t seq,
                    uint16_t* tile) {
  for (int row = 0; row < km::FlashTiling::kQueryRows; ++row) {
    for (int col = 0; col < HD; ++col) {
      const int64_t pos = first + row;
      tile[row * LD + col] =
          pos < seq ? heads.at(static_cast<size_t>((head * seq + pos) * HD + col)) : 0;
    }
  }
}

}  // namespace scalescope::kernel_math_test::host_wmma
