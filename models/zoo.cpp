#include "models/zoo.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>

#include "core/check.h"
#include "core/spelling.h"
#include "models/zoo_families.h"

namespace scalescope {
namespace {

using Params = std::map<std::string, std::string>;

constexpr int64_t kMaxClasses = 1000000;

Conv2DSpec conv(int64_t filters, Padding padding = Padding::kSame) {
  return Conv2DSpec{filters, 3, 1, padding};
}
ActivationSpec relu() {
  return ActivationSpec{Activation::kRelu};
}

double parse_positive(const std::string& model, const std::string& key, const std::string& text) {
  double value = 0.0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  SS_CHECK_INPUT(
      ec == std::errc() && end == text.data() + text.size() && std::isfinite(value) && value > 0.0,
      "model '{}': {}={} is not a positive number", model, key, text);
  return value;
}

int64_t whole_number(const std::string& model, const std::string& key, const std::string& text,
                     int64_t max = 10000, int64_t min = 1) {
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  SS_CHECK_INPUT(
      ec == std::errc() && end == text.data() + text.size() && value >= min && value <= max,
      "model '{}': {}={} is not a whole number in [{}, {}]", model, key, text, min, max);
  return value;
}

// A width scaled by `factor`; at least one unit, and an error when that is not meaningful.
int64_t scaled(const std::string& model, const std::string& key, double factor, int64_t base) {
  const double w = std::round(static_cast<double>(base) * factor);
  SS_CHECK_INPUT(w >= 1.0, "model '{}': {}={} makes a layer of {} units narrower than one", model,
                 key, factor, base);
  SS_CHECK_INPUT(w <= 1e6, "model '{}': {}={} makes a layer of {} units wider than 1,000,000",
                 model, key, factor, base);
  return static_cast<int64_t>(w);
}

void reject_keys(const std::string& model, const Params& params,
                 const std::vector<const char*>& accepted) {
  for (const auto& [key, value] : params) {
    bool ok = false;
    for (const char* a : accepted) ok = ok || key == a;
    if (ok) continue;
    const std::vector<std::string_view> names(accepted.begin(), accepted.end());
    SS_CHECK_INPUT(false, "model '{}' has no parameter '{}'{} ({})", model, key,
                   did_you_mean(key, names),
                   names.empty() ? std::string("it takes none")
                                 : fmt::format("accepted: {}", fmt::join(names, ", ")));
  }
}

double factor(const std::string& model, const Params& params, const char* key) {
  const auto it = params.find(key);
  return it == params.end() ? 1.0 : parse_positive(model, key, it->second);
}

std::string format_factor(double f) {
  return fmt::format("{:g}", f);
}

ModelDef cifar_cnn(const std::string& name, double width) {
  const auto w = [&](int64_t base) { return scaled(name, "width", width, base); };
  return ModelDef{name,
                  {conv(w(32)), relu(), MaxPool2DSpec{}, conv(w(64)), relu(), MaxPool2DSpec{},
                   FlattenSpec{}, DenseSpec{w(64)}, relu(), DenseSpec{kImageClasses}},
                  LossKind::kSoftmaxCrossEntropy,
                  Shape{32, 32, 3},
                  {},
                  {},
                  {}};
}

ModelDef mlp(const std::string& name, double scale) {
  const auto w = [&](int64_t base) { return scaled(name, "scale", scale, base); };
  return ModelDef{name,
                  {DenseSpec{w(4000)}, ActivationSpec{Activation::kTanh}, DenseSpec{w(2000)},
                   relu(), DenseSpec{w(500)}, relu(), DenseSpec{w(300)}, relu(), DenseSpec{1},
                   ActivationSpec{Activation::kSigmoid}},
                  LossKind::kBinaryCrossEntropy,
                  Shape{8000},
                  {},
                  {},
                  {}};
}

// "resnet:depth=D[,image=N][,width=K]"; the name keeps only the keys not at their default.
ModelDef resnet_family(const Params& p) {
  const auto number = [&](const char* key, int64_t fallback) {
    const auto it = p.find(key);
    return it == p.end() ? fallback : whole_number("resnet", key, it->second);
  };
  const int64_t depth = number("depth", 50);
  const int64_t image = number("image", 224);
  const double k = factor("resnet", p, "width");
  std::string name = fmt::format("resnet:depth={}", depth);
  if (image != 224) name += fmt::format(",image={}", image);
  if (k != 1.0) name += ",width=" + format_factor(k);
  std::array<int64_t, 4> planes{};
  for (size_t stage = 0; stage < planes.size(); ++stage) {
    planes[stage] = scaled(name, "width", k, int64_t{64} << stage);
  }
  return imagenet_resnet(name, depth, image, planes);
}

// "gpt:preset=P" or "gpt:layers=L,d=D,heads=H,seq=S,vocab=V", the keys overriding the preset's
// values (micro's without one). The name is the preset's alone when nothing overrides it, else
// every key spelled out.
ModelDef gpt_family(const Params& p) {
  const auto preset_it = p.find("preset");
  const std::string preset = preset_it == p.end() ? "micro" : preset_it->second;
  const GptPreset* base = nullptr;
  std::string names;
  for (const GptPreset& g : gpt_presets()) {
    if (g.name == preset) base = &g;
    names += fmt::format("{}{}", names.empty() ? "" : ", ", g.name);
  }
  SS_CHECK_INPUT(base != nullptr, "model 'gpt': no preset '{}' (presets: {})", preset, names);
  GptConfig c = base->config;
  const auto set = [&](const char* key, int64_t& field, int64_t max, int64_t min = 1) {
    const auto it = p.find(key);
    if (it != p.end()) field = whole_number("gpt", key, it->second, max, min);
  };
  set("layers", c.layers, 1000);
  set("d", c.d, 100000);
  set("heads", c.heads, 1000);
  set("seq", c.seq, 1000000);
  set("vocab", c.vocab, 10000000, 2);  // next-token prediction over one token learns nothing
  const auto dropout_it = p.find("dropout");
  if (dropout_it != p.end()) {
    const double rate =
        dropout_it->second == "0" ? 0.0 : parse_positive("gpt", "dropout", dropout_it->second);
    SS_CHECK_INPUT(rate < 1.0, "model 'gpt': dropout={} is not in [0, 1)", dropout_it->second);
    c.dropout = static_cast<float>(rate);
  }
  const size_t shape_keys =
      p.size() - (preset_it == p.end() ? 0 : 1) - (dropout_it == p.end() ? 0 : 1);
  std::string name = shape_keys > 0 || preset_it == p.end()
                         ? fmt::format("gpt:layers={},d={},heads={},seq={},vocab={}", c.layers, c.d,
                                       c.heads, c.seq, c.vocab)
                         : fmt::format("gpt:preset={}", preset);
  if (c.dropout > 0.0f) name += ",dropout=" + format_factor(c.dropout);
  return gpt(name, c);
}

// A family of the zoo: what its spec may hold and how it is built.
struct Builder {
  ZooEntry entry;
  std::vector<const char*> keys;  // the keys it takes besides classes
  // Its classes when the spec does not say (the last layer's units), which `classes=K`
  // changes, as torchvision's `num_classes`; 0: it takes no such key.
  int64_t classes = 0;
  std::function<ModelDef(const Params&)> build;
};

ModelDef plain(const std::string& name, std::vector<LayerSpec> layers, LossKind loss, Shape input) {
  return ModelDef{name, std::move(layers), loss, std::move(input), {}, {}, {}};
}

const std::vector<Builder>& builders() {
  static const std::vector<Builder> list = {
      {{"cifar-cnn", "Conv32-Pool-Conv64-Pool-Dense64-DenseK on 32x32x3, softmax CE", "cifar-cnn"},
       {},
       kImageClasses,
       [](const Params&) { return cifar_cnn("cifar-cnn", 1.0); }},
      {{"mlp-41m", "Dense 4000 tanh-2000-500-300-1 sigmoid on 8000 features, binary CE", "mlp-41m"},
       {},
       0,
       [](const Params&) { return mlp("mlp-41m", 1.0); }},
      {{"dense-100", "Dense 64 ReLU - Dense 10 on 100 features, one-hot softmax CE", "dense-100"},
       {},
       0,
       [](const Params&) {
         return plain("dense-100", {DenseSpec{64}, relu(), DenseSpec{10}},
                      LossKind::kSoftmaxCrossEntropyOneHot, Shape{100});
       }},
      {{"gap-cnn", "Conv32 valid - GlobalAveragePool - DenseK on 224x224x3, softmax CE", "gap-cnn"},
       {},
       kImageClasses,
       [](const Params&) {
         return plain(
             "gap-cnn",
             {conv(32, Padding::kValid), relu(), GlobalAvgPoolSpec{}, DenseSpec{kImageClasses}},
             LossKind::kSoftmaxCrossEntropy, Shape{224, 224, 3});
       }},
      {{"cnn", "cifar-cnn with every width multiplied by K (size family)", "cnn:width=2"},
       {"width"},
       kImageClasses,
       [](const Params& p) {
         const double k = factor("cnn", p, "width");
         return cifar_cnn("cnn:width=" + format_factor(k), k);
       }},
      {{"cifar-resnet",
        "He et al.'s CIFAR ResNet of depth 6n+2 (3 stages of 16/32/64 channels, batch norm, "
        "option-A shortcuts) on 32x32x3, softmax CE",
        "cifar-resnet:depth=20"},
       {"depth"},
       kImageClasses,
       [](const Params& p) {
         const auto it = p.find("depth");
         const int64_t depth =
             it == p.end() ? 20 : whole_number("cifar-resnet", "depth", it->second);
         return cifar_resnet(fmt::format("cifar-resnet:depth={}", depth), depth);
       }},
      {{"resnet",
        "torchvision's ImageNet ResNet-18/34/50/101/152 on NxNx3 (image=N, default 224), "
        "stage widths times K (width=K), softmax CE",
        "resnet:depth=50"},
       {"depth", "image", "width"},
       kImageNetClasses,
       &resnet_family},
      {{"gpt",
        "GPT-2-style decoder (nanoGPT's names, tied embeddings, next-token CE): "
        "layers=L,d=D,heads=H,seq=S,vocab=V or preset=micro|mini|small|medium, dropout=P",
        "gpt:preset=mini"},
       {"preset", "layers", "d", "heads", "seq", "vocab", "dropout"},
       0,
       &gpt_family},
      {{"mlp", "mlp-41m with every hidden width multiplied by K (size family)", "mlp:scale=0.5"},
       {"scale"},
       0,
       [](const Params& p) {
         const double k = factor("mlp", p, "scale");
         return mlp("mlp:scale=" + format_factor(k), k);
       }},
  };
  return list;
}

const Builder* find_builder(const std::string& name) {
  for (const Builder& b : builders()) {
    if (b.entry.name == name) return &b;
  }
  return nullptr;
}

// The output layer's units made `classes`, and the key in the name unless it is the family's
// default.
void set_classes(ModelDef& def, const Builder& family, int64_t classes) {
  auto* head = def.layers.empty() ? nullptr : std::get_if<DenseSpec>(&def.layers.back());
  SS_CHECK_INPUT(head != nullptr, "model '{}' does not end in a dense layer to give {} classes",
                 def.name, classes);
  head->units = classes;
  if (classes == family.classes) return;
  def.name +=
      fmt::format("{}classes={}", def.name.find(':') == std::string::npos ? ':' : ',', classes);
}

std::vector<std::string_view> model_names() {
  std::vector<std::string_view> names;
  for (const Builder& b : builders()) names.push_back(b.entry.name);
  return names;
}

std::string known_models() {
  return fmt::format("{}", fmt::join(model_names(), ", "));
}

}  // namespace

ModelSpec parse_model_spec(std::string_view text) {
  SS_CHECK_INPUT(!text.empty(), "empty model name (known models: {})", known_models());
  ModelSpec spec;
  const size_t colon = text.find(':');
  spec.name = std::string(text.substr(0, colon));
  SS_CHECK_INPUT(!spec.name.empty(), "model spec '{}' has no name (known models: {})", text,
                 known_models());
  if (colon == std::string_view::npos) return spec;
  std::string_view rest = text.substr(colon + 1);
  SS_CHECK_INPUT(!rest.empty(), "model spec '{}': nothing after ':' (expected key=value)", text);
  while (true) {
    const size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    const size_t eq = item.find('=');
    SS_CHECK_INPUT(eq != std::string_view::npos && eq > 0 && eq + 1 < item.size(),
                   "model spec '{}': '{}' is not of the form key=value", text, item);
    const std::string key(item.substr(0, eq));
    SS_CHECK_INPUT(spec.params.emplace(key, std::string(item.substr(eq + 1))).second,
                   "model spec '{}': key '{}' given twice", text, key);
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  return spec;
}

namespace {

// What an unknown model name most likely meant: a family of depths named as torchvision and
// papers name its members ("resnet50", "cifar-resnet-20") as its spec, or a name a slip away.
std::string model_meant(const std::string& name) {
  const size_t digits = name.find_last_not_of("0123456789") + 1;
  if (digits > 0 && digits < name.size()) {
    std::string family_name = name.substr(0, digits);
    if (family_name.back() == '-' || family_name.back() == '_') family_name.pop_back();
    const Builder* family = find_builder(family_name);
    if (family != nullptr &&
        std::ranges::find(family->keys, std::string_view("depth")) != family->keys.end()) {
      return fmt::format(" (did you mean {}:depth={}?)", family_name, name.substr(digits));
    }
  }
  return did_you_mean(name, model_names());
}

}  // namespace

ModelDef make_model(const ModelSpec& spec) {
  const Builder* family = find_builder(spec.name);
  if (family == nullptr) {
    throw_usage_error(fmt::format("unknown model '{}'{} (known models: {})", spec.name,
                                  model_meant(spec.name), known_models()));
  }
  std::vector<const char*> keys = family->keys;
  if (family->classes > 0) keys.push_back("classes");
  reject_keys(spec.name, spec.params, keys);
  if (family->classes == 0) return family->build(spec.params);
  Params params = spec.params;
  int64_t classes = family->classes;
  if (const auto it = params.find("classes"); it != params.end()) {
    classes = whole_number(spec.name, "classes", it->second, kMaxClasses, 2);
    params.erase(it);
  }
  ModelDef def = family->build(params);
  set_classes(def, *family, classes);
  return def;
}

ModelDef make_model(std::string_view text) {
  return make_model(parse_model_spec(text));
}

std::string with_classes(const ModelDef& def, int64_t classes) {
  ModelSpec spec = parse_model_spec(def.name);
  const Builder* family = find_builder(spec.name);
  if (family == nullptr || family->classes == 0) return {};
  spec.params["classes"] = std::to_string(classes);
  try {
    return make_model(spec).name;
  } catch (const Error&) {
    return {};  // a number of classes the family cannot take
  }
}

const std::vector<ZooEntry>& zoo() {
  static const std::vector<ZooEntry> entries = [] {
    std::vector<ZooEntry> v;
    for (const Builder& b : builders()) {
      v.push_back(b.entry);
      if (b.classes > 0)
        v.back().description += fmt::format(", K classes (classes=K, {} by default)", b.classes);
    }
    return v;
  }();
  return entries;
}

}  // namespace scalescope
