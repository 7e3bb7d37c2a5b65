// Layer normalization's CUDA kernels against the CPU kernel, bit for bit: both add their sums in
// kernel_math/layer_norm_math.h's order. (The other decoder layers are among
// cuda_kernels_test.cpp's cases, compared within a tolerance.)
//
// Without a usable GPU (or in a build without CUDA) these tests skip, saying why.
#include <gtest/gtest.h>

#include <vector>

#include "models/kernels.h"
#include "models/layer_spec.h"
#include "tests/models/cuda_test_util.h"

namespace scalescope {
namespace {

using namespace cuda_test;

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

// backward_adding (a residual stream's layer norm adding its input's gradient to the one the
// stream's later reader wrote): the same old values plus backward's, so the CPU kernel's bits.
TEST_F(CudaKernelsTest, LayerNormBackwardAddingIsTheCpuKernelsBitForBit) {
  for (const LayerCase& c : layer_norm_cases()) {
    SCOPED_TRACE(c.name);
    const LayerInputs inputs = layer_inputs(c, 41);
    const std::vector<float> before = layer_inputs(c, 42).x;
    std::vector<std::vector<float>> results[2];
    for (Device* device : {gpu_.get(), static_cast<Device*>(cpu_.get())}) {
      BoundLayer b = bind_layer(*device, c, inputs);
      ASSERT_TRUE(b.kernel->adds_input_gradient());
      Stream& stream = device->default_stream();
      b.din.copy_from_host(before);
      b.kernel->forward(b.in.data(), b.out.data(), stream);
      b.kernel->backward_adding(b.in.data(), b.out.data(), b.dout.data(), b.din.data(), stream);
      stream.synchronize();
      std::vector<std::vector<float>>& r = results[device == gpu_.get() ? 0 : 1];
      r.push_back(b.din.to_host());
      for (const Tensor& g : b.grads) r.push_back(g.to_host());
    }
    EXPECT_EQ(results[0], results[1]);
  }
}

}  // namespace
}  // namespace scalescope
