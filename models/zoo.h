// The model zoo and the model spec syntax `name[:key=value,...]`, parsed in one place.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/shape.h"
#include "models/layer_spec.h"

namespace scalescope {

// A model as data: its layers, its loss and the input it was designed for. Build it for
// another input shape (28×28×1 instead of 32×32×3) by passing that shape to Model.
struct ModelDef {
  std::string name;  // the canonical spec, e.g. "cnn:width=2"
  std::vector<LayerSpec> layers;
  LossKind loss = LossKind::kSoftmaxCrossEntropy;
  Shape default_input;  // one sample, channels last for images
  // The graph of a model that is not a plain sequence (a residual block): inputs[i] lists
  // the earlier layers whose outputs layer i reads (kModelInput for the model's input): two
  // for an AddSpec, one for any other layer. Empty: each layer reads the one before it.
  // Layers stay in an order where every input comes first, and backward runs that order in
  // reverse, so the parameters' reverse-layer layout is still their order of readiness.
  std::vector<std::vector<int>> inputs;
  // The PyTorch module path of each layer ("layer1.0.conv1"), which names its parameters and
  // buffers ("layer1.0.conv1.weight"). Empty: nn.Sequential's indices ("0.weight").
  std::vector<std::string> names;
  // Weights one layer shares with an earlier one (GPT-2's output projection reads the token
  // embedding's table): one tensor in the flat buffers, counted once, its gradient the sum of
  // both layers', named by both in checkpoints (as PyTorch's state_dict names a tied weight).
  struct Tie {
    int layer = 0;   // its first parameter ("weight") is
    int source = 0;  // this earlier layer's first parameter, of the same shape
  };
  std::vector<Tie> ties;
};

constexpr int kModelInput = -1;
// The layers `layer` reads (kModelInput for the model's input), whatever the form of `def`.
std::vector<int> layer_inputs(const ModelDef& def, int layer);
// Whether `layer` reads the model's input, whose gradient nobody takes: its backward is
// always called without an input gradient to write.
bool reads_model_input(const ModelDef& def, int layer);

struct ModelSpec {
  std::string name;
  std::map<std::string, std::string> params;
};

// Parses "cifar-cnn", "cnn:width=2", "mlp:scale=0.5". Throws Error naming the bad part.
ModelSpec parse_model_spec(std::string_view text);
// Builds the definition; throws Error naming an unknown model, key or bad value and listing
// what is accepted.
ModelDef make_model(const ModelSpec& spec);
ModelDef make_model(std::string_view text);
// The spec of `def` with `classes` classes ("resnet:depth=18,classes=10"), for an error to
// name; empty where its family has no `classes` key or cannot take that many.
std::string with_classes(const ModelDef& def, int64_t classes);

struct ZooEntry {
  std::string name;
  std::string description;
  std::string example;  // a spec that builds it, e.g. "cnn:width=2"
};
const std::vector<ZooEntry>& zoo();

// Per-parameter information of a model built for `input` (one sample), in checkpoint order:
// layer by layer, weight before bias. Names are those of PyTorch's nn.Sequential state_dict.
struct ParamInfo {
  std::string name;  // "0.weight"
  int layer = 0;     // index into ModelDef::layers
  ParamSpec spec;
};
// Tied weights (ModelDef::ties) appear once, under the earlier layer's name.
std::vector<ParamInfo> param_infos(const ModelDef& def, const Shape& input);
// The second names of tied weights ("lm_head.weight"), each with the index into param_infos()
// of the tensor it names.
struct ParamAlias {
  std::string name;
  size_t param = 0;
  int layer = 0;  // the layer that reads it under this name
};
std::vector<ParamAlias> param_aliases(const ModelDef& def, const Shape& input);
// The tie of `layer`'s first parameter, or null.
const ModelDef::Tie* tie_of(const ModelDef& def, int layer);
// The buffers (buffer_specs) of every layer, in layer order, named like the parameters
// ("bn1.running_mean").
std::vector<ParamInfo> buffer_infos(const ModelDef& def, const Shape& input);
// Sample shapes after each layer: shapes[0] = input, shapes[i+1] = output of layer i. Throws
// Error when the graph is malformed (an input that is not an earlier layer, an Add of two
// shapes, a layer whose output nothing reads).
std::vector<Shape> layer_shapes(const ModelDef& def, const Shape& input);
// The sample shape layer `layer` reads: shapes[input + 1] of its (first) input.
const Shape& layer_input_shape(const ModelDef& def, const std::vector<Shape>& shapes, int layer);

// The vocabulary of a model that reads token ids (its first layer an embedding), else 0.
int64_t input_vocab(const ModelDef& def);

struct ModelSummary {
  int64_t params = 0;
  int64_t forward_flops = 0;  // per sample
  Shape input;
  Shape output;
};
ModelSummary summarize(const ModelDef& def, const Shape& input);

// One layer of a model built for `input` (one sample), as `scalescope models --layers` lists it.
struct LayerSummary {
  std::string name;           // the module path ("layer1.0.conv1"), or nn.Sequential's index
  std::string layer;          // describe(): "Conv2D(64, 7x7, stride 2, pad 3, no bias)"
  Shape output;               // per sample
  int64_t params = 0;         // its own; a tied weight counts at the earlier layer only
  int64_t forward_flops = 0;  // per sample
  std::string tied_to;        // the earlier layer whose weight it reads as its own, or ""
};
// Every layer in order: their params and FLOPs add up to summarize()'s.
std::vector<LayerSummary> summarize_layers(const ModelDef& def, const Shape& input);

}  // namespace scalescope
