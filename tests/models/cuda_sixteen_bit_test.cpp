// bf16 and fp16 on GPUs (models/cuda/cuda_dense.cpp): dense layers multiply 16-bit copies of
// their operands with fp32 accumulation, attention computes in TF32, convolutions refuse. The
// layers against the CPU kernels in the same precision, the rounding itself on inputs chosen so
// that it shows, fp16's overflow to infinity (what loss scaling looks for), and the refusal.
// Skipped without a GPU, as cuda_kernels_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <tuple>
#include <variant>
#include <vector>

#include "core/device.h"
#include "models/kernel_math/half_math.h"
#include "models/kernels.h"
#include "models/layer_spec.h"
#include "tests/models/cuda_test_util.h"
#include "tests/models/precision_scope.h"
#include "tests/test_util.h"

namespace scalescope {
namespace {

using namespace cuda_test;
using testing_util::error_of;

using Sixteen = Precision;

// ---- bf16 and fp16: dense layers on 16-bit copies of their operands, attention in TF32

// The dense and attention cases of cuda_kernels_test.cpp that differ in what the GEMMs see:
// sizes, rows of a sequence, no bias, the padded rows, several heads.
std::vector<LayerCase> gemm_cases() {
  return {
      {"dense", DenseSpec{5}, Shape{3, 7}},
      {"dense_wide", DenseSpec{128}, Shape{64, 256}},
      {"dense_many_rows", DenseSpec{40}, Shape{1100, 33}},
      {"dense_sequence_no_bias", DenseSpec{40, false}, Shape{2, 12, 33}},
      {"dense_unaligned_rows", DenseSpec{1001}, Shape{4200, 8}},
      {"attention_4heads_s40", CausalSelfAttentionSpec{4}, Shape{2, 40, 96}},
      {"attention_4heads_s128", CausalSelfAttentionSpec{4}, Shape{2, 128, 384}},
  };
}

class CudaSixteenBitTest : public CudaKernelsTest,
                           public ::testing::WithParamInterface<std::tuple<LayerCase, Sixteen>> {};

// Dense layers against the CPU's in the same precision (oneDNN's bf16; fp16 emulated on
// operands rounded to fp16): the same products of the same rounded operands, summed in another
// order, within the format's unit roundoff, which the bias gradient needs: oneDNN sums it from
// the rounded output gradient, the GPU from the fp32 one (an H100 showed up to 1.6e-3 in bf16,
// under 1e-3 everywhere else). Attention computes in TF32 on GPUs under both, in fp32 on CPUs:
// TF32's tolerance.
TEST_P(CudaSixteenBitTest, MatchesCpuKernels) {
  const auto& [c, precision] = GetParam();
  const testing_util::PrecisionScope scope(precision);
  SCOPED_TRACE(describe(c.spec) + " on " + c.in.to_string() + ", " + to_string(precision));
  const bool dense = std::holds_alternative<DenseSpec>(c.spec);
  const double tol = dense ? kernel_math::unit_roundoff(precision == Sixteen::kBf16
                                                            ? kernel_math::HalfFormat::kBf16
                                                            : kernel_math::HalfFormat::kFp16)
                           : kTf32Tolerance;
  expect_layer_matches_cpu(*gpu_, *cpu_, c, tol);
}

INSTANTIATE_TEST_SUITE_P(GemmLayers, CudaSixteenBitTest,
                         ::testing::Combine(::testing::ValuesIn(gemm_cases()),
                                            ::testing::Values(Sixteen::kBf16, Sixteen::kFp16)),
                         [](const ::testing::TestParamInfo<CudaSixteenBitTest::ParamType>& info) {
                           return std::get<0>(info.param).name + "_" +
                                  to_string(std::get<1>(info.param));
                         });

// y = x·Wᵀ over 64 inputs of `x` with weights of 1: 64 times x as the precision rounds it. With
// x = 1 + ε, where the format rounds x to 1, y is exactly 64; where it holds x (and in strict
// fp32), 64·(1 + ε). bf16 keeps 8 bits of mantissa, fp16 and TF32 11: ε = 2^-10 tells bf16 from
// fp16, 2^-12 fp16 from fp32.
float dense_of(Device& gpu, Sixteen precision, float x, std::string* math) {
  const testing_util::PrecisionScope scope(precision);
  const LayerCase c{"dense_ones", DenseSpec{1, false}, Shape{2, 64}};
  const LayerInputs inputs{
      std::vector<float>(128, x), std::vector<float>(2, 1.0f), {std::vector<float>(64, 1.0f)}, {}};
  cuda_test::BoundLayer b = bind_layer(gpu, c, inputs);
  b.kernel->forward(b.in.data(), b.out.data(), gpu.default_stream());
  gpu.default_stream().synchronize();
  if (math != nullptr) *math = b.kernel->choices().at(0).math;
  return b.out.to_host().at(0);
}

TEST_F(CudaKernelsTest, SixteenBitGemmsRoundTheirOperandsToThatFormat) {
  std::string math;
  EXPECT_EQ(dense_of(*gpu_, Sixteen::kBf16, 1.0f + 0x1p-10f, &math), 64.0f);
  EXPECT_EQ(math, "bf16");
  EXPECT_EQ(dense_of(*gpu_, Sixteen::kFp16, 1.0f + 0x1p-10f, &math), 64.0f + 0x1p-4f);
  EXPECT_EQ(math, "fp16");
  EXPECT_EQ(dense_of(*gpu_, Sixteen::kFp16, 1.0f + 0x1p-12f, nullptr), 64.0f);
  EXPECT_EQ(dense_of(*gpu_, Sixteen::kFp32, 1.0f + 0x1p-12f, &math), 64.0f + 0x1p-6f);
  EXPECT_EQ(math, "CUBLAS_COMPUTE_32F");
}

// Loss scaling finds fp16's overflows only if an operand beyond fp16's range (65504) becomes
// infinite in the product, as it does in a true fp16 tensor. (cuBLAS's
// CUBLAS_COMPUTE_32F_FAST_16F on fp32 tensors did not: it rounded nothing on an H100.)
TEST_F(CudaKernelsTest, Fp16GemmsOverflowToInfinityAsFp16Does) {
  EXPECT_TRUE(std::isinf(dense_of(*gpu_, Sixteen::kFp16, 70000.0f, nullptr)));
  EXPECT_TRUE(std::isfinite(dense_of(*gpu_, Sixteen::kBf16, 70000.0f, nullptr)));
}

// cuDNN computes in 16 bits only on 16-bit tensors, which the convolutions do not have yet:
// they refuse rather than run strict fp32 under a 16-bit name.
TEST_F(CudaKernelsTest, SixteenBitConvolutionsAreRefusedNamingTheLayer) {
  const testing_util::PrecisionScope scope(Sixteen::kBf16);
  const LayerCase c{"conv", Conv2DSpec{4, 3, 1, Padding::kSame, 0, true}, Shape{2, 5, 7, 3}};
  const std::string error = error_of([&] { bind_layer(*gpu_, c, layer_inputs(c, 1)); });
  EXPECT_CONTAINS(error, "Conv2D");
  EXPECT_CONTAINS(error, "convolutions on GPUs compute in tf32 or fp32 only so far");
}

}  // namespace
}  // namespace scalescope
