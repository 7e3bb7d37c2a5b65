// ResNets as model graphs: a residual block reads its input twice (the convolutions and the
// shortcut), so the layers list their inputs (ModelDef::inputs).
#include <fmt/format.h>

#include <array>

#include "core/check.h"
#include "models/zoo_families.h"

namespace scalescope {
namespace {

Conv2DSpec conv3x3(int64_t filters, int64_t stride) {
  return Conv2DSpec{filters, 3, stride, Padding::kExplicit, 1, false};
}

Conv2DSpec conv1x1(int64_t filters, int64_t stride) {
  return Conv2DSpec{filters, 1, stride, Padding::kExplicit, 0, false};
}

// Where a block changes the image size or the channels, its shortcut is He et al.'s option A
// on CIFAR (strided, zero channels) or torchvision's `downsample` (a strided 1x1 convolution
// and batch norm); elsewhere the identity.
enum class Shortcut { kOptionA, kDownsample };

// Returns the layer the block's Add reads beside its main path.
int shortcut_of(GraphBuilder& g, Shortcut kind, const std::string& prefix, int input,
                int64_t in_planes, int64_t out_planes, int64_t stride) {
  if (stride == 1 && in_planes == out_planes) return input;
  if (kind == Shortcut::kOptionA) {
    return g.add(PadShortcutSpec{stride, out_planes}, prefix + ".shortcut", {input});
  }
  g.add(conv1x1(out_planes, stride), prefix + ".downsample.0", {input});
  return g.add(BatchNorm2DSpec{}, prefix + ".downsample.1");
}

// relu(main + shortcut): the end of every block.
int residual_end(GraphBuilder& g, const std::string& prefix, int main, int shortcut,
                 const std::string& relu) {
  g.add(AddSpec{}, prefix + ".add", {main, shortcut});
  return g.add(ActivationSpec{Activation::kRelu}, prefix + "." + relu);
}

// relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)), the first convolution strided: the
// block of the CIFAR ResNets and of torchvision's ResNet-18/34.
int basic_block(GraphBuilder& g, Shortcut kind, const std::string& prefix, int64_t in_planes,
                int64_t planes, int64_t stride) {
  const int input = g.last();
  g.add(conv3x3(planes, stride), prefix + ".conv1");
  g.add(BatchNorm2DSpec{}, prefix + ".bn1");
  g.add(ActivationSpec{Activation::kRelu}, prefix + ".relu1");
  g.add(conv3x3(planes, 1), prefix + ".conv2");
  const int main = g.add(BatchNorm2DSpec{}, prefix + ".bn2");
  return residual_end(g, prefix, main,
                      shortcut_of(g, kind, prefix, input, in_planes, planes, stride), "relu2");
}

// torchvision's Bottleneck (ResNet-50/101/152): 1x1 down to `planes`, 3x3, 1x1 up to
// 4·planes. The stride is on the 3x3 convolution, as torchvision has it ("ResNet v1.5"; the
// paper strides the first 1x1).
int bottleneck_block(GraphBuilder& g, const std::string& prefix, int64_t in_planes, int64_t planes,
                     int64_t stride) {
  const int input = g.last();
  g.add(conv1x1(planes, 1), prefix + ".conv1");
  g.add(BatchNorm2DSpec{}, prefix + ".bn1");
  g.add(ActivationSpec{Activation::kRelu}, prefix + ".relu1");
  g.add(conv3x3(planes, stride), prefix + ".conv2");
  g.add(BatchNorm2DSpec{}, prefix + ".bn2");
  g.add(ActivationSpec{Activation::kRelu}, prefix + ".relu2");
  g.add(conv1x1(4 * planes, 1), prefix + ".conv3");
  const int main = g.add(BatchNorm2DSpec{}, prefix + ".bn3");
  return residual_end(
      g, prefix, main,
      shortcut_of(g, Shortcut::kDownsample, prefix, input, in_planes, 4 * planes, stride), "relu3");
}

struct ImageNetDepth {
  int64_t depth;
  bool bottleneck;
  int64_t blocks[4];  // per stage
};
constexpr ImageNetDepth kImageNetDepths[] = {
    {18, false, {2, 2, 2, 2}},  {34, false, {3, 4, 6, 3}},  {50, true, {3, 4, 6, 3}},
    {101, true, {3, 4, 23, 3}}, {152, true, {3, 8, 36, 3}},
};

const ImageNetDepth& imagenet_depth(const std::string& name, int64_t depth) {
  for (const ImageNetDepth& d : kImageNetDepths) {
    if (d.depth == depth) return d;
  }
  throw_usage_error(fmt::format(
      "model '{}': depth {} is not one of torchvision's 18, 34, 50, 101, 152", name, depth));
}

}  // namespace

ModelDef imagenet_resnet(const std::string& name, int64_t depth, int64_t image,
                         const std::array<int64_t, 4>& stage_planes) {
  const ImageNetDepth& d = imagenet_depth(name, depth);
  // The stem and stages 2-4 halve the image five times (padding rounds up): below 32 pixels
  // the last stages would run on 1x1 images made mostly of padding, which no ImageNet ResNet
  // is meant for.
  SS_CHECK_INPUT(
      image >= kMinImageNetResNetImage,
      "model '{}': image={} is too small for the stem and 4 stages, which divide it by 32 "
      "(at least {})",
      name, image, kMinImageNetResNetImage);
  ModelDef def{name, {}, LossKind::kSoftmaxCrossEntropy, Shape{image, image, 3}, {}, {}, {}};
  GraphBuilder g(def);
  g.add(Conv2DSpec{stage_planes[0], 7, 2, Padding::kExplicit, 3, false}, "conv1", {kModelInput});
  g.add(BatchNorm2DSpec{}, "bn1");
  g.add(ActivationSpec{Activation::kRelu}, "relu");
  g.add(MaxPool2DSpec{3, 2, 1}, "maxpool");
  int64_t in_planes = stage_planes[0];
  for (size_t stage = 0; stage < 4; ++stage) {
    const int64_t planes = stage_planes[stage];
    for (int64_t b = 0; b < d.blocks[stage]; ++b) {
      const int64_t stride = stage > 0 && b == 0 ? 2 : 1;
      const std::string prefix = fmt::format("layer{}.{}", stage + 1, b);
      if (d.bottleneck) {
        bottleneck_block(g, prefix, in_planes, planes, stride);
        in_planes = 4 * planes;
      } else {
        basic_block(g, Shortcut::kDownsample, prefix, in_planes, planes, stride);
        in_planes = planes;
      }
    }
  }
  g.add(GlobalAvgPoolSpec{}, "avgpool");
  g.add(DenseSpec{kImageNetClasses}, "fc");
  return def;
}

ModelDef cifar_resnet(const std::string& name, int64_t depth) {
  SS_CHECK_INPUT(depth >= 8 && (depth - 2) % 6 == 0,
                 "model '{}': depth {} is not 6n+2 with n >= 1 (20, 32, 44, 56, 110, ...)", name,
                 depth);
  const int64_t blocks = (depth - 2) / 6;
  ModelDef def{name, {}, LossKind::kSoftmaxCrossEntropy, Shape{32, 32, 3}, {}, {}, {}};
  GraphBuilder g(def);
  g.add(conv3x3(16, 1), "conv1", {kModelInput});
  g.add(BatchNorm2DSpec{}, "bn1");
  g.add(ActivationSpec{Activation::kRelu}, "relu");
  int64_t in_planes = 16;
  for (int stage = 0; stage < 3; ++stage) {
    const int64_t planes = int64_t{16} << stage;
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t stride = stage > 0 && b == 0 ? 2 : 1;
      basic_block(g, Shortcut::kOptionA, fmt::format("layer{}.{}", stage + 1, b), in_planes, planes,
                  stride);
      in_planes = planes;
    }
  }
  g.add(GlobalAvgPoolSpec{}, "avgpool");
  g.add(DenseSpec{kImageClasses}, "linear");
  return def;
}

}  // namespace scalescope
