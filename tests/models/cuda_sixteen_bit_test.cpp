// bf16 and fp16 on GPUs (models/cuda/cuda_dense.cpp, cuda_conv.cpp, cuda_attention.cpp): dense
// layers, convolutions and attention's products multiply 16-bit copies of their operands with
// fp32 accumulation. The layers against the CPU kernels in the same precision, the rounding
// itself on inputs chosen so that it shows, and fp16's overflow to infinity (what loss scaling
// looks for). Skipped without a GPU, as cuda_kernels_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
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

#if SCALESCOPE_WITH_CUDA
#include <cuda_runtime.h>

#include "models/cuda/attention_ops.h"
#endif

namespace scalescope {
namespace {

using namespace cuda_test;

using Sixteen = Precision;

// ---- bf16 and fp16: dense layers, convolutions and attention on 16-bit copies of their
// operands

// The dense, convolution and attention cases of cuda_kernels_test.cpp that differ in what the
// GEMMs or cuDNN see: sizes, rows of a sequence, no bias, the padded rows; a thin input, the
// extended input of asymmetric padding, tensor cores' channel counts, a ResNet's 1x1 and
// strided 3x3 without bias; several heads.
std::vector<LayerCase> sixteen_bit_cases() {
  using enum Padding;
  return {
      {"conv_same_s1", Conv2DSpec{4, 3, 1, kSame}, Shape{2, 5, 7, 3}},
      {"conv_same_s2_odd", Conv2DSpec{3, 3, 2, kSame}, Shape{2, 7, 6, 2}},
      {"conv_same_wide", Conv2DSpec{32, 3, 1, kSame}, Shape{4, 16, 16, 16}},
      {"conv_1x1_no_bias", Conv2DSpec{64, 1, 1, kValid, 0, false}, Shape{2, 8, 8, 64}},
      {"conv_explicit_s2_no_bias", Conv2DSpec{32, 3, 2, kExplicit, 1, false}, Shape{2, 9, 8, 16}},
      {"dense", DenseSpec{5}, Shape{3, 7}},
      {"dense_wide", DenseSpec{128}, Shape{64, 256}},
      {"dense_many_rows", DenseSpec{40}, Shape{1100, 33}},
      {"dense_sequence_no_bias", DenseSpec{40, false}, Shape{2, 12, 33}},
      {"dense_unaligned_rows", DenseSpec{1001}, Shape{4200, 8}},
      {"attention_4heads_s40", CausalSelfAttentionSpec{4}, Shape{2, 40, 48}},
      {"attention_4heads_s128", CausalSelfAttentionSpec{4}, Shape{2, 128, 384}},
  };
}

class CudaSixteenBitTest : public CudaKernelsTest,
                           public ::testing::WithParamInterface<std::tuple<LayerCase, Sixteen>> {};

// Dense layers and convolutions against the CPU's in the same precision (oneDNN's bf16; fp16
// emulated on operands rounded to fp16): the same products of the same rounded operands, summed
// in another order, within the format's unit roundoff (an H100 showed up to 1.6e-3 in bf16,
// under 1e-3 everywhere else, when the GPU's bias gradient still summed the fp32 output
// gradient where oneDNN sums the rounded one; SixteenBitBiasGradientsSumTheRoundedOutputGradient
// holds that now). cuDNN also rounds a convolution's results to the format (oneDNN writes them
// in fp32): one more unit roundoff. Attention computes on 16-bit copies of q, k, v, P, dout
// and dS on GPUs, and on CPUs in bf16 (in fp32 under emulated fp16; P rounded before the
// division by its sum on CPUs, after it on GPUs): an emulation of the GPU's roundings (float64
// otherwise, 30 draws of these shapes' inputs) differed from float64 by up to 0.92 unit
// roundoff in bf16 and fp16, so twice it too (the CPU's bf16 kernel and that emulation of the
// GPU's, 10 draws of uniform inputs on these shapes: up to 1.1 unit roundoff apart).
TEST_P(CudaSixteenBitTest, MatchesCpuKernels) {
  const auto& [c, precision] = GetParam();
  const testing_util::PrecisionScope scope(precision);
  SCOPED_TRACE(describe(c.spec) + " on " + c.in.to_string() + ", " + to_string(precision));
  const double u =
      kernel_math::unit_roundoff(precision == Sixteen::kBf16 ? kernel_math::HalfFormat::kBf16
                                                             : kernel_math::HalfFormat::kFp16);
  expect_layer_matches_cpu(*gpu_, *cpu_, c, std::holds_alternative<DenseSpec>(c.spec) ? u : 2 * u);
}

INSTANTIATE_TEST_SUITE_P(SixteenBitLayers, CudaSixteenBitTest,
                         ::testing::Combine(::testing::ValuesIn(sixteen_bit_cases()),
                                            ::testing::Values(Sixteen::kBf16, Sixteen::kFp16)),
                         [](const ::testing::TestParamInfo<CudaSixteenBitTest::ParamType>& info) {
                           return std::get<0>(info.param).name + "_" +
                                  to_string(std::get<1>(info.param));
                         });

// The 16-bit dense layers, attention and NHWC convolutions whose input needs no extension read
// the model's saved 16-bit copy of their input (forward_saved, backward_saved) instead of
// rounding a copy of their own: the same bits as forward on the input and backward on the
// restored values, in both formats.
TEST_P(CudaSixteenBitTest, PassesOnTheSavedInputAreThePassesOnTheInput) {
  const auto& [c, precision] = GetParam();
  const testing_util::PrecisionScope scope(precision);
  const kernel_math::HalfFormat format = *half_format(precision);
  const LayerInputs inputs = layer_inputs(c, 77);
  BoundLayer b = bind_layer(*gpu_, c, inputs);
  const bool reads = b.kernel->reads_saved(format);
  EXPECT_EQ(b.kernel->forwards_from_saved(format), reads);
  // Symmetric padding, or none: no extension (NCHW plans, which do not read, are cuDNN's call).
  if (c.name == "conv_1x1_no_bias" || std::holds_alternative<DenseSpec>(c.spec) ||
      std::holds_alternative<CausalSelfAttentionSpec>(c.spec)) {
    EXPECT_TRUE(reads);
  }
  if (c.name == "conv_same_s2_odd") {
    EXPECT_FALSE(reads);
  }
  EXPECT_FALSE(b.kernel->reads_saved(format == kernel_math::HalfFormat::kBf16
                                         ? kernel_math::HalfFormat::kFp16
                                         : kernel_math::HalfFormat::kBf16));
  if (!reads) return;
  // The saved copy, packed two values to a float of a device tensor.
  std::vector<uint16_t> saved(inputs.x.size());
  std::vector<float> restored(inputs.x.size());
  for (size_t i = 0; i < saved.size(); ++i) {
    saved[i] = kernel_math::to_half(inputs.x[i], format);
    restored[i] = kernel_math::from_half(saved[i], format);
  }
  std::vector<float> packed((saved.size() + 1) / 2);
  std::memcpy(packed.data(), saved.data(), saved.size() * sizeof(uint16_t));
  Tensor copy(*gpu_, Shape{static_cast<int64_t>(packed.size())});
  copy.copy_from_host(packed);
  const auto* in16 = reinterpret_cast<const uint16_t*>(copy.data());
  Stream& stream = gpu_->default_stream();
  b.kernel->forward(b.in.data(), b.out.data(), stream);
  const std::vector<float> y = b.out.to_host();
  b.out.copy_from_host(std::vector<float>(y.size(), NAN));
  b.kernel->forward_saved(in16, b.out.data(), stream);
  EXPECT_EQ(b.out.to_host(), y);
  b.in.copy_from_host(restored);
  b.kernel->backward(b.in.data(), b.out.data(), b.dout.data(), b.din.data(), stream);
  const std::vector<float> din = b.din.to_host();
  const std::vector<float> dw = b.grads.empty() ? std::vector<float>() : b.grads[0].to_host();
  b.in.copy_from_host(std::vector<float>(restored.size(), 0.0f));  // read by neither
  b.din.copy_from_host(std::vector<float>(restored.size(), NAN));
  b.kernel->backward_saved(in16, nullptr, b.dout.data(), b.din.data(), stream);
  EXPECT_EQ(b.din.to_host(), din);
  if (!b.grads.empty()) {
    EXPECT_EQ(b.grads[0].to_host(), dw);
  }
}

// What a kernel writing its output into the model's saved copy (forward_into_saved) and reading
// its input from one (backward_saved) gave, and what its fp32 passes gave on the same values.
struct SavedPasses {
  std::vector<uint16_t> into_saved, rounded_forward;  // forward_into_saved; to_half(forward)
  std::vector<float> din_saved, din;                  // backward_saved; backward (restored in)
  // Where the kernel reads its output's gradient in 16 bits: backward_from_half_gradient, and
  // backward_saved from that gradient restored.
  std::vector<float> din_half_dout, din_restored_dout;
};

SavedPasses saved_passes(Device& device, const LayerCase& c, kernel_math::HalfFormat format) {
  const LayerInputs inputs = layer_inputs(c, 91);
  BoundLayer b = bind_layer(device, c, inputs);
  Stream& stream = device.default_stream();
  std::vector<uint16_t> saved_x(inputs.x.size());
  std::vector<float> restored(inputs.x.size());
  for (size_t i = 0; i < saved_x.size(); ++i) {
    saved_x[i] = kernel_math::to_half(inputs.x[i], format);
    restored[i] = kernel_math::from_half(saved_x[i], format);
  }
  HalfTensor saved_in(device, saved_x);
  HalfTensor saved_out(device, std::vector<uint16_t>(static_cast<size_t>(b.out.numel()), 0x7fff));
  const auto reads = b.kernel->forwards_into_saved(format);
  const bool from_saved = reads == LayerKernel::SavedOutput::kFromSavedInput;
  if (from_saved) b.in.copy_from_host(restored);  // the values the saved input holds
  b.kernel->forward(b.in.data(), b.out.data(), stream);
  SavedPasses r;
  for (const float y : b.out.to_host())
    r.rounded_forward.push_back(kernel_math::to_half(y, format));
  b.kernel->forward_into_saved(from_saved ? nullptr : b.in.data(),
                               from_saved ? saved_in.data() : nullptr, saved_out.data(), format,
                               stream);
  r.into_saved = saved_out.to_host();
  if (!b.kernel->reads_saved(format)) return r;
  b.in.copy_from_host(restored);
  b.kernel->backward(b.in.data(), b.out.data(), b.dout.data(), b.din.data(), stream);
  r.din = b.din.to_host();
  b.din.copy_from_host(std::vector<float>(restored.size(), NAN));
  b.kernel->backward_saved(saved_in.data(), nullptr, b.dout.data(), b.din.data(), stream);
  r.din_saved = b.din.to_host();
  if (!b.kernel->reads_half_gradient(format)) return r;
  const SixteenBitCopy dout(inputs.dout, format);
  b.dout.copy_from_host(dout.restored);
  b.kernel->backward_saved(saved_in.data(), nullptr, b.dout.data(), b.din.data(), stream);
  r.din_restored_dout = b.din.to_host();
  HalfTensor half_dout(device, dout.saved);
  // Another gradient's copy left in the kernel's workspace, then dout's fp32 place not read.
  std::vector<float> negated = dout.restored;
  for (float& v : negated) v = -v;
  b.dout.copy_from_host(negated);
  b.kernel->backward_saved(saved_in.data(), nullptr, b.dout.data(), b.din.data(), stream);
  b.din.copy_from_host(std::vector<float>(restored.size(), NAN));
  b.dout.copy_from_host(std::vector<float>(dout.values.size(), NAN));
  b.kernel->backward_from_half_gradient(saved_in.data(), nullptr, half_dout.data(), b.din.data(),
                                        stream);
  r.din_half_dout = b.din.to_host();
  return r;
}

// GPT's GELU and layer norms under bf16 and fp16 write their output straight into the model's
// saved 16-bit copy, and GELU's backward reads its saved input, as the CPU kernels do: the same
// bits as rounding the fp32 forward and as backward on the restored input, and the CPU's bits
// (both backends run kernel_math's functions in the same order).
TEST_F(CudaKernelsTest, GeluAndLayerNormPassThroughTheSavedCopiesAsTheCpuKernels) {
  using Saved = LayerKernel::SavedOutput;
  const LayerCase gelu{"gelu", ActivationSpec{Activation::kGelu}, Shape{3, 37, 50}};
  const LayerCase norm{"layer_norm", LayerNormSpec{1e-5f}, Shape{3, 37, 50}};
  for (const Sixteen precision : {Sixteen::kBf16, Sixteen::kFp16}) {
    const testing_util::PrecisionScope scope(precision);
    const kernel_math::HalfFormat format = *half_format(precision);
    for (const LayerCase& c : {gelu, norm}) {
      SCOPED_TRACE(c.name + " in " + to_string(precision));
      const bool is_gelu = c.name == "gelu";
      const BoundLayer b = bind_layer(*gpu_, c, layer_inputs(c, 5));
      EXPECT_EQ(b.kernel->forwards_into_saved(format),
                is_gelu ? Saved::kFromSavedInput : Saved::kFromInput);
      EXPECT_EQ(b.kernel->reads_saved(format), is_gelu);
      const SavedPasses got = saved_passes(*gpu_, c, format);
      EXPECT_EQ(got.into_saved, got.rounded_forward);
      EXPECT_EQ(got.din_saved, got.din);
      const SavedPasses cpu = saved_passes(*cpu_, c, format);
      EXPECT_EQ(got.into_saved, cpu.into_saved);
      EXPECT_EQ(got.din_saved, cpu.din_saved);
    }
  }
}

// A 16-bit dense layer, attention or convolution whose output's readers all read its saved copy
// (GPT's c_fc, c_attn and attention; a ResNet's convolutions, read by batch norms) writes that
// copy in forward: the dense layer's y + b rounded in one pass from the GEMMs' fp32 result (with
// a bias or without), the attention's heads rounded into the rows, the convolution's 16-bit
// result as cuDNN wrote it; the bits of the fp32 forward rounded as the model's save rounds.
// GPT-2's padded head (dense_unaligned_rows's shape) does not: its reader, the loss, reads fp32;
// nor a convolution with a bias (added to the widened result) or one that reads no saved input.
// Such a convolution's backward also reads its output's gradient as the 16-bit copy its batch
// norm's backward writes: the bits of backward from that gradient restored.
TEST_P(CudaSixteenBitTest, ForwardsIntoTheSavedCopyAreTheForwardsRoundedAsTheModelWould) {
  const auto& [c, precision] = GetParam();
  const testing_util::PrecisionScope scope(precision);
  const kernel_math::HalfFormat format = *half_format(precision);
  const BoundLayer b = bind_layer(*gpu_, c, layer_inputs(c, 5));
  const auto* conv = std::get_if<Conv2DSpec>(&c.spec);
  const bool writes = conv != nullptr ? !conv->bias && b.kernel->reads_saved(format)
                                      : c.name != "dense_unaligned_rows";
  if (c.name == "conv_1x1_no_bias") {
    EXPECT_TRUE(writes);
  }
  EXPECT_EQ(b.kernel->forwards_into_saved(format),
            writes ? LayerKernel::SavedOutput::kFromSavedInput : LayerKernel::SavedOutput::kNo);
  // Such a convolution reads its output's gradient as the 16-bit copy a batch norm writes.
  EXPECT_EQ(b.kernel->reads_half_gradient(format), conv != nullptr && writes);
  if (!writes) return;
  const SavedPasses got = saved_passes(*gpu_, c, format);
  EXPECT_EQ(got.into_saved, got.rounded_forward);
  EXPECT_EQ(got.din_saved, got.din);
  EXPECT_EQ(got.din_half_dout, got.din_restored_dout);
  if (conv != nullptr) {
    EXPECT_FALSE(got.din_half_dout.empty());
  }
}

// The first output of `c`, a layer summing 64 inputs of `x` with weights of 1 (a dense layer
// of one unit, or a 1x1 convolution of one filter over 64 channels), two samples of them: 64
// times x as the precision rounds it. With x = 1 + ε, where the format rounds x to 1, y is
// exactly 64; where it holds x (and in strict fp32), 64·(1 + ε). bf16 keeps 8 bits of mantissa,
// fp16 and TF32 11: ε = 2^-10 tells bf16 from fp16, 2^-12 fp16 from fp32. `math`: what the
// forward pass's choice names.
float sum_of_ones(Device& gpu, Sixteen precision, const LayerCase& c, float x, std::string* math) {
  const testing_util::PrecisionScope scope(precision);
  const LayerInputs inputs{
      std::vector<float>(128, x), std::vector<float>(2, 1.0f), {std::vector<float>(64, 1.0f)}, {}};
  cuda_test::BoundLayer b = bind_layer(gpu, c, inputs);
  b.kernel->forward(b.in.data(), b.out.data(), gpu.default_stream());
  gpu.default_stream().synchronize();
  if (math != nullptr) *math = b.kernel->choices().at(0).math;
  return b.out.to_host().at(0);
}

float dense_of(Device& gpu, Sixteen precision, float x, std::string* math) {
  return sum_of_ones(gpu, precision, {"dense_ones", DenseSpec{1, false}, Shape{2, 64}}, x, math);
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

// The result rounded to the format too (64.0625 is an fp16 value).
float conv_of(Device& gpu, Sixteen precision, float x, std::string* math) {
  const LayerCase c{"conv_ones", Conv2DSpec{1, 1, 1, Padding::kValid, 0, false},
                    Shape{2, 1, 1, 64}};
  return sum_of_ones(gpu, precision, c, x, math);
}

TEST_F(CudaKernelsTest, SixteenBitConvolutionsRoundTheirOperandsToThatFormat) {
  std::string math;
  EXPECT_EQ(conv_of(*gpu_, Sixteen::kBf16, 1.0f + 0x1p-10f, &math), 64.0f);
  EXPECT_CONTAINS(math, "bf16 CUDNN_");
  EXPECT_EQ(conv_of(*gpu_, Sixteen::kFp16, 1.0f + 0x1p-10f, &math), 64.0f + 0x1p-4f);
  EXPECT_CONTAINS(math, "fp16 CUDNN_");
  EXPECT_EQ(conv_of(*gpu_, Sixteen::kFp32, 1.0f + 0x1p-12f, nullptr), 64.0f + 0x1p-6f);
  EXPECT_TRUE(std::isinf(conv_of(*gpu_, Sixteen::kFp16, 70000.0f, nullptr)));
  EXPECT_TRUE(std::isfinite(conv_of(*gpu_, Sixteen::kBf16, 70000.0f, nullptr)));
}

// The bias gradient of `c` (one output channel over two rows) for dy = g on both: 2·g as the
// precision rounds g.
float bias_grad_of(Device& gpu, Sixteen precision, const LayerCase& c, float g) {
  const testing_util::PrecisionScope scope(precision);
  const LayerInputs inputs{std::vector<float>(128, 1.0f),
                           std::vector<float>(2, g),
                           {std::vector<float>(64, 1.0f), {0.0f}},
                           {}};
  cuda_test::BoundLayer b = bind_layer(gpu, c, inputs);
  Stream& stream = gpu.default_stream();
  b.kernel->forward(b.in.data(), b.out.data(), stream);
  b.kernel->backward(b.in.data(), b.out.data(), b.dout.data(), b.din.data(), stream);
  stream.synchronize();
  return b.grads.at(1).to_host().at(0);
}

// As the CPU's kernels and autocast, the 16-bit layers sum their bias gradient from the output
// gradient rounded to the format (the copy the weights' products read): g = 1 + 2^-10 is 1 in
// bf16 and itself in fp16; fp32 keeps 1 + 2^-12.
TEST_F(CudaKernelsTest, SixteenBitBiasGradientsSumTheRoundedOutputGradient) {
  const float g = 1.0f + 0x1p-10f;
  for (const LayerCase& c : {LayerCase{"dense_bias", DenseSpec{1, true}, Shape{2, 64}},
                             LayerCase{"conv_bias", Conv2DSpec{1, 1, 1, Padding::kValid, 0, true},
                                       Shape{2, 1, 1, 64}}}) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(bias_grad_of(*gpu_, Sixteen::kBf16, c, g), 2.0f);
    EXPECT_EQ(bias_grad_of(*gpu_, Sixteen::kFp16, c, g), 2.0f + 0x1p-9f);
    EXPECT_EQ(bias_grad_of(*gpu_, Sixteen::kFp32, c, 1.0f + 0x1p-12f), 2.0f + 0x1p-11f);
  }
}

// ---- the attention's fused forward (SCALESCOPE_ATTENTION=flash)

// SCALESCOPE_ATTENTION set for a scope: the attention kernel reads it when it is made.
class AttentionKindScope {
 public:
  explicit AttentionKindScope(const char* kind) { setenv("SCALESCOPE_ATTENTION", kind, 1); }
  ~AttentionKindScope() { unsetenv("SCALESCOPE_ATTENTION"); }
  AttentionKindScope(const AttentionKindScope&) = delete;
  AttentionKindScope& operator=(const AttentionKindScope&) = delete;
};

// The fused passes under 16 bits against the CPU kernels with MatchesCpuKernels' tolerance (the
// forward's P is rounded to 16 bits before the division by the row's sum, as the CPU's is): the
// output, the input gradient and evaluation; bit-identical run after run (no atomics); every
// head size they take (16, 32, 64, 128), sequences of whole tiles and ones whose last is
// part-filled. They say that they ran where the device gives a block their shared memory (head
// size 128 needs 121 KiB: an H100's 227, not an sm_86's 99); in tf32, or for a head size they do
// not take, the chunks run.
TEST_F(CudaKernelsTest, FlashAttentionMatchesCpuKernels) {
  const AttentionKindScope flash("flash");
  const std::vector<LayerCase> cases = {
      {"attention_4heads_s128", CausalSelfAttentionSpec{4}, Shape{2, 128, 384}},  // hd 32
      {"attention_2heads_s100", CausalSelfAttentionSpec{2}, Shape{2, 100, 384}},  // hd 64
      {"attention_8heads_s80", CausalSelfAttentionSpec{8}, Shape{1, 80, 384}},    // hd 16
      {"attention_1head_s100", CausalSelfAttentionSpec{1}, Shape{1, 100, 384}},   // hd 128
  };
  const auto fits = [&](const LayerCase& c) {
#if SCALESCOPE_WITH_CUDA
    const int64_t hd = c.in[2] / 3 / std::get<CausalSelfAttentionSpec>(c.spec).heads;
    int optin = 0;
    cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, gpu_->id().index);
    return std::max(cuda_ops::flash_attention_shared_bytes(hd),
                    cuda_ops::flash_attention_backward_shared_bytes(hd)) <= optin;
#else
    (void)c;
    return false;
#endif
  };
  const auto algorithm = [&](const LayerCase& c) {
    return bind_layer(*gpu_, c, layer_inputs(c, 5)).kernel->choices().at(0).algorithm;
  };
  for (const Sixteen precision : {Sixteen::kBf16, Sixteen::kFp16}) {
    const testing_util::PrecisionScope scope(precision);
    const double u = kernel_math::unit_roundoff(*half_format(precision));
    for (const LayerCase& c : cases) {
      SCOPED_TRACE(c.name + ", " + to_string(precision));
      EXPECT_EQ(algorithm(c).find("fused flash attention") != std::string::npos, fits(c));
      expect_layer_matches_cpu(*gpu_, *cpu_, c, 2 * u);
      const LayerInputs inputs = layer_inputs(c, 9);
      const LayerResult first = run_layer(*gpu_, c, inputs);
      const LayerResult second = run_layer(*gpu_, c, inputs);
      EXPECT_EQ(first.out, second.out);
      EXPECT_EQ(first.din, second.din);
    }
    const LayerCase head_dim_4{"attention_4heads_s40", CausalSelfAttentionSpec{4},
                               Shape{2, 40, 48}};
    EXPECT_EQ(algorithm(head_dim_4).find("fused flash attention"), std::string::npos);
  }
  const testing_util::PrecisionScope tf32(Precision::kTf32);
  EXPECT_EQ(algorithm(cases[0]).find("fused flash attention"), std::string::npos);
}

}  // namespace
}  // namespace scalescope
