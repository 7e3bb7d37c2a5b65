// The layers whose training forward writes the model's saved 16-bit copy of its output itself
// (LayerKernel::forwards_into_saved): the CPU layer norm (from its fp32 input) and, under bf16,
// the activations and dense layers (from the saved copy of their input, as autocast runs them
// on bf16 tensors; GELU under fp16 too).
// The copy is the one the model would have saved: the layer norm's the same bits as its fp32
// forward rounded, an activation's the bits of its fp32 forward on the rounded input, rounded.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <variant>
#include <vector>

#include "core/buffer.h"
#include "models/kernel_math/half_math.h"
#include "models/kernels.h"
#include "models/layer_spec.h"
#include "tests/models/bound_layer.h"
#include "tests/models/layer_cases.h"
#include "tests/models/precision_scope.h"

namespace scalescope {
namespace {

using namespace testing_util;  // NOLINT(google-build-using-namespace): the layer tests' kit
namespace km = kernel_math;
using SavedOutput = LayerKernel::SavedOutput;

std::vector<uint16_t> to_half(const std::vector<float>& v, km::HalfFormat format) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = km::to_half(v[i], format);
  return out;
}

std::vector<float> widened(const std::vector<uint16_t>& v, km::HalfFormat format) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = km::from_half(v[i], format);
  return out;
}

// Runs forward_into_saved on the layer's device and returns the copy it wrote.
std::vector<uint16_t> forward_into_saved(BoundLayer& layer, const std::vector<uint16_t>* saved_in,
                                         km::HalfFormat format) {
  DeviceBuffer in16(layer.device, layer.in_shape.numel() * sizeof(uint16_t));
  if (saved_in != nullptr) {
    std::copy(saved_in->begin(), saved_in->end(), static_cast<uint16_t*>(in16.data()));
  }
  DeviceBuffer out16(layer.device, layer.out_shape.numel() * sizeof(uint16_t));
  layer.kernel->forward_into_saved(
      saved_in != nullptr ? nullptr : layer.in.data(),
      saved_in != nullptr ? static_cast<const uint16_t*>(in16.data()) : nullptr,
      static_cast<uint16_t*>(out16.data()), format, layer.device.default_stream());
  layer.device.default_stream().synchronize();
  const auto* out = static_cast<const uint16_t*>(out16.data());
  return std::vector<uint16_t>(out, out + layer.out_shape.numel());
}

TEST(SavedForward, ALayerNormWritesItsRoundedForwardAndKeepsItsStatisticsForBackward) {
  for (const km::HalfFormat format : {km::HalfFormat::kBf16, km::HalfFormat::kFp16}) {
    for (const LayerCase& c : layer_cases()) {
      if (!std::holds_alternative<LayerNormSpec>(c.spec)) continue;
      SCOPED_TRACE(c.name);
      BoundLayer layer(c);
      ASSERT_EQ(layer.kernel->forwards_into_saved(format), SavedOutput::kFromInput);
      fill_random_params(layer, 3);
      layer.in.copy_from_host(layer_input(c, 4));
      layer.dout.copy_from_host(random_values(layer.out_shape.numel(), 5));
      layer.forward();
      const std::vector<uint16_t> want = to_half(layer.out.to_host(), format);
      layer.backward(true);
      const std::vector<float> din = layer.din.to_host();
      const std::vector<float> dw = layer.grads[0].to_host();
      // Another forward first: forward_into_saved must save its own statistics.
      layer.in.copy_from_host(layer_input(c, 6));
      layer.forward();
      layer.in.copy_from_host(layer_input(c, 4));
      EXPECT_EQ(forward_into_saved(layer, nullptr, format), want);
      layer.backward(true);
      EXPECT_EQ(layer.din.to_host(), din);
      EXPECT_EQ(layer.grads[0].to_host(), dw);
    }
  }
}

