// kernel_math/bias_math.h: the partition of the bias gradient among GPU threads adds every row
// exactly once, in an order fixed by the shape; its result against the CPU's dense layer (which
// adds in the same order where its backward runs as matmuls) and the bias broadcast, bit for
// bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/precision.h"
#include "core/random.h"
#include "models/kernel_math/bias_math.h"
#include "models/kernels.h"
#include "tests/models/kernel_math/cpu_kernels_on_host.h"
#include "tests/models/precision_scope.h"

namespace scalescope::kernel_math_test {
namespace {

namespace km = kernel_math;

// db[c] as the GPU kernels add it: each part's row-threads, then the part in thread order, then
// the parts in order (with one part, its sum is db).
float gpu_order_bias_grad(const std::vector<float>& dy, int64_t rows, int64_t channels, int64_t c,
                          km::BiasGradRead read = {}) {
  const km::BiasGradPlan plan = km::bias_grad_plan(rows);
  std::vector<float> partial;
  for (int64_t p = 0; p < plan.parts; ++p) {
    const km::IndexRange part = km::bias_grad_part_rows(plan, rows, p);
    float sums[km::kBiasTileRows];
    for (int t = 0; t < km::kBiasTileRows; ++t) {
      sums[t] = km::strided_column_sum(dy.data(), channels, c, part.begin + t, part.end,
                                       km::kBiasTileRows, read);
    }
    partial.push_back(km::ordered_sum(sums, km::kBiasTileRows, 1));
  }
  return plan.parts == 1 ? partial[0] : km::ordered_sum(partial.data(), plan.parts, 1);
}

// The parts tile [0, rows) in order, and within each, the row-threads' strided rows: with dy one
// at row r alone, exactly one (part, thread) sum is one.
void expect_each_row_added_once(int64_t rows, const std::vector<int64_t>& probe_rows) {
  const km::BiasGradPlan plan = km::bias_grad_plan(rows);
  ASSERT_GE(plan.parts, 1);
  ASSERT_LE(plan.parts, km::kBiasMaxParts);
  int64_t next = 0;
  for (int64_t p = 0; p < plan.parts; ++p) {
    const km::IndexRange part = km::bias_grad_part_rows(plan, rows, p);
    ASSERT_EQ(part.begin, next) << "rows " << rows << " part " << p;
    ASSERT_LE(part.end - part.begin, plan.rows_per_part);
    next = part.end;
  }
  ASSERT_EQ(next, rows) << "rows " << rows;

  std::vector<float> dy(static_cast<size_t>(rows), 0.0f);
  for (const int64_t r : probe_rows) {
    dy[r] = 1.0f;
    int hits = 0;
    for (int64_t p = 0; p < plan.parts; ++p) {
      const km::IndexRange part = km::bias_grad_part_rows(plan, rows, p);
      for (int t = 0; t < km::kBiasTileRows; ++t) {
        const float sum =
            km::strided_column_sum(dy.data(), 1, 0, part.begin + t, part.end, km::kBiasTileRows);
        ASSERT_TRUE(sum == 0.0f || sum == 1.0f);
        hits += sum == 1.0f ? 1 : 0;
      }
    }
    EXPECT_EQ(hits, 1) << "rows " << rows << ", row " << r;
    dy[r] = 0.0f;
  }
}

// strided_column_sum loads its values in batches before it adds them: the sum is still each
// value, as `read` takes it, added in row order, bit for bit, whatever the rows' count against
// the batch.
TEST(KernelMathBias, ColumnSumsAddInRowOrderWhateverTheBatching) {
  const int64_t channels = 3, c = 1;
  const std::vector<float> dy = random_floats(100 * channels, 78, -1e3f, 1e3f);
  for (const km::BiasGradRead read :
       {km::BiasGradRead{}, km::BiasGradRead{true, km::HalfFormat::kBf16},
        km::BiasGradRead{true, km::HalfFormat::kFp16}}) {
    for (int64_t first = 0; first < 3; ++first) {
      for (int64_t end = first; end <= 100; ++end) {
        for (const int64_t step : {1, 3, 8}) {
          float want = 0.0f;
          for (int64_t r = first; r < end; r += step) want += read(dy[r * channels + c]);
          const float got = km::strided_column_sum(dy.data(), channels, c, first, end, step, read);
          ASSERT_EQ(km::float_bits(got), km::float_bits(want))
              << "rows [" << first << ", " << end << ") step " << step;
        }
      }
    }
  }
}

TEST(KernelMathBias, EveryRowIsAddedExactlyOnce) {
  for (const int64_t rows : {1, 7, 8, 9, 511, 512, 513, 1025, 4097}) {
    std::vector<int64_t> all(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) all[r] = r;
    expect_each_row_added_once(rows, all);
  }
  // Enough rows for the cap on parts: the rows next to every part boundary, and random ones.
  for (const int64_t rows : {int64_t{127 * 512 + 1}, int64_t{100003}}) {
    const km::BiasGradPlan plan = km::bias_grad_plan(rows);
    ASSERT_EQ(plan.parts, km::kBiasMaxParts);
    std::vector<int64_t> probes = {0, rows - 1};
    for (int64_t p = 1; p < plan.parts; ++p) {
      probes.push_back(p * plan.rows_per_part - 1);
      probes.push_back(p * plan.rows_per_part);
    }
    Rng rng(71);
    for (int i = 0; i < 50; ++i) probes.push_back(static_cast<int64_t>(rng.below(rows)));
    expect_each_row_added_once(rows, probes);
  }
  EXPECT_EQ(km::bias_grad_plan(0).parts, 1);
  EXPECT_EQ(km::bias_grad_part_rows(km::bias_grad_plan(0), 0, 0).end, 0);
}

// 1500 rows of 37 channels make three parts of the GPU's sum.
constexpr int64_t kRows = 1500, kChannels = 37;

struct DenseBiasGrad {
  std::vector<float> dy, cpu;  // the output gradient, and the CPU dense layer's bias gradient
};

// The CPU dense layer's bias gradient for a random dy, under the precision in force.
DenseBiasGrad cpu_dense_bias_grad() {
  const int64_t features = 3;
  CpuLayer dense(DenseSpec{kChannels}, Shape{kRows, features},
                 {random_floats(kChannels * features, 72), random_floats(kChannels, 73)});
  const std::vector<float> x = random_floats(kRows * features, 74);
  DenseBiasGrad g{random_floats(kRows * kChannels, 75), {}};
  dense.backward(x, dense.forward(x), g.dy);
  g.cpu = dense.param_grad(1);
  return g;
}

// 1500 rows of few weights: the CPU dense layer's backward runs as matmuls, its bias gradient
// by bias_grad_cpu in the GPU's order (bias_grad_part_on_host), so the two agree bit for bit.
TEST(KernelMathBias, GradientIsTheCpuDenseLayersBitForBit) {
  ASSERT_EQ(km::bias_grad_plan(kRows).parts, 3);
  const DenseBiasGrad g = cpu_dense_bias_grad();
  for (int64_t c = 0; c < kChannels; ++c) {
    double exact = 0.0;
    for (int64_t r = 0; r < kRows; ++r) exact += g.dy[r * kChannels + c];
    const float gpu = gpu_order_bias_grad(g.dy, kRows, kChannels, c);
    EXPECT_NEAR(gpu, exact, 1e-4) << "channel " << c;
    EXPECT_EQ(km::float_bits(gpu), km::float_bits(g.cpu[c])) << "channel " << c;
  }
}

// Under bf16 and fp16 the CPU's dense layer sums the 16-bit dy its products read (the bf16 copy,
// or fp16's emulation); given the 16-bit read, the CUDA kernel's order sums the same values, bit
// for bit. Summing the fp32 dy instead differs by dy's own rounding, more than 1e-3 here.
TEST(KernelMathBias, UnderSixteenBitsTheGradientSumsTheRoundedDyAsTheCpusDoes) {
  for (const auto& [precision, format] : {std::pair{Precision::kBf16, km::HalfFormat::kBf16},
                                          std::pair{Precision::kFp16, km::HalfFormat::kFp16}}) {
    if (testing_util::bf16_refused_here(precision)) continue;
    SCOPED_TRACE(to_string(precision));
    const ScopedPrecision scoped(precision);
    const DenseBiasGrad g = cpu_dense_bias_grad();
    float unrounded_gap = 0.0f;
    for (int64_t c = 0; c < kChannels; ++c) {
      EXPECT_EQ(km::float_bits(gpu_order_bias_grad(g.dy, kRows, kChannels, c, {true, format})),
                km::float_bits(g.cpu[c]))
          << "channel " << c;
      const float unrounded = gpu_order_bias_grad(g.dy, kRows, kChannels, c);
      unrounded_gap = std::max(unrounded_gap, std::abs(unrounded - g.cpu[c]));
    }
    EXPECT_GT(unrounded_gap, 1e-3f);
  }
}

// A dense layer with zero weights outputs its bias, broadcast over the rows.
TEST(KernelMathBias, BiasAddIsTheCpuBroadcast) {
  const int64_t rows = 5, channels = 7;
  const std::vector<float> bias = random_floats(channels, 76);
  CpuLayer dense(DenseSpec{channels}, Shape{rows, 2},
                 {std::vector<float>(channels * 2, 0.0f), bias});
  const std::vector<float> expected = dense.forward(random_floats(rows * 2, 77));
  std::vector<float> y(rows * channels, 0.0f);
  for (int64_t i = 0; i < rows * channels; ++i)
    y[i] += bias[km::bias_channel(i, km::PlainDivider{channels})];
  EXPECT_EQ(bit_mismatches(y, expected), "");
  std::vector<float> y_int(rows * channels, 0.0f);
  const km::IntDivider by_channels(channels);
  for (int64_t i = 0; i < rows * channels; ++i) y_int[i] += bias[km::bias_channel(i, by_channels)];
  EXPECT_EQ(bit_mismatches(y_int, expected), "");
}

}  // namespace
}  // namespace scalescope::kernel_math_test
