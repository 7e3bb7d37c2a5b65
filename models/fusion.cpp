#include "models/fusion.h"

#include <atomic>
#include <variant>
#include <vector>

namespace scalescope {
namespace {

std::atomic<bool>& fuse_flag() {
  static std::atomic<bool> fuse{true};
  return fuse;
}

}  // namespace

void set_fuse_layers(bool fuse) {
  fuse_flag().store(fuse, std::memory_order_relaxed);
}

bool fuse_layers() {
  return fuse_flag().load(std::memory_order_relaxed);
}

namespace {

// Per layer of a graph, how many layers read its output.
std::vector<int> reader_counts(const ModelDef& def) {
  std::vector<int> readers(def.layers.size(), 0);
  for (size_t layer = 0; layer < def.layers.size(); ++layer) {
    for (const int from : layer_inputs(def, static_cast<int>(layer))) {
      if (from >= 0) ++readers[static_cast<size_t>(from)];
    }
  }
  return readers;
}

}  // namespace

std::vector<LayerFusion> plan_fusions(const ModelDef& def, const KernelBackend& backend) {
  std::vector<LayerFusion> fusions(def.layers.size());
  if (!fuse_layers()) return fusions;
  const bool graph = !def.inputs.empty();
  const std::vector<int> readers = reader_counts(def);
  for (size_t i = 1; i < def.layers.size(); ++i) {
    const auto* activation = std::get_if<ActivationSpec>(&def.layers[i]);
    if (activation == nullptr) continue;
    const LayerSpec& producer = def.layers[i - 1];
    // In a graph the producer's output must be this activation's input and nothing else's.
    if (graph &&
        (layer_inputs(def, static_cast<int>(i)) != std::vector<int>{static_cast<int>(i) - 1} ||
         readers[i - 1] != 1)) {
      continue;
    }
    LayerFusion& f = fusions[i];
    const bool relu = activation->kind == Activation::kRelu;
    // A graph's add has no kernel: the model runs it, and the ReLU after it both ways, through
    // add_into and accumulate_relu_gradient_into, which every backend has.
    if (std::holds_alternative<AddSpec>(producer)) {
      f.forward_in_producer = f.backward_in_producer = relu;
      continue;
    }
    f.forward_in_producer = backend.fuses_activation(producer, activation->kind);
    f.backward_in_reader = !graph && relu && i + 1 < def.layers.size() &&
                           backend.fuses_relu_gradient(def.layers[i + 1]);
    f.backward_in_producer = relu && f.forward_in_producer && !f.backward_in_reader &&
                             backend.fuses_relu_backward(producer);
  }
  return fusions;
}

}  // namespace scalescope
