// The CPU backend's choice of kernel per layer: convolutions and dense layers in
// cpu_weighted.cpp, those without parameters in cpu_unary.cpp, max pooling (cpu_pool.cpp), batch
// and layer normalization as plain OpenMP loops (their files say why), and which activations
// and ReLU gradients each kernel computes fused.
#include <memory>
#include <variant>

#include "core/check.h"
#include "core/overloaded.h"
#include "models/cpu/cpu_kernels.h"
#include "models/cpu/dnnl_kernel.h"

namespace scalescope {
namespace {

std::unique_ptr<LayerKernel> build(const LayerSpec& spec, const LayerBinding& b, Device& device) {
  return std::visit(
      Overloaded{
          [&](const Conv2DSpec& c) { return make_cpu_conv(c, b, device); },
          [&](const MaxPool2DSpec& p) { return make_cpu_max_pool(p, b); },
          [&](const DenseSpec& d) { return make_cpu_dense(d, b, device); },
          [&](const ActivationSpec& a) { return make_cpu_eltwise(a.kind, b.in.numel(), device); },
          [&](const FlattenSpec&) { return make_cpu_flatten(b.in, device); },
          [&](const GlobalAvgPoolSpec&) { return make_cpu_global_avg_pool(b.in, device); },
          [&](const BatchNorm2DSpec& n) { return make_cpu_batch_norm(n, b, device); },
          [&](const PadShortcutSpec& p) { return make_cpu_pad_shortcut(p, b); },
          [&](const AddSpec&) -> std::unique_ptr<LayerKernel> {
            throw_error("Add is computed by the model, not a layer kernel");
          },
          [&](const LayerNormSpec& n) { return make_cpu_layer_norm(n, b, device); },
          [&](const CausalSelfAttentionSpec& a) { return make_cpu_attention(a, b, device); },
          [&](const EmbeddingSpec& e) { return make_cpu_embedding(e, b, device); },
          [&](const PositionEmbeddingSpec& p) { return make_cpu_position_embedding(p, b, device); },
          [&](const DropoutSpec& d) { return make_cpu_dropout(d, b); },
      },
      spec);
}

}  // namespace

bool cpu_fuses_activation(const LayerSpec& layer, Activation activation) {
  const bool weighted =
      std::holds_alternative<Conv2DSpec>(layer) || std::holds_alternative<DenseSpec>(layer);
  return (weighted && activation != Activation::kGelu) ||
         (cpu_fuses_relu_backward(layer) && activation == Activation::kRelu);
}

// Batch norm's loops (cpu_norm.cpp) apply a ReLU in forward and its mask in backward.
bool cpu_fuses_relu_backward(const LayerSpec& producer) {
  return std::holds_alternative<BatchNorm2DSpec>(producer);
}

bool cpu_fuses_relu_gradient(const LayerSpec& reader) {
  return std::holds_alternative<MaxPool2DSpec>(reader);
}

std::unique_ptr<LayerKernel> make_cpu_layer(const LayerSpec& spec, const LayerBinding& binding,
                                            Device& device) {
  check_layer_binding(spec, binding);
  SS_CHECK(!binding.activation || cpu_fuses_activation(spec, *binding.activation),
           "{}: the CPU kernel cannot apply a fused activation", describe(spec));
  SS_CHECK(!binding.relu_backward ||
               (binding.activation == Activation::kRelu && cpu_fuses_relu_backward(spec)),
           "{}: the CPU kernel cannot compute a fused ReLU's backward", describe(spec));
  SS_CHECK(!binding.relu_gradient || cpu_fuses_relu_gradient(spec),
           "{}: the CPU kernel cannot compute a fused ReLU's gradient", describe(spec));
  std::unique_ptr<LayerKernel> kernel;
  SS_CHECK_DNNL(kernel = build(spec, binding, device));
  return kernel;
}

}  // namespace scalescope