TEST(SavedForward, UnderBf16AnActivationRunsOnTheSavedCopiesOfItsInputAndOutput) {
  SKIP_WITHOUT_CPU_BF16();
  const km::HalfFormat bf16 = km::HalfFormat::kBf16;
  for (const LayerCase& c : layer_cases()) {
    if (!std::holds_alternative<ActivationSpec>(c.spec)) continue;
    SCOPED_TRACE(c.name);
    const BoundLayer fp32(c);
    EXPECT_EQ(fp32.kernel->forwards_into_saved(bf16), SavedOutput::kNo);
    std::optional<BoundLayer> layer;
    {
      const testing_util::PrecisionScope scope(Precision::kBf16);
      layer.emplace(c);
    }
    ASSERT_EQ(layer->kernel->forwards_into_saved(bf16), SavedOutput::kFromSavedInput);
    EXPECT_EQ(layer->kernel->forwards_into_saved(km::HalfFormat::kFp16), SavedOutput::kNo);
    const std::vector<uint16_t> saved_in = to_half(layer_input(c, 7), bf16);
    layer->in.copy_from_host(widened(saved_in, bf16));
    layer->forward();
    const std::vector<uint16_t> want = to_half(layer->out.to_host(), bf16);
    EXPECT_EQ(forward_into_saved(*layer, &saved_in, bf16), want);
  }
}

// GELU under bf16 and fp16 (the CPU kernel's own loops, a 4096-value task at a time): forward
// from the saved input into the saved output, and backward from the saved input as it is, the
// bits of its fp32 passes on the widened input (the model's restore), the output rounded.
TEST(SavedForward, GeluRunsBothPassesOnTheSavedCopies) {
  for (const auto& [precision, format] : {std::pair{Precision::kBf16, km::HalfFormat::kBf16},
                                          std::pair{Precision::kFp16, km::HalfFormat::kFp16}}) {
    for (const LayerCase& c : layer_cases()) {
      const auto* activation = std::get_if<ActivationSpec>(&c.spec);
      if (activation == nullptr || activation->kind != Activation::kGelu) continue;
      SCOPED_TRACE(c.name);
      std::optional<BoundLayer> layer;
      {
        const testing_util::PrecisionScope scope(precision);
        layer.emplace(c);
      }
      ASSERT_EQ(layer->kernel->forwards_into_saved(format), SavedOutput::kFromSavedInput);
      ASSERT_TRUE(layer->kernel->reads_saved(format));
      // Beyond a GELU's bend and its tails, where the 16-bit rounding of x matters most.
      std::vector<float> x = random_values(c.in.numel(), 9);
      for (float& v : x) v *= 12.0f;
      const std::vector<uint16_t> saved_in = to_half(x, format);
      layer->in.copy_from_host(widened(saved_in, format));
      layer->dout.copy_from_host(random_values(layer->out_shape.numel(), 10));
      layer->forward();
      EXPECT_EQ(forward_into_saved(*layer, &saved_in, format),
                to_half(layer->out.to_host(), format));
      layer->backward(true);
      const std::vector<float> want_din = layer->din.to_host();
      DeviceBuffer in16(layer->device, saved_in.size() * sizeof(uint16_t));
      std::copy(saved_in.begin(), saved_in.end(), static_cast<uint16_t*>(in16.data()));
      layer->din.copy_from_host(std::vector<float>(want_din.size(), 0.0f));
      layer->kernel->backward_saved(static_cast<const uint16_t*>(in16.data()), nullptr,
                                    layer->dout.data(), layer->din.data(),
                                    layer->device.default_stream());
      layer->device.default_stream().synchronize();
      EXPECT_EQ(layer->din.to_host(), want_din);
      // Under bf16 the gradient may also leave as the bf16 copy the dense layer before reads:
      // the same gradient rounded, as that layer's own copy would round it.
      ASSERT_EQ(layer->kernel->writes_half_gradient(format), format == km::HalfFormat::kBf16);
      if (format != km::HalfFormat::kBf16) continue;
      DeviceBuffer din16(layer->device, want_din.size() * sizeof(uint16_t));
      auto* got = static_cast<uint16_t*>(din16.data());
      layer->kernel->backward_into_half_gradient(static_cast<const uint16_t*>(in16.data()), nullptr,
                                                 layer->dout.data(), got,
                                                 layer->device.default_stream());
      layer->device.default_stream().synchronize();
      EXPECT_EQ(std::vector<uint16_t>(got, got + want_din.size()), to_half(want_din, format));
    }
  }
}

