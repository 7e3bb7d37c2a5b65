// models/cpu/padded_weight_gradient.cpp: an fp32 dense layer's weight gradient on chunks of rows
// copied to a padded pitch. The sums against float64 on any CPU (a last chunk shorter than
// the others, one chunk, rows of 4 KiB and not), the rule that picks it, and a dense layer that
// computes its gradients through it where oneDNN runs gemm:jit (a CPU without AVX-512) and
// through the matmul elsewhere, both right.
#include "models/cpu/padded_weight_gradient.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cstdlib>
#include <memory>
#include <ostream>
#include <vector>

#include "tests/models/bound_layer.h"
#include "tests/test_util.h"

namespace scalescope {
namespace {

using testing_util::uniform_values;

// dW[u, f] and db[u] in float64: Σ_r dy[r, u]·x[r, f] and Σ_r dy[r, u].
struct Expected {
  std::vector<double> dw, db;
};
Expected expected_gradients(const std::vector<float>& dy, const std::vector<float>& x, int64_t rows,
                            int64_t features, int64_t units) {
  Expected e{std::vector<double>(static_cast<size_t>(units * features)),
             std::vector<double>(static_cast<size_t>(units))};
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t u = 0; u < units; ++u) {
      const double g = dy[static_cast<size_t>(r * units + u)];
      e.db[static_cast<size_t>(u)] += g;
      for (int64_t f = 0; f < features; ++f) {
        e.dw[static_cast<size_t>(u * features + f)] += g * x[static_cast<size_t>(r * features + f)];
      }
    }
  }
  return e;
}

struct Shape3 {
  int64_t rows, features, units;
};

class PaddedWeightGradientSums : public ::testing::TestWithParam<Shape3> {};

TEST_P(PaddedWeightGradientSums, EqualTheSumsInFloat64) {
  const Shape3 s = GetParam();
  const PaddedWeightGradient padded{s.rows, s.features, s.units};
  const std::vector<float> dy = uniform_values(s.rows * s.units, 1);
  const std::vector<float> x = uniform_values(s.rows * s.features, 2);
  std::vector<float> scratch(static_cast<size_t>(padded.scratch_bytes()) / sizeof(float));
  std::vector<float> dw(static_cast<size_t>(s.units * s.features), 1e30f);  // overwritten
  omp_set_num_threads(2);
  padded.run(dy.data(), x.data(), dw.data(), scratch.data());
  const Expected e = expected_gradients(dy, x, s.rows, s.features, s.units);
  // Sums of up to 1100 products of values in [-1, 1].
  testing_util::expect_close(dw, e.dw, 2e-4, 1e-5, "dW");
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, PaddedWeightGradientSums,
    ::testing::Values(Shape3{1100, 5, 1024},   // 5 chunks, the last of 76 rows; dy's rows 4 KiB
                      Shape3{256, 1024, 3},    // one whole chunk; x's rows 4 KiB
                      Shape3{100, 7, 9},       // fewer rows than a chunk
                      Shape3{513, 20, 2048}),  // 3 chunks, the last of one row
    [](const ::testing::TestParamInfo<Shape3>& info) {
      return std::to_string(info.param.rows) + "_rows_" + std::to_string(info.param.features) +
             "_to_" + std::to_string(info.param.units);
    });

// oneDNN 2.6's matmul runs brg:avx512_core where the CPU has AVX-512, gemm:jit elsewhere; its
// inner product's weight gradient is gemm:jit on both, and leaves it only without AVX-512.
bool without_avx512() {
  return !__builtin_cpu_supports("avx512f");
}

