// What a ModelDef implies, from the definition alone: its graph's shapes, the names of its
// parameters and buffers, and its size.
#include <fmt/format.h>

#include <algorithm>

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

// Every tensor of `specs` per layer, named; with `skip_tied`, without the first parameter of
// layers that tie it to an earlier layer's.
std::vector<ParamInfo> named(const ModelDef& def, const Shape& input,
                             std::vector<ParamSpec> (*specs)(const LayerSpec&, const Shape&),
                             bool skip_tied) {
  const std::vector<Shape> shapes = layer_shapes(def, input);
  const std::vector<int> index = sequential_indices(def);
  std::vector<ParamInfo> infos;
  for (size_t i = 0; i < def.layers.size(); ++i) {
    const Shape& in = layer_input_shape(def, shapes, static_cast<int>(i));
    std::vector<ParamSpec> layer_specs = specs(def.layers[i], in);
    const bool tied = skip_tied && tie_of(def, static_cast<int>(i)) != nullptr;
    for (size_t k = tied ? 1 : 0; k < layer_specs.size(); ++k) {
      infos.push_back(
          ParamInfo{fmt::format("{}.{}", module_name(def, i, index[i]), layer_specs[k].suffix),
                    static_cast<int>(i), std::move(layer_specs[k])});
    }
  }
  return infos;
}

// A tie joins the first parameters of two layers, the source earlier, of one shape.
void check_ties(const ModelDef& def, const Shape& input) {
  const std::vector<Shape> shapes = layer_shapes(def, input);
  const auto first_param = [&](int layer) {
    const std::vector<ParamSpec> specs =
        param_specs(def.layers[static_cast<size_t>(layer)], layer_input_shape(def, shapes, layer));
    return specs.empty() ? ParamSpec{} : specs.front();
  };
  const int n = static_cast<int>(def.layers.size());
  for (const ModelDef::Tie& t : def.ties) {
    SS_CHECK(t.source >= 0 && t.source < t.layer && t.layer < n,
             "model '{}': layer {} ties its weight to layer {}, which does not come before it",
             def.name, t.layer, t.source);
    const ParamSpec a = first_param(t.layer);
    const ParamSpec b = first_param(t.source);
    SS_CHECK(!a.suffix.empty() && a.shape == b.shape,
             "model '{}': layer {} ({}) cannot share the weight of layer {} ({}): shapes {} and {}",
             def.name, t.layer, describe(def.layers[static_cast<size_t>(t.layer)]), t.source,
             describe(def.layers[static_cast<size_t>(t.source)]), a.shape.to_string(),
             b.shape.to_string());
  }
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

bool reads_model_input(const ModelDef& def, int layer) {
  const std::vector<int> inputs = layer_inputs(def, layer);
  return std::find(inputs.begin(), inputs.end(), kModelInput) != inputs.end();
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

const ModelDef::Tie* tie_of(const ModelDef& def, int layer) {
  for (const ModelDef::Tie& t : def.ties) {
    if (t.layer == layer) return &t;
  }
  return nullptr;
}

std::vector<ParamInfo> param_infos(const ModelDef& def, const Shape& input) {
  if (!def.ties.empty()) check_ties(def, input);
  return named(def, input, &param_specs, true);
}

std::vector<ParamAlias> param_aliases(const ModelDef& def, const Shape& input) {
  const std::vector<ParamInfo> infos = param_infos(def, input);
  const std::vector<ParamInfo> all = named(def, input, &param_specs, false);
  std::vector<ParamAlias> aliases;
  for (const ModelDef::Tie& t : def.ties) {
    const auto is_first_of = [](int layer) {
      return [layer](const ParamInfo& p) { return p.layer == layer; };
    };
    const auto name = std::find_if(all.begin(), all.end(), is_first_of(t.layer));
    const auto source = std::find_if(infos.begin(), infos.end(), is_first_of(t.source));
    aliases.push_back(ParamAlias{name->name, static_cast<size_t>(source - infos.begin()), t.layer});
  }
  return aliases;
}

std::vector<ParamInfo> buffer_infos(const ModelDef& def, const Shape& input) {
  return named(def, input, &buffer_specs, false);
}

int64_t input_vocab(const ModelDef& def) {
  if (def.layers.empty()) return 0;
  const auto* e = std::get_if<EmbeddingSpec>(&def.layers.front());
  return e == nullptr ? 0 : e->vocab;
}

std::vector<LayerSummary> summarize_layers(const ModelDef& def, const Shape& input) {
  const std::vector<Shape> shapes = layer_shapes(def, input);
  const std::vector<int> index = sequential_indices(def);
  std::vector<LayerSummary> layers;
  for (size_t i = 0; i < def.layers.size(); ++i) {
    const Shape& in = layer_input_shape(def, shapes, static_cast<int>(i));
    const ModelDef::Tie* tie = tie_of(def, static_cast<int>(i));
    const auto source = tie != nullptr ? static_cast<size_t>(tie->source) : 0;
    layers.push_back({.name = module_name(def, i, index[i]),
                      .layer = describe(def.layers[i]),
                      .output = shapes[i + 1],
                      .forward_flops = forward_flops(def.layers[i], in),
                      .tied_to = tie != nullptr ? module_name(def, source, index[source]) : ""});
  }
  for (const ParamInfo& p : param_infos(def, input)) {
    layers[static_cast<size_t>(p.layer)].params += p.spec.shape.numel();
  }
  return layers;
}

ModelSummary summarize(const ModelDef& def, const Shape& input) {
  ModelSummary s;
  s.input = input;
  const std::vector<LayerSummary> layers = summarize_layers(def, input);
  s.output = layers.empty() ? input : layers.back().output;
  for (const LayerSummary& layer : layers) {
    s.params += layer.params;
    s.forward_flops += layer.forward_flops;
  }
  return s;
}

}  // namespace scalescope