// Under bf16 a dense layer or a convolution (reading its input's saved copy, as a model binds
// it with a pool) writes its output's saved copy: its fp32 forward rounded, bit for bit. A
// convolution does wherever oneDNN runs its bf16-writing forward in the implementation and on
// the weights' copy of its fp32 forward: every case here with AMX, with AVX512-BF16 alone and
// with AVX-512 alone (ONEDNN_MAX_CPU_ISA), so at least the four asked for below.
TEST(SavedForward, UnderBf16ADenseLayerOrAConvolutionWritesItsForwardRounded) {
  SKIP_WITHOUT_CPU_BF16();
  const km::HalfFormat bf16 = km::HalfFormat::kBf16;
  int convolutions = 0;
  for (const LayerCase& c : layer_cases()) {
    const bool conv = std::holds_alternative<Conv2DSpec>(c.spec);
    if (!conv && !std::holds_alternative<DenseSpec>(c.spec)) continue;
    SCOPED_TRACE(c.name);
    EXPECT_EQ(BoundLayer(c, std::make_shared<TransientPool>()).kernel->forwards_into_saved(bf16),
              SavedOutput::kNo);
    std::optional<BoundLayer> layer;
    {
      const testing_util::PrecisionScope scope(Precision::kBf16);
      layer.emplace(c, std::make_shared<TransientPool>());
    }
    if (conv && layer->kernel->forwards_into_saved(bf16) == SavedOutput::kNo) continue;
    convolutions += conv ? 1 : 0;
    ASSERT_EQ(layer->kernel->forwards_into_saved(bf16), SavedOutput::kFromSavedInput);
    fill_random_params(*layer, 3);
    const std::vector<uint16_t> saved_in = to_half(layer_input(c, 8), bf16);
    layer->in.copy_from_host(widened(saved_in, bf16));
    layer->forward();
    const std::vector<uint16_t> want = to_half(layer->out.to_host(), bf16);
    EXPECT_EQ(forward_into_saved(*layer, &saved_in, bf16), want);
  }
  EXPECT_GE(convolutions, 4);
}

// Under bf16 a dense layer's backward may read its output's gradient as the bf16 copy its
// reader wrote (a GELU's): the input and weight gradients are those of the fp32 gradient it
// would have rounded itself, bit for bit.
TEST(SavedForward, UnderBf16ADenseLayersBackwardReadsTheRoundedGradientAsItsOwnCopy) {
  SKIP_WITHOUT_CPU_BF16();
  const km::HalfFormat bf16 = km::HalfFormat::kBf16;
  for (const LayerCase& c : layer_cases()) {
    if (!std::holds_alternative<DenseSpec>(c.spec)) continue;
    SCOPED_TRACE(c.name);
    std::optional<BoundLayer> layer;
    {
      const testing_util::PrecisionScope scope(Precision::kBf16);
      layer.emplace(c, std::make_shared<TransientPool>());
    }
    ASSERT_TRUE(layer->kernel->reads_half_gradient(bf16));
    fill_random_params(*layer, 3);
    const std::vector<uint16_t> saved_in = to_half(layer_input(c, 8), bf16);
    const std::vector<float> dout = random_values(layer->out_shape.numel(), 11);
    DeviceBuffer in16(layer->device, saved_in.size() * sizeof(uint16_t));
    std::copy(saved_in.begin(), saved_in.end(), static_cast<uint16_t*>(in16.data()));
    const auto* in = static_cast<const uint16_t*>(in16.data());
    Stream& stream = layer->device.default_stream();
    layer->in.copy_from_host(widened(saved_in, bf16));
    layer->forward();
    layer->dout.copy_from_host(dout);
    layer->kernel->backward_saved(in, nullptr, layer->dout.data(), layer->din.data(), stream);
    stream.synchronize();
    const std::vector<float> want_din = layer->din.to_host();
    const std::vector<float> want_dw = layer->grads[0].to_host();
    const std::vector<uint16_t> dout16 = to_half(dout, bf16);
    DeviceBuffer d16(layer->device, dout16.size() * sizeof(uint16_t));
    std::copy(dout16.begin(), dout16.end(), static_cast<uint16_t*>(d16.data()));
    layer->din.copy_from_host(std::vector<float>(want_din.size(), 0.0f));
    layer->grads[0].copy_from_host(std::vector<float>(want_dw.size(), 0.0f));
    layer->kernel->backward_from_half_gradient(
        in, nullptr, static_cast<const uint16_t*>(d16.data()), layer->din.data(), stream);
    stream.synchronize();
    EXPECT_EQ(layer->din.to_host(), want_din);
    EXPECT_EQ(layer->grads[0].to_host(), want_dw);
  }
}

}  // namespace
}  // namespace scalescope
