#include "models/layer_spec.h"

#include <fmt/format.h>

#include <algorithm>
#include <type_traits>

#include "core/check.h"
#include "core/enum_names.h"
#include "core/overloaded.h"

namespace scalescope {
namespace {

const char* activation_name(Activation a) {
  static constexpr auto kNames = enum_names<Activation>("ReLU", "Tanh", "Sigmoid", "GELU");
  return kNames(a).data();
}

void require_sequence(const LayerSpec& layer, const Shape& in) {
  SS_CHECK(in.rank() == 2 && in.numel() > 0,
           "{} needs a sequence input (positions, features) but gets shape {}", describe(layer),
           in.to_string());
}

void require_image(const LayerSpec& layer, const Shape& in) {
  SS_CHECK(in.rank() == 3 && in.numel() > 0,
           "{} needs an image input (height, width, channels) but gets shape {}", describe(layer),
           in.to_string());
}

}  // namespace

const char* to_string(LossKind kind) {
  static constexpr auto kNames = enum_names<LossKind>(
      "softmax_cross_entropy", "softmax_cross_entropy_one_hot", "binary_cross_entropy");
  return kNames(kind).data();
}

Shape label_shape(LossKind kind, const Shape& output) {
  switch (kind) {
    case LossKind::kSoftmaxCrossEntropy:
      // One class index per position of a sequence's logits [S, K].
      return output.rank() == 2 ? Shape{output[0]} : Shape{};
    case LossKind::kSoftmaxCrossEntropyOneHot:
      return output;
    case LossKind::kBinaryCrossEntropy:
      return output;
  }
  return output;
}

LossRows loss_rows(LossKind kind, const Shape& output) {
  const bool sequence = kind == LossKind::kSoftmaxCrossEntropy && output.rank() == 3;
  SS_CHECK((output.rank() == 2 || sequence) && output.numel() > 0,
           "{} takes a model output of shape [batch, classes]{}, not {}", to_string(kind),
           kind == LossKind::kSoftmaxCrossEntropy ? " or [batch, positions, classes]" : "",
           output.to_string());
  SS_CHECK(kind != LossKind::kBinaryCrossEntropy || output[1] == 1,
           "binary cross-entropy takes one probability per sample ([batch, 1]), not {}",
           output.to_string());
  const int64_t positions = sequence ? output[1] : 1;
  return {output[0] * positions, output[output.rank() - 1], positions};
}

std::string describe(const LayerSpec& layer) {
  return std::visit(
      Overloaded{
          [](const Conv2DSpec& c) {
            const std::string padding = c.padding == Padding::kSame ? "same"
                                        : c.padding == Padding::kValid
                                            ? "valid"
                                            : fmt::format("pad {}", c.pad);
            return fmt::format("Conv2D({}, {}x{}, stride {}, {}{})", c.filters, c.kernel, c.kernel,
                               c.stride, padding, c.bias ? "" : ", no bias");
          },
          [](const MaxPool2DSpec& p) {
            const std::string pad = p.pad == 0 ? "" : fmt::format(", pad {}", p.pad);
            return fmt::format("MaxPool2D({}x{}, stride {}{})", p.pool, p.pool, p.stride, pad);
          },
          [](const DenseSpec& d) {
            return fmt::format("Dense({}{})", d.units, d.bias ? "" : ", no bias");
          },
          [](const ActivationSpec& a) { return std::string(activation_name(a.kind)); },
          [](const FlattenSpec&) { return std::string("Flatten"); },
          [](const GlobalAvgPoolSpec&) { return std::string("GlobalAveragePool"); },
          [](const BatchNorm2DSpec& b) {
            return fmt::format("BatchNorm2D(eps {:g}, momentum {:g})", b.eps, b.momentum);
          },
          [](const PadShortcutSpec& p) {
            return fmt::format("PadShortcut(stride {}, {} channels)", p.stride, p.channels);
          },
          [](const AddSpec&) { return std::string("Add"); },
          [](const EmbeddingSpec& e) {
            return fmt::format("Embedding({} tokens, {})", e.vocab, e.dim);
          },
          [](const PositionEmbeddingSpec&) { return std::string("PositionEmbedding"); },
          [](const LayerNormSpec& n) { return fmt::format("LayerNorm(eps {:g})", n.eps); },
          [](const CausalSelfAttentionSpec& a) {
            return fmt::format("CausalSelfAttention({} heads)", a.heads);
          },
          [](const DropoutSpec& d) { return fmt::format("Dropout({:g})", d.rate); },
      },
      layer);
}

Pads same_padding(int64_t in, int64_t kernel, int64_t stride) {
  const int64_t out = (in + stride - 1) / stride;
  const int64_t total = std::max<int64_t>((out - 1) * stride + kernel - in, 0);
  return Pads{total / 2, total - total / 2};
}

Pads conv_padding(const Conv2DSpec& conv, int64_t in) {
  switch (conv.padding) {
    case Padding::kSame:
      return same_padding(in, conv.kernel, conv.stride);
    case Padding::kExplicit:
      return Pads{conv.pad, conv.pad};
    case Padding::kValid:
      break;
  }
  return Pads{};
}

int64_t conv_output_size(int64_t in, int64_t kernel, int64_t stride, Padding padding, int64_t pad) {
  if (padding == Padding::kSame) return (in + stride - 1) / stride;
  const int64_t padded = in + (padding == Padding::kExplicit ? 2 * pad : 0);
  return padded < kernel ? 0 : (padded - kernel) / stride + 1;
}

namespace {

Shape conv_output_shape(const LayerSpec& layer, const Conv2DSpec& c, const Shape& in) {
  require_image(layer, in);
  SS_CHECK(c.filters > 0 && c.kernel > 0 && c.stride > 0, "{} has a non-positive size",
           describe(layer));
  SS_CHECK(c.pad >= 0 && c.pad < c.kernel, "{}: padding {} must be in [0, {})", describe(layer),
           c.pad, c.kernel);
  const int64_t h = conv_output_size(in[0], c.kernel, c.stride, c.padding, c.pad);
  const int64_t w = conv_output_size(in[1], c.kernel, c.stride, c.padding, c.pad);
  SS_CHECK(h > 0 && w > 0,
           "{} cannot take an input of shape {}: the kernel is larger than the image",
           describe(layer), in.to_string());
  return Shape{h, w, c.filters};
}

Shape pool_output_shape(const LayerSpec& layer, const MaxPool2DSpec& p, const Shape& in) {
  require_image(layer, in);
  SS_CHECK(p.pool > 0 && p.stride > 0, "{} has a non-positive size", describe(layer));
  // PyTorch's bound, which also leaves every window a pixel of the image.
  SS_CHECK(p.pad >= 0 && p.pad <= p.pool / 2, "{}: padding {} must be in [0, {}]", describe(layer),
           p.pad, p.pool / 2);
  const int64_t h = conv_output_size(in[0], p.pool, p.stride, Padding::kExplicit, p.pad);
  const int64_t w = conv_output_size(in[1], p.pool, p.stride, Padding::kExplicit, p.pad);
  SS_CHECK(h > 0 && w > 0,
           "{} cannot take an input of shape {}: the image is smaller than the pool",
           describe(layer), in.to_string());
  return Shape{h, w, in[2]};
}

}  // namespace

Shape output_shape(const LayerSpec& layer, const Shape& in) {
  return std::visit(
      Overloaded{
          [&](const Conv2DSpec& c) { return conv_output_shape(layer, c, in); },
          [&](const MaxPool2DSpec& p) { return pool_output_shape(layer, p, in); },
          [&](const DenseSpec& d) {
            SS_CHECK((in.rank() == 1 || in.rank() == 2) && in.numel() > 0,
                     "{} needs a vector or a sequence of vectors but gets shape {} (add a Flatten)",
                     describe(layer), in.to_string());
            SS_CHECK(d.units > 0, "{} has no units", describe(layer));
            return in.rank() == 1 ? Shape{d.units} : Shape{in[0], d.units};
          },
          [&](const ActivationSpec&) { return in; },
          [&](const FlattenSpec&) { return Shape{in.numel()}; },
          [&](const GlobalAvgPoolSpec&) {
            require_image(layer, in);
            return Shape{in[2]};
          },
          [&](const BatchNorm2DSpec& b) {
            require_image(layer, in);
            SS_CHECK(b.eps > 0.0f && b.momentum >= 0.0f && b.momentum <= 1.0f,
                     "{}: eps must be > 0 and momentum in [0, 1]", describe(layer));
            return in;
          },
          [&](const PadShortcutSpec& p) {
            require_image(layer, in);
            SS_CHECK(p.stride > 0 && p.channels >= in[2] && (p.channels - in[2]) % 2 == 0,
                     "{} cannot take {} channels: it adds as many zero channels before as after",
                     describe(layer), in[2]);
            return Shape{(in[0] + p.stride - 1) / p.stride, (in[1] + p.stride - 1) / p.stride,
                         p.channels};
          },
          [&](const AddSpec&) { return in; },
          [&](const EmbeddingSpec& e) {
            SS_CHECK(in.rank() == 1 && in[0] > 0,
                     "{} needs a sequence of token ids but gets shape {}", describe(layer),
                     in.to_string());
            SS_CHECK(e.vocab > 0 && e.dim > 0, "{} has a non-positive size", describe(layer));
            return Shape{in[0], e.dim};
          },
          [&](const PositionEmbeddingSpec&) {
            require_sequence(layer, in);
            return in;
          },
          [&](const LayerNormSpec& n) {
            SS_CHECK(in.rank() >= 1 && in.numel() > 0, "{} needs an input, not shape {}",
                     describe(layer), in.to_string());
            SS_CHECK(n.eps > 0.0f, "{}: eps must be > 0", describe(layer));
            return in;
          },
          [&](const CausalSelfAttentionSpec& a) {
            require_sequence(layer, in);
            SS_CHECK(a.heads > 0 && in[1] % (3 * a.heads) == 0,
                     "{} needs q, k and v of {} heads side by side ([S, 3D], D a multiple of the "
                     "heads) but gets shape {}",
                     describe(layer), a.heads, in.to_string());
            return Shape{in[0], in[1] / 3};
          },
          [&](const DropoutSpec& d) {
            SS_CHECK(d.rate >= 0.0f && d.rate < 1.0f, "{}: the rate must be in [0, 1)",
                     describe(layer));
            return in;
          },
      },
      layer);
}

std::vector<ParamSpec> param_specs(const LayerSpec& layer, const Shape& in) {
  if (const auto* c = std::get_if<Conv2DSpec>(&layer)) {
    const int64_t cin = in[2];
    const int64_t area = c->kernel * c->kernel;
    std::vector<ParamSpec> out{ParamSpec{"weight", Shape{c->filters, cin, c->kernel, c->kernel},
                                         cin * area, c->filters * area}};
    if (c->bias) out.push_back(ParamSpec{"bias", Shape{c->filters}});
    return out;
  }
  if (std::holds_alternative<BatchNorm2DSpec>(layer)) {
    return {ParamSpec{"weight", Shape{in[2]}, 0, 0, 1.0f}, ParamSpec{"bias", Shape{in[2]}}};
  }
  if (const auto* d = std::get_if<DenseSpec>(&layer)) {
    const int64_t features = in[in.rank() - 1];
    std::vector<ParamSpec> out{ParamSpec{"weight", Shape{d->units, features}, features, d->units}};
    if (d->bias) out.push_back(ParamSpec{"bias", Shape{d->units}});
    return out;
  }
  if (const auto* e = std::get_if<EmbeddingSpec>(&layer)) {
    return {ParamSpec{"weight", Shape{e->vocab, e->dim}, e->vocab, e->dim}};
  }
  if (std::holds_alternative<PositionEmbeddingSpec>(layer)) {
    return {ParamSpec{"weight", Shape{in[0], in[1]}, in[0], in[1]}};
  }
  if (std::holds_alternative<LayerNormSpec>(layer)) {
    const int64_t features = in[in.rank() - 1];
    return {ParamSpec{"weight", Shape{features}, 0, 0, 1.0f}, ParamSpec{"bias", Shape{features}}};
  }
  return {};
}

std::vector<ParamSpec> buffer_specs(const LayerSpec& layer, const Shape& in) {
  if (!std::holds_alternative<BatchNorm2DSpec>(layer)) return {};
  // PyTorch keeps num_batches_tracked as an int64 scalar; it is stored here as a float
  // (exact up to 2^24 steps) and converted where the checkpoint meets PyTorch.
  return {ParamSpec{"running_mean", Shape{in[2]}},
          ParamSpec{"running_var", Shape{in[2]}, 0, 0, 1.0f},
          ParamSpec{"num_batches_tracked", Shape{}}};
}

namespace {

// The image positions the windows along one axis visit, counted once per window: padded
// positions are not visited.
int64_t pooled_positions(int64_t in, int64_t out, const MaxPool2DSpec& p) {
  int64_t visited = 0;
  for (int64_t o = 0; o < out; ++o) {
    const int64_t begin = o * p.stride - p.pad;
    visited += std::min(begin + p.pool, in) - std::max<int64_t>(begin, 0);
  }
  return visited;
}

}  // namespace

BackwardReads backward_reads(const LayerSpec& layer) {
  return std::visit(
      [](const auto& spec) -> BackwardReads {
        using T = std::decay_t<decltype(spec)>;
        if constexpr (std::is_same_v<T, ActivationSpec>) {
          // ReLU, tanh and sigmoid take their derivative from the output; GELU from the input.
          const bool gelu = spec.kind == Activation::kGelu;
          return {gelu, !gelu};
        } else if constexpr (std::is_same_v<T, BatchNorm2DSpec> ||
                             std::is_same_v<T, LayerNormSpec> || std::is_same_v<T, Conv2DSpec> ||
                             std::is_same_v<T, DenseSpec> || std::is_same_v<T, EmbeddingSpec>) {
          // Norms normalize their input again with the statistics they saved; the weights'
          // gradients need the input (an embedding's, its token ids). A fused activation's
          // output belongs to the activation layer, which reads it.
          return {true, false};
        } else if constexpr (std::is_same_v<T, MaxPool2DSpec> ||
                             std::is_same_v<T, CausalSelfAttentionSpec>) {
          return {true, true};
        } else {
          // Pass the gradient on, summed, moved, reordered or through a mask of their own
          // (dropout's): no value of the forward. A new layer type must say what it reads.
          static_assert(
              std::is_same_v<T, AddSpec> || std::is_same_v<T, FlattenSpec> ||
                  std::is_same_v<T, GlobalAvgPoolSpec> || std::is_same_v<T, PadShortcutSpec> ||
                  std::is_same_v<T, PositionEmbeddingSpec> || std::is_same_v<T, DropoutSpec>,
              "backward_reads: say what this layer's backward reads");
          return {false, false};
        }
      },
      layer);
}

int64_t forward_flops(const LayerSpec& layer, const Shape& in) {
  const Shape out = output_shape(layer, in);
  return std::visit(
      Overloaded{
          [&](const Conv2DSpec& c) {
            return out.numel() * (2 * c.kernel * c.kernel * in[2] + (c.bias ? 1 : 0));
          },
          [&](const MaxPool2DSpec& p) {
            return pooled_positions(in[0], out[0], p) * pooled_positions(in[1], out[1], p) * in[2];
          },
          [&](const DenseSpec& d) {
            const int64_t features = in[in.rank() - 1];
            return out.numel() / d.units * d.units * (2 * features + (d.bias ? 1 : 0));
          },
          [&](const ActivationSpec&) { return in.numel(); },
          [&](const FlattenSpec&) { return int64_t{0}; },
          [&](const GlobalAvgPoolSpec&) { return in.numel(); },
          // Per element: normalizing and scaling (a subtract, a multiply, a multiply-add: 4)
          // and the batch statistics (a sum and a sum of squares: 2).
          [&](const BatchNorm2DSpec&) { return 6 * in.numel(); },
          [&](const PadShortcutSpec&) { return int64_t{0}; },
          [&](const AddSpec&) { return in.numel(); },
          [&](const EmbeddingSpec&) { return int64_t{0}; },
          [&](const PositionEmbeddingSpec&) { return in.numel(); },
          // Per element: the mean and variance (2), normalizing and scaling (4).
          [&](const LayerNormSpec&) { return 6 * in.numel(); },
          // q·kᵀ and its product with v as full products (2·S·S·D each), the masked half
          // included as PaLM's and nanoGPT's model FLOPs count it (bench/gpt_spec.py), so that
          // a model's FLOP/s compares with published MFU; and the softmax's ~5 operations per
          // score. Both backends skip the keys after a block's last query (cpu_attention.cpp,
          // attention_chunks.h): blocks of B queries execute (S + B)/2S of this count, so an
          // attention layer's profiled GFLOP/s reads 2S/(S + B) times what they execute.
          [&](const CausalSelfAttentionSpec& a) {
            const int64_t s = in[0];
            const int64_t d = in[1] / 3;
            return 4 * s * s * d + 5 * a.heads * s * s;
          },
          [&](const DropoutSpec&) { return in.numel(); },
      },
      layer);
}

int64_t forward_bytes(const LayerSpec& layer, const Shape& in, int64_t batch) {
  const int64_t out = output_shape(layer, in).numel();
  if (std::holds_alternative<EmbeddingSpec>(layer)) {
    return batch * (in.numel() + 2 * out) * static_cast<int64_t>(sizeof(float));
  }
  const int64_t operands = std::holds_alternative<AddSpec>(layer) ? 2 : 1;
  int64_t fixed = 0;
  for (const ParamSpec& p : param_specs(layer, in)) fixed += p.shape.numel();
  for (const ParamSpec& p : buffer_specs(layer, in)) fixed += p.shape.numel();
  return (batch * (operands * in.numel() + out) + fixed) * static_cast<int64_t>(sizeof(float));
}

}  // namespace scalescope
