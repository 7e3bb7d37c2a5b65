// The CUDA kernels of a GPT-style decoder's layers against the CPU kernels, on the same fresh
// random inputs (as cuda_kernels_test.cpp does for the other layers): GELU, dense layers over a
// sequence's last dimension and without a bias, in strict fp32 (relative error <= 1e-5) and with
// TF32 allowed (<= 5e-3); and layer normalization, whose kernels add their sums in the CPU
// kernel's order (kernel_math/layer_norm_math.h), bit for bit.
//
// Without a usable GPU (or in a build without CUDA) these tests skip, saying why.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "models/kernels.h"
#include "models/layer_spec.h"
#include "tests/models/cuda_test_util.h"

namespace scalescope {
namespace {

using namespace cuda_test;

std::vector<LayerCase> decoder_cases() {
  return {
      {"gelu_sequence", ActivationSpec{Activation::kGelu}, Shape{2, 16, 40}},
      {"gelu_flat", ActivationSpec{Activation::kGelu}, Shape{3, 70}},
      {"dense_sequence", DenseSpec{24}, Shape{2, 5, 16}},
      {"dense_no_bias", DenseSpec{7}, Shape{3, 9}},
      {"dense_sequence_no_bias", DenseSpec{40}, Shape{2, 12, 33}},
      // 4·300 rows: the bias gradient's sum splits into parts.
      {"dense_sequence_many_rows", DenseSpec{40}, Shape{4, 300, 33}},
  };
}

class CudaDecoderLayerTest : public CudaKernelsTest,
                             public ::testing::WithParamInterface<std::tuple<LayerCase, bool>> {};

TEST_P(CudaDecoderLayerTest, MatchesCpuKernels) {
  const auto& [c, tf32] = GetParam();
  const Tf32Scope scope(tf32);
  const double tol = tf32 ? 5e-3 : 1e-5;
  SCOPED_TRACE(describe(c.spec) + " on " + c.in.to_string() + (tf32 ? ", tf32" : ", strict"));
  const LayerInputs inputs = layer_inputs(c, 1234);
  const LayerResult want = run_layer(*cpu_, c, inputs);
  const LayerResult got = run_layer(*gpu_, c, inputs);
  EXPECT_CLOSE(got.out, want.out, tol, "forward");
  EXPECT_CLOSE(got.din, want.din, tol, "input gradient");
  ASSERT_EQ(got.grads.size(), want.grads.size());
  for (size_t i = 0; i < got.grads.size(); ++i) {
    EXPECT_CLOSE(got.grads[i], want.grads[i], tol, "gradient of parameter " + std::to_string(i));
  }
  EXPECT_CLOSE(got.eval_out, want.eval_out, tol, "forward_eval");
}

INSTANTIATE_TEST_SUITE_P(DecoderLayers, CudaDecoderLayerTest,
                         ::testing::Combine(::testing::ValuesIn(decoder_cases()),
                                            ::testing::Bool()),
                         [](const ::testing::TestParamInfo<CudaDecoderLayerTest::ParamType>& info) {
                           return std::get<0>(info.param).name +
                                  (std::get<1>(info.param) ? "_tf32" : "_strict");
                         });

// Rows shorter than a warp, a warp and a half, 1200 rows (three parts of the parameter
// gradients) and rows of 800 (several column blocks of the CPU kernel), another eps.
std::vector<LayerCase> layer_norm_cases() {
  return {
      {"layer_norm_flat", LayerNormSpec{}, Shape{3, 10}},
      {"layer_norm_sequence", LayerNormSpec{}, Shape{2, 3, 48}},
      {"layer_norm_parts", LayerNormSpec{}, Shape{4, 300, 70}},
      {"layer_norm_wide", LayerNormSpec{1e-3f}, Shape{2, 5, 800}},
  };
}

// The host compiler cannot fuse a multiply and an add here (baseline x86-64 has no FMA), nvcc is
// told not to (--fmad=false), and the GPU's division and square root are IEEE-rounded as the
// host's: the same operations in the same order give the same bits.
TEST_F(CudaKernelsTest, LayerNormIsTheCpuKernelBitForBit) {
  for (const LayerCase& c : layer_norm_cases()) {
    SCOPED_TRACE(c.name);
    const LayerInputs inputs = layer_inputs(c, 1234);
    const LayerResult want = run_layer(*cpu_, c, inputs);
    const LayerResult got = run_layer(*gpu_, c, inputs);
    EXPECT_EQ(got.out, want.out);
    EXPECT_EQ(got.din, want.din);
    EXPECT_EQ(got.grads, want.grads);
    EXPECT_EQ(got.eval_out, want.eval_out);
  }
}

}  // namespace
}  // namespace scalescope
