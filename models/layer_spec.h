// Backend-independent description of layers and losses: what a model is, not how a backend
// runs it. Shape inference, parameter shapes and FLOP counts live here so that `models`,
// checkpoints and the sweep can reason about a model without opening a device.
//
// Shapes exclude the batch dimension here. Images are H×W×C (channels last, see shape.h).
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "core/shape.h"

namespace scalescope {

// kSame and kValid are Keras's ("same" pads so out = ceil(in/stride), the odd pixel after);
// kExplicit is PyTorch's padding=p: `pad` zeros on every side.
enum class Padding { kSame, kValid, kExplicit };
// kGelu is GPT-2's GELU, the tanh approximation (PyTorch's approximate="tanh").
enum class Activation { kRelu, kTanh, kSigmoid, kGelu };

struct Conv2DSpec {
  int64_t filters = 0;
  int64_t kernel = 3;  // square kernels
  int64_t stride = 1;
  Padding padding = Padding::kSame;
  int64_t pad = 0;   // kExplicit only
  bool bias = true;  // ResNets' convolutions have none (batch norm follows)
};
struct MaxPool2DSpec {
  int64_t pool = 2;
  int64_t stride = 2;  // Keras default: the pool size
  // PyTorch's padding=p: p implicit -inf on every side (at most pool / 2, as PyTorch
  // requires), out = floor((in + 2p - pool) / stride) + 1. ImageNet ResNets' stem pools 3x3,
  // stride 2, pad 1.
  int64_t pad = 0;
};
// y = x·Wᵀ + b over the last dimension of the input (PyTorch's nn.Linear): a vector, or each
// position of a sequence [S, D].
struct DenseSpec {
  int64_t units = 0;
  bool bias = true;  // GPT's output projection (lm_head) has none
};
struct ActivationSpec {
  Activation kind = Activation::kRelu;
};
struct FlattenSpec {};
struct GlobalAvgPoolSpec {};
// PyTorch's BatchNorm2d over the channels of an image: in training, each batch is normalized
// with its own mean and biased variance, and the running statistics (buffers) move towards
// the batch's (unbiased variance) by `momentum`; in evaluation, the running statistics
// normalize.
struct BatchNorm2DSpec {
  float eps = 1e-5f;
  float momentum = 0.1f;
};
// The parameter-free shortcut of He et al.'s CIFAR ResNets (option A): every `stride`-th
// pixel of each row and column, with zero channels added evenly before and after up to
// `channels`.
struct PadShortcutSpec {
  int64_t stride = 2;
  int64_t channels = 0;
};
// The sum of two earlier layers' outputs of one shape (a residual connection). A node of the
// model graph with two inputs (ModelDef::inputs); the model computes it, not a backend kernel.
struct AddSpec {};
// Token embedding (nn.Embedding): a sequence of S token ids (held as floats, each a whole
// number in [0, vocab)) becomes [S, dim], row id of the weight [vocab, dim] per position.
struct EmbeddingSpec {
  int64_t vocab = 0;
  int64_t dim = 0;
};
// Learned position embedding added to a sequence [S, D]: out[s] = in[s] + weight[s], the
// weight [S, D] (GPT-2's wpe, sized by the sequence the model is built for).
struct PositionEmbeddingSpec {};
// Layer normalization over the last dimension D (nn.LayerNorm(D)): biased variance, eps
// inside the square root, a weight (1) and a bias (0) of D values.
struct LayerNormSpec {
  float eps = 1e-5f;
};
// The core of GPT-2's causal multi-head self-attention, without its projections: the input
// [S, 3D] holds q, k and v side by side per position (c_attn's output, split as nanoGPT's
// q, k, v = x.split(D, dim=2)), each split into `heads` heads of D / heads channels; the
// output [S, D] is softmax(q·kᵀ / sqrt(D / heads), positions after the query masked)·v, the
// heads side by side again (the input of c_proj).
struct CausalSelfAttentionSpec {
  int64_t heads = 1;
};
// Inverted dropout (nn.Dropout) in training; the identity in evaluation. Element i of the k-th
// training forward survives with probability 1 − rate, decided by a hash of (seed, k, i)
// (kernel_math/dropout_math.h), and is scaled by 1 / (1 − rate); backward applies that
// forward's mask. Every replica draws the same masks (as DDP ranks seeded alike).
struct DropoutSpec {
  float rate = 0.0f;
  uint64_t seed = 0;
};

using LayerSpec =
    std::variant<Conv2DSpec, MaxPool2DSpec, DenseSpec, ActivationSpec, FlattenSpec,
                 GlobalAvgPoolSpec, BatchNorm2DSpec, PadShortcutSpec, AddSpec, EmbeddingSpec,
                 PositionEmbeddingSpec, LayerNormSpec, CausalSelfAttentionSpec, DropoutSpec>;

enum class LossKind {
  // logits [N, K], labels [N] holding class indices; or logits [N, S, K] of a sequence,
  // labels [N, S] (next-token prediction), a sample's loss the mean over its S positions
  kSoftmaxCrossEntropy,
  kSoftmaxCrossEntropyOneHot,  // logits [N, K], labels [N, K] one-hot (or soft) targets
  kBinaryCrossEntropy,         // probabilities [N, 1] from a sigmoid, labels [N, 1] in {0, 1}
};

const char* to_string(LossKind kind);
// The label shape (without batch) a loss takes for a model output of `output` shape.
Shape label_shape(LossKind kind, const Shape& output);
// How a loss kernel walks a batch's output (batch included): `rows` of `classes` values, a
// sample's loss the mean of its `positions` rows (1 but for a sequence's logits [N, S, K]).
// Throws Error for an output the loss cannot take.
struct LossRows {
  int64_t rows = 0;
  int64_t classes = 0;
  int64_t positions = 1;
};
LossRows loss_rows(LossKind kind, const Shape& output);

// A learnable tensor of a layer, in PyTorch's layout: conv weights OIHW, dense [out, in].
struct ParamSpec {
  std::string suffix;  // "weight" or "bias"
  Shape shape;
  int64_t fan_in = 0;  // for Glorot initialisation; 0: every value is `fill`
  int64_t fan_out = 0;
  float fill = 0.0f;  // biases 0, batch norm's scale 1, its running variance 1
};

// Human-readable name: "Conv2D(32, 3x3, same)".
std::string describe(const LayerSpec& layer);
// Output shape of `layer` for a sample of shape `in`; throws Error naming the layer and the
// shape it cannot take (a 2-D layer on a vector, a kernel larger than the image...).
Shape output_shape(const LayerSpec& layer, const Shape& in);
std::vector<ParamSpec> param_specs(const LayerSpec& layer, const Shape& in);
// State a layer keeps that is not learned (batch norm's running statistics, PyTorch's
// "buffers"): saved in checkpoints, never all-reduced or updated by the optimizer.
std::vector<ParamSpec> buffer_specs(const LayerSpec& layer, const Shape& in);
// What a layer's backward reads of the values of its forward, on every backend (the layers'
// kernels keep to it, tests/models/backward_reads_test.cpp checks them with the unread one
// overwritten): a graph model keeps an output for backward only where a backward reads it
// (its layer's, or as the input of a reader's), and lets the others share memory once their
// readers' forwards are done, as PyTorch keeps only its saved tensors.
struct BackwardReads {
  bool input = true;
  bool output = true;
};
BackwardReads backward_reads(const LayerSpec& layer);
// Forward FLOPs per sample. A multiply-add counts two; element-wise ops and pooling count one
// per element visited.
int64_t forward_flops(const LayerSpec& layer, const Shape& in);
// The bytes a forward over `batch` samples reads and writes at the least: its input (both of an
// Add's operands), its output and its parameters and buffers once, in fp32; an embedding reads
// only the rows it gathers. What a layer of few FLOPs per byte is bound by.
int64_t forward_bytes(const LayerSpec& layer, const Shape& in, int64_t batch);

// For "same" padding: the padding before and after along one axis (TensorFlow puts the odd
// pixel after).
struct Pads {
  int64_t before = 0;
  int64_t after = 0;
};
Pads same_padding(int64_t in, int64_t kernel, int64_t stride);
// The padding of a convolution along an axis of size `in`, whatever its Padding.
Pads conv_padding(const Conv2DSpec& conv, int64_t in);
int64_t conv_output_size(int64_t in, int64_t kernel, int64_t stride, Padding padding,
                         int64_t pad = 0);

}  // namespace scalescope
