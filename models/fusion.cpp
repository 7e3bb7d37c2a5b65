#include "models/fusion.h"

#include <atomic>
#include <variant>

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

std::vector<LayerFusion> plan_fusions(const ModelDef& def, const KernelBackend& backend) {
  std::vector<LayerFusion> fusions(def.layers.size());
  if (!def.inputs.empty() || !fuse_layers()) return fusions;
  for (size_t i = 1; i < def.layers.size(); ++i) {
    const auto* activation = std::get_if<ActivationSpec>(&def.layers[i]);
    if (activation == nullptr) continue;
    fusions[i].forward_in_producer = backend.fuses_activation(def.layers[i - 1], activation->kind);
    fusions[i].backward_in_reader = activation->kind == Activation::kRelu &&
                                    i + 1 < def.layers.size() &&
                                    backend.fuses_relu_gradient(def.layers[i + 1]);
  }
  return fusions;
}

}  // namespace scalescope
