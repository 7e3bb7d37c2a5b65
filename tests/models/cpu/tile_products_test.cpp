// models/cpu/tile_products.cpp: the fp32 attention's products in AVX-512 registers, against
// float64 sums, over the shapes its blocks split unevenly (rows not a multiple of a block's,
// columns not of 16, more than one 64-column panel), with each causal mask.
#include "models/cpu/tile_products.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "tests/test_util.h"

namespace scalescope::cpu_attention {
namespace {

struct Case {
  int64_t m, n, k;
  bool transpose_a;
  TileMask mask;
  int64_t diag;
};

// Whether A(i, c) may be non-zero, and whether C(i, j) must be right, under the case's mask.
bool term_lives(const Case& t, int64_t i, int64_t c) {
  if (t.mask == TileMask::kTermsUpToRow) return c <= i + t.diag;
  if (t.mask == TileMask::kTermsFromRow) return c >= i + t.diag;
  return true;
}
bool entry_needed(const Case& t, int64_t i, int64_t j) {
  return t.mask != TileMask::kColsUpToRow || j <= i + t.diag;
}

class TileProducts : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (!tile_products_supported()) GTEST_SKIP() << "this CPU has no AVX-512F";
  }
};

// C = A·B and C += A·B, A stored by rows or read transposed, with A zero where the mask says
// it is: the needed entries equal float64's sums to fp32's accuracy, and with kColsUpToRow
// the product writes nothing past the last vector of columns a block of rows needs.
TEST_P(TileProducts, EqualsTheSumsInFloat64) {
  const Case t = GetParam();
  const int64_t lda = t.transpose_a ? t.m + 3 : t.k + 5, ldb = t.n + 7, ldc = t.n + 2;
  std::vector<float> a = testing_util::uniform_values((t.transpose_a ? t.k : t.m) * lda, 1);
  const std::vector<float> b = testing_util::uniform_values(t.k * ldb, 2);
  const std::vector<float> c0 = testing_util::uniform_values(t.m * ldc, 3);
  const auto a_at = [&](int64_t i, int64_t c) -> float& {
    return a[static_cast<size_t>(t.transpose_a ? c * lda + i : i * lda + c)];
  };
  for (int64_t i = 0; i < t.m; ++i) {
    for (int64_t c = 0; c < t.k; ++c) {
      if (!term_lives(t, i, c)) a_at(i, c) = 0.0f;
    }
  }
  const TileOperand op =
      t.transpose_a ? TileOperand{a.data(), 1, lda} : TileOperand{a.data(), lda, 1};
  for (const bool accumulate : {false, true}) {
    SCOPED_TRACE(accumulate ? "accumulating" : "writing");
    std::vector<float> c = c0;
    tile_product({t.m, t.n, t.k, op, b.data(), ldb, c.data(), ldc, accumulate, t.mask, t.diag});
    for (int64_t i = 0; i < t.m; ++i) {
      for (int64_t j = 0; j < ldc; ++j) {
        const size_t at = static_cast<size_t>(i * ldc + j);
        if (j >= t.n) {
          ASSERT_EQ(c[at], c0[at]) << "wrote past the columns at " << i << ", " << j;
          continue;
        }
        if (!entry_needed(t, i, j)) {
          // Past the block's last needed vector of columns nothing is written.
          if (j >= (i + t.diag + 16) / 16 * 16 + 16) {
            ASSERT_EQ(c[at], c0[at]) << i << ", " << j;
          }
          continue;
        }
        double sum = accumulate ? c0[at] : 0.0, size = accumulate ? std::abs(c0[at]) : 0.0;
        for (int64_t k = 0; k < t.k; ++k) {
          sum += static_cast<double>(a_at(i, k)) * b[static_cast<size_t>(k * ldb + j)];
          size += std::abs(static_cast<double>(a_at(i, k)) * b[static_cast<size_t>(k * ldb + j)]);
        }
        ASSERT_NEAR(c[at], sum, 4e-7 * size + 1e-30) << i << ", " << j;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, TileProducts,
    ::testing::Values(
        // gpt micro's: scores of a 64-row tile, probabilities times values, dvᵀ-style.
        Case{64, 64, 32, false, TileMask::kColsUpToRow, 0},
        Case{64, 32, 64, false, TileMask::kTermsUpToRow, 0},
        Case{64, 32, 64, true, TileMask::kTermsFromRow, 0},
        // A second query tile against every key before it (diag = its first query).
        Case{64, 128, 64, false, TileMask::kColsUpToRow, 64},
        Case{64, 64, 128, false, TileMask::kTermsUpToRow, 64},
        // Ragged: rows not a multiple of any block, columns not of 16, two panels and a tail.
        Case{37, 150, 19, false, TileMask::kNone, 0}, Case{13, 5, 3, true, TileMask::kNone, 0},
        Case{70, 33, 70, true, TileMask::kTermsFromRow, 0},
        Case{70, 48, 70, false, TileMask::kTermsUpToRow, 0},
        Case{86, 22, 16, false, TileMask::kColsUpToRow, 0},
        // No terms at all for some blocks: C is written as zeros (or left as it was).
        Case{40, 16, 8, true, TileMask::kTermsFromRow, 0}));

// B's layout for the scores: every element where it belongs, across 16 × 16 blocks and their
// ragged edges, and nothing written past the rows.
TEST(TileProductsTranspose, LaysOutTheColumnsAsRows) {
  if (!tile_products_supported()) GTEST_SKIP() << "this CPU has no AVX-512F";
  for (const int64_t rows : {1, 5, 16, 17, 64, 70}) {
    for (const int64_t cols : {1, 3, 16, 32, 33}) {
      const int64_t src_ld = 40, ld = 80;
      const std::vector<float> src = testing_util::uniform_values(rows * src_ld, 9);
      std::vector<float> dst(static_cast<size_t>(cols * ld), -7.0f);
      transpose_rows(src.data(), src_ld, rows, cols, dst.data(), ld);
      for (int64_t c = 0; c < cols; ++c) {
        for (int64_t j = 0; j < ld; ++j) {
          const float want = j < rows ? src[static_cast<size_t>(j * src_ld + c)] : -7.0f;
          ASSERT_EQ(dst[static_cast<size_t>(c * ld + j)], want) << rows << "×" << cols << " " << c;
        }
      }
    }
  }
}

TEST(TileProductsTranspose, PackLdIsWholeVectors) {
  EXPECT_EQ(pack_ld(1), 16);
  EXPECT_EQ(pack_ld(64), 64);
  EXPECT_EQ(pack_ld(65), 80);
}

}  // namespace
}  // namespace scalescope::cpu_attention
