// What a Model holds for one batch size (model.cpp plans it, model_memory.cpp lays out its
// memory): the layers' kernels and the step's tensors. Private to the model's sources.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "core/buffer.h"
#include "core/tensor.h"
#include "models/fusion.h"
#include "models/kernel_math/half_math.h"
#include "models/kernels.h"
#include "models/model.h"

namespace scalescope {

struct Model::Plan {
  int64_t batch = 0;
  // Null for Add layers and for activations fused both ways (LayerFusion::idle).
  std::vector<std::unique_ptr<LayerKernel>> kernels;
  std::vector<LayerFusion> fusions;
  // The kernels' pass-local memory (LayerBinding::transient), counted in kernel_bytes.
  std::shared_ptr<TransientPool> pool;
  // outputs[i]: the output of layer i, in `transient` or (a sequence's that backward reads) in
  // kept_buffers, or, for a layer that applies the next one's activation (fused_into), in that
  // layer's, its own unallocated. A graph's outputs that backward reads are in `transient`
  // from their forward to their last backward (kept_in_arena bytes of it, with the saved
  // copies below).
  std::vector<float*> outputs;
  std::vector<DeviceBuffer> kept_buffers;  // a sequence's kept outputs, or its saved copies
  int64_t kept_in_arena = 0;
  std::vector<int64_t> kept_bytes;  // per layer, what of its output is kept (Memory::kept_by_layer)
  // Where backward finds layer i's output: outputs[i], or in a graph under bf16 and fp16 the
  // slot of the step's arena its restore writes (a fused producer's: its activation's).
  std::vector<float*> restored;
  // The outputs no backward reads in fp32 (all of them under bf16 and fp16), each in here
  // only until its last reader's forward: `outputs` points into it. A graph's activation
  // gradients live in it too (grad_offsets), in the memory of outputs done with.
  Tensor transient;
  // Under bf16 and fp16 (autocast's saved tensors): the outputs some backward reads, in that
  // format, saved[i] layer i's (null where none, and for fused_into layers, whose output is
  // the next layer's). Training's forward writes them; backward restores each into its fp32
  // place in `transient` just before a backward that reads it. A graph's are in `transient`,
  // a sequence's in kept_buffers.
  std::optional<kernel_math::HalfFormat> saved_format;
  std::vector<uint16_t*> saved;
  // Under bf16 and fp16, the layers whose training forward writes saved[i] itself and no fp32
  // output (LayerKernel::forward_into_saved), every reader reading that copy in forward; where
  // the layer applies the next one's activation (fused_into), that one's entry too.
  std::vector<bool> into_saved;
  // Under bf16 and fp16, the layers whose output's gradient is kept only as its 16-bit copy
  // (LayerKernel::reads_half_gradient): its one reader's backward writes it so, in the
  // gradient's place, and the layer's backward reads it so.
  std::vector<bool> half_gradient;
  // Under bf16 and fp16 (with fusion), the Adds whose pass also writes their output's saved
  // copy (add_into's `saved`): the model's save pass skips that output.
  std::vector<bool> saved_by_add;
  // A sequence: ping-pong buffers for activation gradients. A graph: `transient` holds the
  // gradient of each layer's output while it is live (plan_step_arena; summed over its
  // readers: `filled` says whether a reader wrote it yet), and per layer the scratch its
  // backward writes into when a later reader wrote its input's gradient already (null: none),
  // before adding it.
  Tensor grad_a;
  Tensor grad_b;
  std::vector<float*> scratch;
  std::vector<int64_t> grad_offsets;  // graph only: each layer's gradient inside `transient`
  std::vector<bool> filled;
  std::unique_ptr<LossKernel> loss;
  float* dout = nullptr;  // gradient w.r.t. the model output, set by the loss
  // What the kernels allocated as they were made: the device's memory in use before and after;
  // of it, what each layer's own kernel allocated (Memory::kernels_by_layer).
  int64_t kernel_bytes = 0;
  std::vector<int64_t> kernel_bytes_by_layer;

  // A graph: the gradient of layer i's output (the one it holds itself).
  float* gradient(size_t layer) { return transient.data() + grad_offsets[layer]; }
  // Whether layer i applies the next layer's activation, writing that layer's output.
  bool fused_into(size_t layer) const {
    return layer + 1 < fusions.size() && fusions[layer + 1].forward_in_producer;
  }
  // The layer whose output `layer`'s is: its own, or a fused producer's activation's.
  size_t holder(size_t layer) const { return fused_into(layer) ? layer + 1 : layer; }
  // Whether layer i's backward is its activation's too, starting from that one's gradient.
  bool runs_relu_backward(size_t layer) const {
    return layer + 1 < fusions.size() && fusions[layer + 1].backward_in_producer;
  }
  // Graphs: per layer, the Add whose gradient is this layer's too (gradient_aliases), or -1.
  std::vector<int> grad_alias;
  // The buffer that holds the gradient of layer i's output: an Add's where it takes it
  // (grad_alias; its readers add theirs there), else its own.
  float* output_gradient(size_t layer) {
    return gradient(layer < grad_alias.size() && grad_alias[layer] >= 0
                        ? static_cast<size_t>(grad_alias[layer])
                        : layer);
  }
  // The layer whose output gradient `layer`'s backward starts from.
  size_t gradient_holder(size_t layer) const {
    const size_t own = runs_relu_backward(layer) ? layer + 1 : layer;
    return own < grad_alias.size() && grad_alias[own] >= 0 ? static_cast<size_t>(grad_alias[own])
                                                           : own;
  }
};

}  // namespace scalescope
