// ResNets as model graphs: a residual block reads its input twice (the convolutions and the
// shortcut), so the layers list their inputs (ModelDef::inputs).
#include <fmt/format.h>

#include "core/check.h"
#include "models/zoo_families.h"

namespace scalescope {
namespace {

// Appends layers to a graph, each reading the layer given (by default the last one added).
class GraphBuilder {
 public:
  explicit GraphBuilder(ModelDef& def) : def_(def) {}

  int last() const { return static_cast<int>(def_.layers.size()) - 1; }
  int add(LayerSpec layer, std::string name, std::vector<int> inputs) {
    def_.layers.push_back(std::move(layer));
    def_.names.push_back(std::move(name));
    def_.inputs.push_back(std::move(inputs));
    return last();
  }
  int add(LayerSpec layer, std::string name) {
    return add(std::move(layer), std::move(name), {last()});
  }

 private:
  ModelDef& def_;
};

Conv2DSpec conv3x3(int64_t filters, int64_t stride) {
  return Conv2DSpec{filters, 3, stride, Padding::kExplicit, 1, false};
}

// relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)), the shortcut the identity or, where
// the block halves the image and doubles the channels, option A (strided, zero channels).
int basic_block(GraphBuilder& g, const std::string& prefix, int64_t in_planes, int64_t planes,
                int64_t stride) {
  const int input = g.last();
  g.add(conv3x3(planes, stride), prefix + ".conv1");
  g.add(BatchNorm2DSpec{}, prefix + ".bn1");
  g.add(ActivationSpec{Activation::kRelu}, prefix + ".relu1");
  g.add(conv3x3(planes, 1), prefix + ".conv2");
  const int main = g.add(BatchNorm2DSpec{}, prefix + ".bn2");
  int shortcut = input;
  if (stride != 1 || in_planes != planes) {
    shortcut = g.add(PadShortcutSpec{stride, planes}, prefix + ".shortcut", {input});
  }
  g.add(AddSpec{}, prefix + ".add", {main, shortcut});
  return g.add(ActivationSpec{Activation::kRelu}, prefix + ".relu2");
}

}  // namespace

ModelDef cifar_resnet(const std::string& name, int64_t depth) {
  SS_CHECK(depth >= 8 && (depth - 2) % 6 == 0,
           "model '{}': depth {} is not 6n+2 with n >= 1 (20, 32, 44, 56, 110, ...)", name, depth);
  const int64_t blocks = (depth - 2) / 6;
  ModelDef def{name, {}, LossKind::kSoftmaxCrossEntropy, Shape{32, 32, 3}, {}, {}};
  GraphBuilder g(def);
  g.add(conv3x3(16, 1), "conv1", {kModelInput});
  g.add(BatchNorm2DSpec{}, "bn1");
  g.add(ActivationSpec{Activation::kRelu}, "relu");
  int64_t in_planes = 16;
  for (int stage = 0; stage < 3; ++stage) {
    const int64_t planes = int64_t{16} << stage;
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t stride = stage > 0 && b == 0 ? 2 : 1;
      basic_block(g, fmt::format("layer{}.{}", stage + 1, b), in_planes, planes, stride);
      in_planes = planes;
    }
  }
  g.add(GlobalAvgPoolSpec{}, "avgpool");
  g.add(DenseSpec{10}, "linear");
  return def;
}

}  // namespace scalescope
