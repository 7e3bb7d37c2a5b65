// kernel_math/layer_norm_math.h: layer normalization as the CUDA kernels compute it (the host
// mirror of their passes and order of additions) against the CPU kernel, bit for bit, and
// against a float64 evaluation of PyTorch's LayerNorm (forward, input and parameter gradients);
// and the host's row sums against a simulation of the GPU's warp (lanes, then shuffles).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "models/kernel_math/bias_math.h"
#include "models/kernel_math/layer_norm_math.h"
#include "tests/models/kernel_math/cpu_kernels_on_host.h"

namespace scalescope::kernel_math_test {
namespace {

namespace km = kernel_math;

// A [rows, d] input with values around `offset`, its gradient and the parameters.
struct Case {
  Shape in;  // batch included: [N, D] or [N, S, D]
  float eps;
  int64_t rows, d;
  std::vector<float> x, dy, w, b;
};

Case make_case(const Shape& in, float eps, float offset, uint64_t seed) {
  const int64_t d = in[in.rank() - 1];
  const int64_t n = in.numel();
  return {in,
          eps,
          n / d,
          d,
          random_floats(n, seed, offset - 1.0f, offset + 1.0f),
          random_floats(n, seed + 1),
          random_floats(d, seed + 2, -2.0f, 2.0f),
          random_floats(d, seed + 3)};
}

struct Result {
  std::vector<float> y, dx, dw, db;
};

// The host mirror: every row forward and backward, the parameter gradients' parts over all the
// columns at once, then their finishing sums.
Result mirror(const Case& k) {
  Result r{std::vector<float>(k.x.size()), std::vector<float>(k.x.size()),
           std::vector<float>(static_cast<size_t>(k.d)),
           std::vector<float>(static_cast<size_t>(k.d))};
  std::vector<float> mean(static_cast<size_t>(k.rows)), rstd(mean.size());
  for (int64_t row = 0; row < k.rows; ++row) {
    const int64_t at = row * k.d;
    km::layer_norm_forward_row_on_host(k.x.data() + at, r.y.data() + at, k.d, k.w.data(),
                                       k.b.data(), k.eps, &mean[row], &rstd[row]);
    km::layer_norm_backward_row_on_host(k.x.data() + at, k.dy.data() + at, r.dx.data() + at, k.d,
                                        k.w.data(), mean[row], rstd[row]);
  }
  const km::BiasGradPlan plan = km::bias_grad_plan(k.rows);
  const km::ColumnGradTerm term{k.x.data(), k.dy.data(), mean.data(), rstd.data(), k.d};
  std::vector<float> parts_dw(static_cast<size_t>(plan.parts * k.d)), parts_db(parts_dw.size());
  std::vector<float> acc(static_cast<size_t>(2 * k.d));
  for (int64_t p = 0; p < plan.parts; ++p) {
    km::layer_norm_part_sums_on_host(term, k.rows, plan, p, 0, k.d, acc.data(),
                                     parts_dw.data() + p * k.d, parts_db.data() + p * k.d);
  }
  for (int64_t c = 0; c < k.d; ++c) {
    km::layer_norm_finish_sums(parts_dw.data(), parts_db.data(), plan.parts, k.d, c, r.dw.data(),
                               r.db.data());
  }
  return r;
}

Result cpu_kernel(const Case& k, int threads) {
  CpuLayer layer(LayerNormSpec{k.eps}, k.in, {k.w, k.b}, threads);
  Result r;
  r.y = layer.forward(k.x);
  r.dx = layer.backward(k.x, r.y, k.dy);
  r.dw = layer.param_grad(0);
  r.db = layer.param_grad(1);
  return r;
}

// PyTorch's LayerNorm and its gradients in float64, from the float inputs.
struct Reference {
  std::vector<double> y, dx, dw, db;
};
Reference reference(const Case& k) {
  const auto d = static_cast<size_t>(k.d);
  Reference r{std::vector<double>(k.x.size()), std::vector<double>(k.x.size()),
              std::vector<double>(d), std::vector<double>(d)};
  std::vector<double> xhat(d), g(d);
  for (size_t at = 0; at < k.x.size(); at += d) {
    double sum = 0.0, squares = 0.0, sum_g = 0.0, sum_gxhat = 0.0;
    for (size_t i = 0; i < d; ++i) sum += k.x[at + i];
    const double mean = sum / static_cast<double>(d);
    for (size_t i = 0; i < d; ++i) squares += (k.x[at + i] - mean) * (k.x[at + i] - mean);
    const double rstd = 1.0 / std::sqrt(squares / static_cast<double>(d) + k.eps);
    for (size_t i = 0; i < d; ++i) {
      xhat[i] = (k.x[at + i] - mean) * rstd;
      g[i] = static_cast<double>(k.dy[at + i]) * k.w[i];
      r.y[at + i] = xhat[i] * k.w[i] + k.b[i];
      r.dw[i] += k.dy[at + i] * xhat[i];
      r.db[i] += k.dy[at + i];
      sum_g += g[i];
      sum_gxhat += g[i] * xhat[i];
    }
    for (size_t i = 0; i < d; ++i) {
      r.dx[at + i] = rstd * (g[i] - sum_g / static_cast<double>(d) -
                             xhat[i] * sum_gxhat / static_cast<double>(d));
    }
  }
  return r;
}

// max |got - want| / max |want|.
double relative_error(const std::vector<float>& got, const std::vector<double>& want) {
  double diff = 0.0, scale = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  return diff / scale;
}

// Rows shorter than a warp, a block and a half of lanes, 1100 rows (three parts of the
// parameter gradients) of 300 columns (two of the CPU kernel's column blocks), a large eps.
std::vector<Case> cases() {
  return {make_case(Shape{3, 10}, 1e-5f, 0.0f, 1), make_case(Shape{2, 3, 48}, 1e-5f, 0.0f, 5),
          make_case(Shape{2, 550, 300}, 1e-5f, 0.0f, 9), make_case(Shape{4, 7}, 0.1f, 0.0f, 13)};
}

// On one thread and on two: the threads split the rows and the parts of the column sums (1100
// rows make three parts), which changes no addition's order.
TEST(KernelMathLayerNorm, HostMirrorIsTheCpuKernelBitForBit) {
  for (const int threads : {1, 2}) {
    for (const Case& k : cases()) {
      SCOPED_TRACE(k.in.to_string() + " on " + std::to_string(threads) + " threads");
      const Result want = cpu_kernel(k, threads);
      const Result got = mirror(k);
      EXPECT_EQ(bit_mismatches(got.y, want.y), "");
      EXPECT_EQ(bit_mismatches(got.dx, want.dx), "");
      EXPECT_EQ(bit_mismatches(got.dw, want.dw), "");
      EXPECT_EQ(bit_mismatches(got.db, want.db), "");
    }
  }
}

// Values around 100 with a spread of 1: a variance taken as E[x²] - E[x]² in float would lose
// most of its digits; the two passes keep the error at the mean's rounding.
TEST(KernelMathLayerNorm, HostMirrorIsPyTorchsLayerNorm) {
  std::vector<Case> all = cases();
  all.push_back(make_case(Shape{2, 5, 64}, 1e-5f, 100.0f, 17));
  for (const Case& k : all) {
    SCOPED_TRACE(k.in.to_string());
    const Result got = mirror(k);
    const Reference want = reference(k);
    EXPECT_LE(relative_error(got.y, want.y), 1e-5);
    EXPECT_LE(relative_error(got.dx, want.dx), 1e-5);
    EXPECT_LE(relative_error(got.dw, want.dw), 1e-5);
    EXPECT_LE(relative_error(got.db, want.db), 1e-5);
  }
}

// The GPU's row sum: each lane's layer_norm_lane_sum, then lane i adds lane i ^ offset's value
// for offset 16, 8, 4, 2, 1 (shuffles). Every lane ends with the host's sum, to the bit.
TEST(KernelMathLayerNorm, RowSumIsTheWarpsOrder) {
  for (const int64_t d : {1, 5, 31, 32, 33, 100, 768}) {
    const std::vector<float> x = random_floats(d, 20 + static_cast<uint64_t>(d), -3.0f, 5.0f);
    const km::RowValueTerm term{x.data()};
    std::vector<float> lanes(km::kLayerNormLanes);
    for (int l = 0; l < km::kLayerNormLanes; ++l) lanes[l] = km::layer_norm_lane_sum(term, l, d);
    for (int offset = km::kLayerNormLanes / 2; offset > 0; offset /= 2) {
      std::vector<float> next(lanes.size());
      for (int l = 0; l < km::kLayerNormLanes; ++l) next[l] = lanes[l] + lanes[l ^ offset];
      lanes = next;
    }
    const float host = km::layer_norm_row_sum_on_host(term, d);
    EXPECT_EQ(bit_mismatches(lanes, std::vector<float>(lanes.size(), host)), "") << d;
  }
}

}  // namespace
}  // namespace scalescope::kernel_math_test
