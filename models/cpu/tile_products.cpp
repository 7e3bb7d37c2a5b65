// AVX-512 products for the attention's tiles (tile_products.h). A block of R rows and up to 64
// columns of C is R × NB vector registers (NB = columns / 16), kept over the whole sum: each
// term loads NB vectors of B's row and broadcasts R values of A's column. The blocks are sized
// to hold about 24 accumulators of the 32 registers. Blocks of C walk a 64-column panel of B
// at a time, so that the panel stays in L1 while A's rows pass by.
#include "models/cpu/tile_products.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <utility>

namespace scalescope::cpu_attention {
namespace {

constexpr int kLanes = 16;
constexpr int kMostPanels = 4;  // 64 columns a block
constexpr int kMostRows = 16;

// Rows a block of `panels` vectors a row holds in registers: about 24 accumulators.
constexpr int block_rows(int panels) {
  return panels == 1 ? 16 : panels == 2 ? 12 : panels == 3 ? 8 : 6;
}

// The target is set function by function: the rest of the build stays portable, and
// tile_products_supported() tells the caller whether these may run.
#define SS_AVX512 __attribute__((target("avx512f")))

struct Block {
  const float* a;
  int64_t a_row, a_col;
  const float* b;
  int64_t ldb, k_lo, k_hi;
  float* c;
  int64_t ldc;
  bool accumulate;
  __mmask16 last;  // the lanes of the block's last vector of columns
};

template <int R, int NB>
SS_AVX512 void multiply_block(const Block& blk) {
  __m512 acc[R][NB];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int p = 0; p < NB; ++p) acc[r][p] = _mm512_setzero_ps();
  }
  for (int64_t t = blk.k_lo; t < blk.k_hi; ++t) {
    const float* bt = blk.b + t * blk.ldb;
    __m512 bv[NB];
#pragma GCC unroll 4
    for (int p = 0; p + 1 < NB; ++p) bv[p] = _mm512_loadu_ps(bt + p * kLanes);
    bv[NB - 1] = _mm512_maskz_loadu_ps(blk.last, bt + (NB - 1) * kLanes);
    const float* at = blk.a + t * blk.a_col;
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512 av = _mm512_set1_ps(at[r * blk.a_row]);
#pragma GCC unroll 4
      for (int p = 0; p < NB; ++p) acc[r][p] = _mm512_fmadd_ps(av, bv[p], acc[r][p]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int p = 0; p < NB; ++p) {
      const __mmask16 lanes = p + 1 == NB ? blk.last : __mmask16{0xFFFF};
      float* at = blk.c + r * blk.ldc + p * kLanes;
      __m512 v = acc[r][p];
      if (blk.accumulate) v = _mm512_add_ps(_mm512_maskz_loadu_ps(lanes, at), v);
      _mm512_mask_storeu_ps(at, lanes, v);
    }
  }
}

using BlockFn = void (*)(const Block&);

template <int NB, int R>
constexpr BlockFn block_fn() {
  if constexpr (R <= block_rows(NB)) {
    return &multiply_block<R, NB>;
  } else {
    return nullptr;
  }
}

template <int NB, int... R>
constexpr std::array<BlockFn, kMostRows> rows_table(std::integer_sequence<int, R...>) {
  return {{block_fn<NB, R + 1>()...}};
}

// kBlocks[NB - 1][R - 1]: the block of R rows and NB vectors a row.
constexpr std::array<std::array<BlockFn, kMostRows>, kMostPanels> kBlocks = {
    {rows_table<1>(std::make_integer_sequence<int, kMostRows>{}),
     rows_table<2>(std::make_integer_sequence<int, kMostRows>{}),
     rows_table<3>(std::make_integer_sequence<int, kMostRows>{}),
     rows_table<4>(std::make_integer_sequence<int, kMostRows>{})}};

int64_t round_up(int64_t x, int64_t to) {
  return (x + to - 1) / to * to;
}

__mmask16 first_lanes(int64_t n) {
  return static_cast<__mmask16>(n >= kLanes ? 0xFFFF : (1u << n) - 1);
}

// The columns that rows [i0, i0 + rows) need, from column 0: all, or under kColsUpToRow up to
// the last row's diagonal, rounded up to whole vectors.
int64_t needed_cols(const TileProduct& p, int64_t i0, int64_t rows) {
  if (p.mask != TileMask::kColsUpToRow) return p.n;
  return std::clamp<int64_t>(round_up(i0 + rows + p.diag, kLanes), 0, p.n);
}

// The terms of the sum that rows [i0, i0 + rows) need: where A may be non-zero for one of them.
std::pair<int64_t, int64_t> needed_terms(const TileProduct& p, int64_t i0, int64_t rows) {
  switch (p.mask) {
    case TileMask::kTermsUpToRow:
      return {0, std::clamp<int64_t>(i0 + rows + p.diag, 0, p.k)};
    case TileMask::kTermsFromRow:
      return {std::clamp<int64_t>(i0 + p.diag, 0, p.k), p.k};
    default:
      return {0, p.k};
  }
}

