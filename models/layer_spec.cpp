#include "models/layer_spec.h"

#include <fmt/format.h>

#include "core/check.h"
#include "core/enum_names.h"
#include "core/overloaded.h"

namespace scalescope {
namespace {

const char* activation_name(Activation a) {
  static constexpr auto kNames = enum_names<Activation>("ReLU", "Tanh", "Sigmoid");
  return kNames(a).data();
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
      return Shape{};
    case LossKind::kSoftmaxCrossEntropyOneHot:
      return output;
    case LossKind::kBinaryCrossEntropy:
      return output;
  }
  return output;
}

std::string describe(const LayerSpec& layer) {
  return std::visit(
      Overloaded{
          [](const Conv2DSpec& c) {
            return fmt::format("Conv2D({}, {}x{}, stride {}, {})", c.filters, c.kernel, c.kernel,
                               c.stride, c.padding == Padding::kSame ? "same" : "valid");
          },
          [](const MaxPool2DSpec& p) {
            return fmt::format("MaxPool2D({}x{}, stride {})", p.pool, p.pool, p.stride);
          },
          [](const DenseSpec& d) { return fmt::format("Dense({})", d.units); },
          [](const ActivationSpec& a) { return std::string(activation_name(a.kind)); },
          [](const FlattenSpec&) { return std::string("Flatten"); },
          [](const GlobalAvgPoolSpec&) { return std::string("GlobalAveragePool"); },
      },
      layer);
}

std::string torch_module(const LayerSpec& layer) {
  return std::visit(
      Overloaded{
          [](const Conv2DSpec&) { return std::string("Conv2d"); },
          [](const MaxPool2DSpec&) { return std::string("MaxPool2d"); },
          [](const DenseSpec&) { return std::string("Linear"); },
          [](const ActivationSpec& a) { return std::string(activation_name(a.kind)); },
          [](const FlattenSpec&) { return std::string("Flatten"); },
          [](const GlobalAvgPoolSpec&) { return std::string("AdaptiveAvgPool2d+Flatten"); },
      },
      layer);
}

Pads same_padding(int64_t in, int64_t kernel, int64_t stride) {
  const int64_t out = (in + stride - 1) / stride;
  const int64_t total = std::max<int64_t>((out - 1) * stride + kernel - in, 0);
  return Pads{total / 2, total - total / 2};
}

int64_t conv_output_size(int64_t in, int64_t kernel, int64_t stride, Padding padding) {
  if (padding == Padding::kSame) return (in + stride - 1) / stride;
  return in < kernel ? 0 : (in - kernel) / stride + 1;
}

Shape output_shape(const LayerSpec& layer, const Shape& in) {
  return std::visit(
      Overloaded{
          [&](const Conv2DSpec& c) {
            require_image(layer, in);
            SS_CHECK(c.filters > 0 && c.kernel > 0 && c.stride > 0, "{} has a non-positive size",
                     describe(layer));
            const int64_t h = conv_output_size(in[0], c.kernel, c.stride, c.padding);
            const int64_t w = conv_output_size(in[1], c.kernel, c.stride, c.padding);
            SS_CHECK(h > 0 && w > 0,
                     "{} cannot take an input of shape {}: the kernel is larger "
                     "than the image",
                     describe(layer), in.to_string());
            return Shape{h, w, c.filters};
          },
          [&](const MaxPool2DSpec& p) {
            require_image(layer, in);
            SS_CHECK(p.pool > 0 && p.stride > 0, "{} has a non-positive size", describe(layer));
            const int64_t h = conv_output_size(in[0], p.pool, p.stride, Padding::kValid);
            const int64_t w = conv_output_size(in[1], p.pool, p.stride, Padding::kValid);
            SS_CHECK(h > 0 && w > 0,
                     "{} cannot take an input of shape {}: the image is smaller "
                     "than the pool",
                     describe(layer), in.to_string());
            return Shape{h, w, in[2]};
          },
          [&](const DenseSpec& d) {
            SS_CHECK(in.rank() == 1, "{} needs a flat input but gets shape {} (add a Flatten)",
                     describe(layer), in.to_string());
            SS_CHECK(d.units > 0, "{} has no units", describe(layer));
            return Shape{d.units};
          },
          [&](const ActivationSpec&) { return in; },
          [&](const FlattenSpec&) { return Shape{in.numel()}; },
          [&](const GlobalAvgPoolSpec&) {
            require_image(layer, in);
            return Shape{in[2]};
          },
      },
      layer);
}

std::vector<ParamSpec> param_specs(const LayerSpec& layer, const Shape& in) {
  if (const auto* c = std::get_if<Conv2DSpec>(&layer)) {
    const int64_t cin = in[2];
    const int64_t area = c->kernel * c->kernel;
    return {ParamSpec{"weight", Shape{c->filters, cin, c->kernel, c->kernel}, cin * area,
                      c->filters * area},
            ParamSpec{"bias", Shape{c->filters}, 0, 0}};
  }
  if (const auto* d = std::get_if<DenseSpec>(&layer)) {
    return {ParamSpec{"weight", Shape{d->units, in[0]}, in[0], d->units},
            ParamSpec{"bias", Shape{d->units}, 0, 0}};
  }
  return {};
}

int64_t forward_flops(const LayerSpec& layer, const Shape& in) {
  const Shape out = output_shape(layer, in);
  return std::visit(
      Overloaded{
          [&](const Conv2DSpec& c) { return out.numel() * (2 * c.kernel * c.kernel * in[2] + 1); },
          [&](const MaxPool2DSpec& p) { return out.numel() * p.pool * p.pool; },
          [&](const DenseSpec& d) { return d.units * (2 * in[0] + 1); },
          [&](const ActivationSpec&) { return in.numel(); },
          [&](const FlattenSpec&) { return int64_t{0}; },
          [&](const GlobalAvgPoolSpec&) { return in.numel(); },
      },
      layer);
}

}  // namespace scalescope