TEST(PaddedWeightGradient, IsWantedForGemmJitOnRowsOf4KiBWithoutAvx512) {
  const auto wanted = [](int64_t rows, int64_t features, int64_t units, const char* kernel) {
    return PaddedWeightGradient{rows, features, units}.wanted(kernel);
  };
  EXPECT_EQ(wanted(2048, 256, 1024, "gemm:jit"), without_avx512());
  EXPECT_EQ(wanted(512, 1024, 256, "x64:gemm:jit"), without_avx512());
  EXPECT_EQ(wanted(256, 256, 1024, "x64:gemm:jit"), without_avx512());
  EXPECT_FALSE(wanted(255, 256, 1024, "x64:gemm:jit"));  // too few rows to gain
  EXPECT_EQ(wanted(512, 1024, 128, "x64:gemm:jit"), without_avx512());
  EXPECT_FALSE(wanted(512, 1024, 512, "x64:gemm:jit"));  // wider layers lose
  EXPECT_FALSE(wanted(512, 1024, 64, "x64:gemm:jit"));
  EXPECT_FALSE(wanted(2048, 1024, 4096, "x64:gemm:jit"));
  EXPECT_FALSE(wanted(2048, 256, 768, "gemm:jit"));
  EXPECT_FALSE(wanted(2048, 3072, 768, "x64:gemm:jit"));  // other multiples of 4 KiB too
  EXPECT_FALSE(wanted(1024, 4096, 64, "x64:gemm:jit"));
  EXPECT_FALSE(wanted(2048, 256, 1024, "brg:avx512_core"));
  setenv("SCALESCOPE_WEIGHT_GRADIENT", "matmul", 1);
  EXPECT_FALSE(wanted(2048, 256, 1024, "gemm:jit"));
  setenv("SCALESCOPE_WEIGHT_GRADIENT", "fast", 1);
  EXPECT_THROW(wanted(2048, 256, 1024, "gemm:jit"), Error);
  unsetenv("SCALESCOPE_WEIGHT_GRADIENT");
}

// A dense layer of `features` → `units` on an input of `in` (rows × features).
struct DenseCase {
  const char* name;
  Shape in;
  int64_t units;
  int64_t rows() const { return in.numel() / features(); }
  int64_t features() const { return in.dims().back(); }
};
void PrintTo(const DenseCase& d, std::ostream* os) {
  *os << d.name;
}

// The layer's reported weight-gradient kernel, and its gradients against float64.
std::string dense_layer_weight_gradient(const DenseCase& d, bool pooled) {
  const LayerCase c{d.name, DenseSpec{d.units}, d.in, 2};
  testing_util::BoundLayer layer(c, pooled ? std::make_shared<TransientPool>() : nullptr);
  const std::vector<float> x = uniform_values(layer.in.numel(), 3);
  const std::vector<float> dy = uniform_values(layer.out.numel(), 4);
  layer.in.copy_from_host(x);
  layer.dout.copy_from_host(dy);
  testing_util::fill_random_params(layer, 5);
  layer.forward();
  layer.backward(/*with_din=*/true);
  const Expected e = expected_gradients(dy, x, d.rows(), d.features(), d.units);
  testing_util::expect_close(layer.grads[0].to_host(), e.dw, 2e-4, 1e-5, "dW");
  testing_util::expect_close(layer.grads[1].to_host(), e.db, 2e-4, 1e-5, "db");
  for (const KernelChoice& k : layer.kernel->choices()) {
    if (k.pass == "backward-weights") return k.algorithm;
  }
  return "";
}

// 128 → 1024, dy's rows 4 KiB: 1040 rows (the matmul's weight gradient) and 300 (the inner
// product's).
class DenseLayerOfRowsOf4KiB : public ::testing::TestWithParam<DenseCase> {};

TEST_P(DenseLayerOfRowsOf4KiB, UsesItWithoutAvx512AndComputesTheGradients) {
  for (const bool pooled : {false, true}) {
    SCOPED_TRACE(pooled ? "pass-local scratch in a pool" : "scratch of its own");
    const std::string kernel = dense_layer_weight_gradient(GetParam(), pooled);
    EXPECT_EQ(kernel == PaddedWeightGradient::implementation_name(), without_avx512()) << kernel;
  }
  setenv("SCALESCOPE_WEIGHT_GRADIENT", "matmul", 1);
  EXPECT_NE(dense_layer_weight_gradient(GetParam(), true),
            PaddedWeightGradient::implementation_name());
  unsetenv("SCALESCOPE_WEIGHT_GRADIENT");
}

INSTANTIATE_TEST_SUITE_P(
    Layers, DenseLayerOfRowsOf4KiB,
    ::testing::Values(DenseCase{"matmul_rows", Shape{2, 520, 128}, 1024},
                      DenseCase{"inner_product_rows", Shape{2, 150, 128}, 1024}),
    [](const ::testing::TestParamInfo<DenseCase>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace scalescope
