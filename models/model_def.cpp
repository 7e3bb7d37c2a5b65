// What a ModelDef implies, from the definition alone: its graph's shapes, the names of its
// parameters and buffers, and its size.
#include <fmt/format.h>

#include "core/check.h"
#include "models/zoo.h"

namespace scalescope {
namespace {

std::string module_name(const ModelDef& def, size_t layer, int sequential_index) {
  return def.names.empty() ? std::to_string(sequential_index) : def.names[layer];
}

// PyTorch's nn.Sequential index of each layer: GlobalAveragePool is two modules there
// (AdaptiveAvgPool2d(1) and Flatten).
std::vector<int> sequential_indices(const ModelDef& def) {
  std::vector<int> out;
  int index = 0;
  for (const LayerSpec& layer : def.layers) {
    out.push_back(index);
    index += std::holds_alternative<GlobalAvgPoolSpec>(layer) ? 2 : 1;
  }
  return out;
}

std::vector<ParamInfo> named(const ModelDef& def, const Shape& input,
                             std::vector<ParamSpec> (*specs)(const LayerSpec&, const Shape&)) {
  const std::vector<Shape> shapes = layer_shapes(def, input);
  const std::vector<int> index = sequential_indices(def);
  std::vector<ParamInfo> infos;
  for (size_t i = 0; i < def.layers.size(); ++i) {
    const Shape& in = layer_input_shape(def, shapes, static_cast<int>(i));
    for (ParamSpec& p : specs(def.layers[i], in)) {
      infos.push_back(ParamInfo{fmt::format("{}.{}", module_name(def, i, index[i]), p.suffix),
                                static_cast<int>(i), std::move(p)});
    }
  }
  return infos;
}

// Each layer reads earlier layers, as many as it takes.
void check_inputs(const ModelDef& def) {
  const size_t n = def.layers.size();
  SS_CHECK(def.inputs.empty() || def.inputs.size() == n,
           "model '{}': {} layers but {} lists of inputs", def.name, n, def.inputs.size());
  SS_CHECK(def.names.empty() || def.names.size() == n, "model '{}': {} layers but {} names",
           def.name, n, def.names.size());
  for (size_t i = 0; i < n; ++i) {
    const std::vector<int> inputs = layer_inputs(def, static_cast<int>(i));
    const size_t want = std::holds_alternative<AddSpec>(def.layers[i]) ? 2 : 1;
    SS_CHECK(inputs.size() == want, "model '{}': layer {} ({}) takes {} input(s), given {}",
             def.name, i, describe(def.layers[i]), want, inputs.size());
    for (const int from : inputs) {
      SS_CHECK(from >= kModelInput && from < static_cast<int>(i),
               "model '{}': layer {} ({}) reads layer {}, which does not come before it", def.name,
               i, describe(def.layers[i]), from);
    }
  }
}

// Every layer but the last feeds another: a dead branch would get no gradient.
void check_all_read(const ModelDef& def) {
  std::vector<bool> read(def.layers.size(), false);
  for (size_t i = 0; i < def.layers.size(); ++i) {
    for (const int from : layer_inputs(def, static_cast<int>(i))) {
      if (from >= 0) read[static_cast<size_t>(from)] = true;
    }
  }
  for (size_t i = 0; i + 1 < def.layers.size(); ++i) {
    SS_CHECK(read[i], "model '{}': nothing reads the output of layer {} ({})", def.name, i,
             describe(def.layers[i]));
  }
}

}  // namespace

std::vector<int> layer_inputs(const ModelDef& def, int layer) {
  if (def.inputs.empty()) return {layer - 1};
  return def.inputs.at(static_cast<size_t>(layer));
}

const Shape& layer_input_shape(const ModelDef& def, const std::vector<Shape>& shapes, int layer) {
  return shapes.at(static_cast<size_t>(layer_inputs(def, layer).front() + 1));
}

std::vector<Shape> layer_shapes(const ModelDef& def, const Shape& input) {
  check_inputs(def);
  std::vector<Shape> shapes{input};
  for (size_t i = 0; i < def.layers.size(); ++i) {
    const std::vector<int> inputs = layer_inputs(def, static_cast<int>(i));
    const Shape& in = shapes[static_cast<size_t>(inputs.front() + 1)];
    if (inputs.size() == 2) {
      const Shape& other = shapes[static_cast<size_t>(inputs.back() + 1)];
      SS_CHECK(in == other, "model '{}': layer {} adds shapes {} and {}", def.name, i,
               in.to_string(), other.to_string());
    }
    shapes.push_back(output_shape(def.layers[i], in));
  }
  check_all_read(def);
  return shapes;
}

std::vector<ParamInfo> param_infos(const ModelDef& def, const Shape& input) {
  return named(def, input, &param_specs);
}

std::vector<ParamInfo> buffer_infos(const ModelDef& def, const Shape& input) {
  return named(def, input, &buffer_specs);
}

ModelSummary summarize(const ModelDef& def, const Shape& input) {
  const std::vector<Shape> shapes = layer_shapes(def, input);
  ModelSummary s;
  s.input = input;
  s.output = shapes.back();
  for (const ParamInfo& p : param_infos(def, input)) s.params += p.spec.shape.numel();
  for (size_t i = 0; i < def.layers.size(); ++i) {
    s.forward_flops +=
        forward_flops(def.layers[i], layer_input_shape(def, shapes, static_cast<int>(i)));
  }
  return s;
}

}  // namespace scalescope