// One panel of up to 64 columns from column j0, every block of rows that needs some of it.
void multiply_panel(const TileProduct& p, int64_t j0) {
  const int64_t width = std::min<int64_t>(p.n - j0, kMostPanels * kLanes);
  const int rows_per_block = block_rows(static_cast<int>((width + kLanes - 1) / kLanes));
  for (int64_t i0 = 0; i0 < p.m; i0 += rows_per_block) {
    const int64_t rows = std::min<int64_t>(rows_per_block, p.m - i0);
    const int64_t cols = std::min(width, needed_cols(p, i0, rows) - j0);
    if (cols <= 0) continue;
    const auto [k_lo, k_hi] = needed_terms(p, i0, rows);
    const Block blk{p.a.at + i0 * p.a.row,
                    p.a.row,
                    p.a.col,
                    p.b + j0,
                    p.ldb,
                    k_lo,
                    k_hi,
                    p.c + i0 * p.ldc + j0,
                    p.ldc,
                    p.accumulate,
                    first_lanes(cols - (cols - 1) / kLanes * kLanes)};
    kBlocks[(cols + kLanes - 1) / kLanes - 1][rows - 1](blk);
  }
}

// Up to 16 × 16 floats transposed in registers: 64 shuffles where a float at a time took 1.1 µs
// for a 64 × 32 tile of keys, a third of the product it feeds. Each stage interleaves pairs of
// rows at twice the width of the stage before: floats, pairs of floats, then 128-bit lanes
// twice, after which vector c holds column c.
SS_AVX512 void transpose_block(const float* src, int64_t src_ld, int64_t rows, int64_t cols,
                               float* dst, int64_t ld) {
  // Masked forms with every lane set: GCC 12's unmasked ones start from an undefined vector,
  // which -Wmaybe-uninitialized flags (GCC bug 105593).
  constexpr __mmask16 kAll = 0xFFFF;
  constexpr __mmask8 kAllPairs = 0xFF;
  const __mmask16 col_lanes = first_lanes(cols);
  __m512 r[kLanes], t[kLanes];
#pragma GCC unroll 16
  for (int i = 0; i < kLanes; ++i) {
    r[i] = i < rows ? _mm512_maskz_loadu_ps(col_lanes, src + i * src_ld) : _mm512_setzero_ps();
  }
#pragma GCC unroll 8
  for (int i = 0; i < kLanes; i += 2) {
    t[i] = _mm512_maskz_unpacklo_ps(kAll, r[i], r[i + 1]);
    t[i + 1] = _mm512_maskz_unpackhi_ps(kAll, r[i], r[i + 1]);
  }
  // u[4g + x]: in each 128-bit lane L, column 4L + x of rows 4g to 4g + 3.
#pragma GCC unroll 4
  for (int g = 0; g < 4; ++g) {
    const __m512d lo = _mm512_castps_pd(t[4 * g]), hi = _mm512_castps_pd(t[4 * g + 1]);
    const __m512d lo2 = _mm512_castps_pd(t[4 * g + 2]), hi2 = _mm512_castps_pd(t[4 * g + 3]);
    r[4 * g] = _mm512_castpd_ps(_mm512_maskz_unpacklo_pd(kAllPairs, lo, lo2));
    r[4 * g + 1] = _mm512_castpd_ps(_mm512_maskz_unpackhi_pd(kAllPairs, lo, lo2));
    r[4 * g + 2] = _mm512_castpd_ps(_mm512_maskz_unpacklo_pd(kAllPairs, hi, hi2));
    r[4 * g + 3] = _mm512_castpd_ps(_mm512_maskz_unpackhi_pd(kAllPairs, hi, hi2));
  }
  // Lanes 0 and 2 (0x88) or 1 and 3 (0xdd) of each operand, twice: columns x, 4 + x, 8 + x and
  // 12 + x of all 16 rows.
#pragma GCC unroll 4
  for (int x = 0; x < 4; ++x) {
    const __m512 even_lo = _mm512_maskz_shuffle_f32x4(kAll, r[x], r[4 + x], 0x88);
    const __m512 even_hi = _mm512_maskz_shuffle_f32x4(kAll, r[8 + x], r[12 + x], 0x88);
    const __m512 odd_lo = _mm512_maskz_shuffle_f32x4(kAll, r[x], r[4 + x], 0xdd);
    const __m512 odd_hi = _mm512_maskz_shuffle_f32x4(kAll, r[8 + x], r[12 + x], 0xdd);
    t[x] = _mm512_maskz_shuffle_f32x4(kAll, even_lo, even_hi, 0x88);
    t[8 + x] = _mm512_maskz_shuffle_f32x4(kAll, even_lo, even_hi, 0xdd);
    t[4 + x] = _mm512_maskz_shuffle_f32x4(kAll, odd_lo, odd_hi, 0x88);
    t[12 + x] = _mm512_maskz_shuffle_f32x4(kAll, odd_lo, odd_hi, 0xdd);
  }
  const __mmask16 row_lanes = first_lanes(rows);
#pragma GCC unroll 16
  for (int c = 0; c < kLanes; ++c) {
    if (c < cols) _mm512_mask_storeu_ps(dst + c * ld, row_lanes, t[c]);
  }
}

}  // namespace

bool tile_products_supported() {
  static const bool supported = __builtin_cpu_supports("avx512f");
  return supported;
}

void tile_product(const TileProduct& p) {
  for (int64_t j0 = 0; j0 < p.n; j0 += kMostPanels * kLanes) multiply_panel(p, j0);
}

void transpose_rows(const float* src, int64_t src_ld, int64_t rows, int64_t cols, float* dst,
                    int64_t ld) {
  for (int64_t j0 = 0; j0 < rows; j0 += kLanes) {
    for (int64_t c0 = 0; c0 < cols; c0 += kLanes) {
      transpose_block(src + j0 * src_ld + c0, src_ld, std::min<int64_t>(kLanes, rows - j0),
                      std::min<int64_t>(kLanes, cols - c0), dst + c0 * ld + j0, ld);
    }
  }
}

}  // namespace scalescope::cpu_attention
