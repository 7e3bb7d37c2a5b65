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
};

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
std::vector<ParamInfo> param_infos(const ModelDef& def, const Shape& input);
// Sample shapes after each layer: shapes[0] = input, shapes[i+1] = output of layer i.
std::vector<Shape> layer_shapes(const ModelDef& def, const Shape& input);

struct ModelSummary {
  int64_t params = 0;
  int64_t forward_flops = 0;  // per sample
  Shape input;
  Shape output;
};
ModelSummary summarize(const ModelDef& def, const Shape& input);

}  // namespace scalescope
