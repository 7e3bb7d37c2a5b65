// Which activation layers a model runs inside their neighbours' kernels. An activation costs
// a full pass over memory in each direction; fused, the layer before applies it to the
// output it writes anyway (oneDNN's post-ops), and a ReLU's backward (zero the gradient
// where the output is not positive) happens inside the next layer's backward, which
// already reads that output. A fused ReLU gives exactly the unfused values; tanh and sigmoid
// as post-ops agree with their layers to rounding.
#pragma once

#include <vector>

#include "models/kernels.h"
#include "models/zoo.h"

namespace scalescope {

struct LayerFusion {
  // An activation that the previous layer's forward applies (LayerBinding::activation): the
  // model skips its forward, and the previous layer writes straight into its output.
  bool forward_in_producer = false;
  // A ReLU whose backward the next layer's does (LayerBinding::relu_gradient): the model
  // skips its backward, passing the next layer's input gradient straight on.
  bool backward_in_reader = false;
};

// One entry per layer of `def`, as `backend` takes them. Sequential models only (a graph's
// layers may have several readers, and its gradients live in per-layer slots): a graph gets
// no fusions, and neither does any model while fusion is off.
std::vector<LayerFusion> plan_fusions(const ModelDef& def, const KernelBackend& backend);

// Whether models fuse layers (--no-fusion turns it off, to show what it buys). Process-wide,
// true by default; read when a model plans a batch size, like allow_tf32(). Thread-safe.
void set_fuse_layers(bool fuse);
bool fuse_layers();

}  // namespace scalescope
