// Float64 reference implementations of the layers, written as plain loops straight from the
// definitions, to check every backend's kernels against. Slow on purpose: clarity first.
//
// Layouts are the ones the kernels use: activations NHWC (images) or [N, features];
// parameters in PyTorch's layout (conv weight OIHW, dense weight [out, in], biases [out]).
#pragma once

#include <vector>

#include "core/shape.h"
#include "models/layer_spec.h"

namespace scalescope {

// The output of `layer` for a batch `input` of shape `in` (batch dimension included).
// `params` are the layer's parameters in param_specs() order. Returns out-shape values,
// where the output shape is output_shape(layer, in.without_batch()).with_batch(in[0]).
// Batch norm is PyTorch's training mode: normalized with the batch's own statistics.
// The layers of GPT-style decoders, called by reference_forward (reference_layer_norm.cpp,
// reference_attention.cpp, reference_embedding.cpp). `in` includes the batch.
std::vector<double> reference_layer_norm(const LayerNormSpec& spec, const Shape& in,
                                         const std::vector<double>& input,
                                         const std::vector<double>& weight,
                                         const std::vector<double>& bias);
std::vector<double> reference_attention(const CausalSelfAttentionSpec& spec, const Shape& in,
                                        const std::vector<double>& input);
std::vector<double> reference_embedding(const EmbeddingSpec& spec, const Shape& in,
                                        const std::vector<double>& input,
                                        const std::vector<double>& weight);
std::vector<double> reference_position_embedding(const Shape& in, const std::vector<double>& input,
                                                 const std::vector<double>& weight);

std::vector<double> reference_forward(const LayerSpec& layer, const Shape& in,
                                      const std::vector<double>& input,
                                      const std::vector<std::vector<double>>& params);

}  // namespace scalescope
