// The zoo's families that are graphs rather than sequences, built in files of their own;
// zoo.cpp parses their specs and registers them.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "models/zoo.h"

namespace scalescope {

// Appends layers to a graph, each reading the layer given (by default the last one added).
class GraphBuilder {
 public:
  explicit GraphBuilder(ModelDef& def) : def_(def) {}

  int last() const { return static_cast<int>(def_.layers.size()) - 1; }
  int add(LayerSpec layer, std::string name, std::vector<int> inputs) {
    def_.layers.push_back(std::move(layer));
    def_.names.push_back(std::move(name));
    def_.inputs.push_back(std::move(inputs));
    return last();
  }
  int add(LayerSpec layer, std::string name) {
    return add(std::move(layer), std::move(name), {last()});
  }

 private:
  ModelDef& def_;
};

// The classes of the image families unless their spec's `classes=K` says otherwise (make_model
// sets the output layer's units): CIFAR-10's, and ImageNet's for torchvision's ResNets.
constexpr int64_t kImageClasses = 10;
constexpr int64_t kImageNetClasses = 1000;

// He et al.'s CIFAR ResNet of `depth` = 6n + 2 layers (3 stages of n basic blocks, 16/32/64
// channels, option-A shortcuts) over kImageClasses classes, named as the common PyTorch
// implementation of the paper (conv1, bn1, layer1.0.conv1, ..., linear). Throws Error for a
// depth not of that form.
ModelDef cifar_resnet(const std::string& name, int64_t depth);

// The smallest image an ImageNet ResNet takes: its stem and stages divide the image by 32.
constexpr int64_t kMinImageNetResNetImage = 32;

// torchvision 0.14's ImageNet ResNet of `depth` 18, 34 (BasicBlock), 50, 101 or 152
// (Bottleneck, stride on the 3x3) on image×image×3 over kImageNetClasses classes, with the
// given channels of stages 1-4 (torchvision's 64, 128, 256, 512; the stem has stage 1's).
// Parameters are named and laid out as torchvision's (conv1, bn1, layer1.0.conv1,
// layer2.0.downsample.0, ..., fc).
// Throws Error for another depth or an image under kMinImageNetResNetImage.
ModelDef imagenet_resnet(const std::string& name, int64_t depth, int64_t image,
                         const std::array<int64_t, 4>& stage_planes);

// A GPT-2-style decoder (zoo_gpt.cpp).
struct GptConfig {
  int64_t layers = 0;
  int64_t d = 0;  // the model width
  int64_t heads = 0;
  int64_t seq = 0;  // the context: positions per sample
  int64_t vocab = 0;
  // nanoGPT's dropout after the embeddings and on each residual branch (not on the attention
  // weights, which the attention kernel does not drop); 0: none, no dropout layers at all.
  float dropout = 0.0f;
};
// nanoGPT's GPT with bias (dropout only when config.dropout > 0): token and position embeddings,
// `layers` pre-norm blocks (x + attn(ln_1(x)), then x + mlp(ln_2(x)) with a 4d GELU MLP), ln_f, and
// lm_head tied to the token embedding; next-token cross-entropy over every position. Named as
// nanoGPT (transformer.wte, transformer.h.0.attn.c_attn, ..., lm_head). Throws Error when d is not
// a multiple of heads or a size is not positive.
ModelDef gpt(const std::string& name, const GptConfig& config);

struct GptPreset {
  const char* name;
  GptConfig config;
  const char* description;
};
// micro and mini for CPUs (byte-level vocabularies), GPT-2 small and medium.
const std::vector<GptPreset>& gpt_presets();

}  // namespace scalescope
