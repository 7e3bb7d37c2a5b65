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

TEST(PaddedWeightGradient, IsWantedForGemmJitOnRowsOf4KiB) {
  EXPECT_TRUE(PaddedWeightGradient::wanted(256, 1024, "gemm:jit"));
  EXPECT_TRUE(PaddedWeightGradient::wanted(3072, 768, "gemm:jit"));
  EXPECT_FALSE(PaddedWeightGradient::wanted(256, 768, "gemm:jit"));
  EXPECT_FALSE(PaddedWeightGradient::wanted(256, 1024, "brg:avx512_core"));
  setenv("SCALESCOPE_WEIGHT_GRADIENT", "matmul", 1);
  EXPECT_FALSE(PaddedWeightGradient::wanted(256, 1024, "gemm:jit"));
  setenv("SCALESCOPE_WEIGHT_GRADIENT", "fast", 1);
  EXPECT_THROW(PaddedWeightGradient::wanted(256, 1024, "gemm:jit"), Error);
  unsetenv("SCALESCOPE_WEIGHT_GRADIENT");
}

// The layer's reported weight-gradient kernel, and its gradients against float64.
std::string dense_layer_weight_gradient(bool pooled) {
  const LayerCase c{"dense_4k_rows", DenseSpec{1024}, Shape{2, 550, 4}, 2};
  testing_util::BoundLayer layer(c, pooled ? std::make_shared<TransientPool>() : nullptr);
  const std::vector<float> x = uniform_values(layer.in.numel(), 3);
  const std::vector<float> dy = uniform_values(layer.out.numel(), 4);
  layer.in.copy_from_host(x);
  layer.dout.copy_from_host(dy);
  testing_util::fill_random_params(layer, 5);
  layer.forward();
  layer.backward(/*with_din=*/true);
  const Expected e = expected_gradients(dy, x, 1100, 4, 1024);
  testing_util::expect_close(layer.grads[0].to_host(), e.dw, 2e-4, 1e-5, "dW");
  testing_util::expect_close(layer.grads[1].to_host(), e.db, 2e-4, 1e-5, "db");
  for (const KernelChoice& k : layer.kernel->choices()) {
    if (k.pass == "backward-weights") return k.algorithm;
  }
  return "";
}

TEST(PaddedWeightGradient, ADenseLayerOfRowsOf4KiBUsesItWhereOneDnnRunsGemmJit) {
  const bool gemm_jit = !__builtin_cpu_supports("avx512f");  // oneDNN 2.6's matmul: brg needs it
  for (const bool pooled : {false, true}) {
    SCOPED_TRACE(pooled ? "pass-local scratch in a pool" : "scratch of its own");
    const std::string kernel = dense_layer_weight_gradient(pooled);
    EXPECT_EQ(kernel == PaddedWeightGradient::implementation_name(), gemm_jit) << kernel;
  }
  setenv("SCALESCOPE_WEIGHT_GRADIENT", "matmul", 1);
  EXPECT_NE(dense_layer_weight_gradient(true), PaddedWeightGradient::implementation_name());
  unsetenv("SCALESCOPE_WEIGHT_GRADIENT");
}

}  // namespace
}  // namespace scalescope
