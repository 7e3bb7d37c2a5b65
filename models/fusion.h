// Which activation layers a model runs inside their neighbours' kernels. An activation costs
// a full pass over memory in each direction; fused, the layer before applies it to the
// output it writes anyway (oneDNN's post-ops), and a ReLU's backward (zero the gradient
// where the output is not positive) happens inside the next layer's backward, which
// already reads that output, or inside the producer's backward, which then starts from the
// ReLU's output gradient (batch norm's loops). A fused ReLU gives exactly the unfused values;
// tanh and sigmoid as post-ops agree with their layers to rounding.
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
  // A ReLU fused into its producer whose backward the producer's does too
  // (LayerBinding::relu_backward): the model skips its backward, and the producer's backward
  // starts from the ReLU's output gradient. Never with backward_in_reader.
  bool backward_in_producer = false;
  // Fused both ways: the layer runs inside its neighbours and needs no kernel.
  bool idle() const { return forward_in_producer && (backward_in_reader || backward_in_producer); }
};

// One entry per layer of `def`, as `backend` takes them; none while fusion is off. In a graph
// (whose layers may have several readers, and whose gradients live in per-layer slots) only
// an activation that reads the layer just before it, read by nothing else, runs in that
// producer, and never in its reader's backward. A ReLU after a graph's add (a ResNet block's
// end) runs in the add both ways on every backend: the model runs the add itself.
std::vector<LayerFusion> plan_fusions(const ModelDef& def, const KernelBackend& backend);

// Whether models fuse layers (--no-fusion turns it off, to show what it buys). Process-wide,
// true by default; read when a model plans a batch size, like allow_tf32(). Thread-safe.
void set_fuse_layers(bool fuse);
bool fuse_layers();

}  // namespace scalescope
