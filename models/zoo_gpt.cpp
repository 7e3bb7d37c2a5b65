// GPT-2-style decoders as model graphs: each block adds its attention and its MLP to a
// residual stream that both read.
#include <fmt/format.h>

#include "core/check.h"
#include "models/zoo_families.h"

namespace scalescope {
namespace {

// A dropout layer when the model has any, seeded by its place in the model.
int maybe_dropout(GraphBuilder& g, const GptConfig& c, const std::string& name) {
  if (c.dropout <= 0.0f) return g.last();
  return g.add(DropoutSpec{c.dropout, static_cast<uint64_t>(g.last() + 1)}, name);
}

// x + c_proj(attention(c_attn(ln_1(x)))), then + mlp.c_proj(gelu(mlp.c_fc(ln_2(·)))).
int decoder_block(GraphBuilder& g, const std::string& prefix, const GptConfig& c) {
  const int x = g.last();
  g.add(LayerNormSpec{}, prefix + ".ln_1");
  g.add(DenseSpec{3 * c.d}, prefix + ".attn.c_attn");
  g.add(CausalSelfAttentionSpec{c.heads}, prefix + ".attn");
  g.add(DenseSpec{c.d}, prefix + ".attn.c_proj");
  const int attn = maybe_dropout(g, c, prefix + ".attn.resid_dropout");
  const int mid = g.add(AddSpec{}, prefix + ".attn_residual", {x, attn});
  g.add(LayerNormSpec{}, prefix + ".ln_2");
  g.add(DenseSpec{4 * c.d}, prefix + ".mlp.c_fc");
  g.add(ActivationSpec{Activation::kGelu}, prefix + ".mlp.gelu");
  g.add(DenseSpec{c.d}, prefix + ".mlp.c_proj");
  const int mlp = maybe_dropout(g, c, prefix + ".mlp.dropout");
  return g.add(AddSpec{}, prefix + ".mlp_residual", {mid, mlp});
}

}  // namespace

ModelDef gpt(const std::string& name, const GptConfig& c) {
  SS_CHECK_INPUT(c.layers > 0 && c.d > 0 && c.heads > 0 && c.seq > 0 && c.vocab > 0,
                 "model '{}': layers, d, heads, seq and vocab must be positive", name);
  SS_CHECK_INPUT(c.dropout >= 0.0f && c.dropout < 1.0f, "model '{}': dropout={} is not in [0, 1)",
                 name, c.dropout);
  SS_CHECK_INPUT(c.d % c.heads == 0, "model '{}': d={} is not a multiple of heads={}", name, c.d,
                 c.heads);
  ModelDef def{name, {}, LossKind::kSoftmaxCrossEntropy, Shape{c.seq}, {}, {}, {}};
  GraphBuilder g(def);
  const int wte = g.add(EmbeddingSpec{c.vocab, c.d}, "transformer.wte", {kModelInput});
  g.add(PositionEmbeddingSpec{}, "transformer.wpe");
  maybe_dropout(g, c, "transformer.drop");
  for (int64_t i = 0; i < c.layers; ++i) decoder_block(g, fmt::format("transformer.h.{}", i), c);
  g.add(LayerNormSpec{}, "transformer.ln_f");
  const int head = g.add(DenseSpec{c.vocab, false}, "lm_head");
  def.ties.push_back(ModelDef::Tie{head, wte});
  return def;
}

const std::vector<GptPreset>& gpt_presets() {
  static const std::vector<GptPreset> presets = {
      {"micro", {2, 128, 4, 64, 256, 0.0f}, "2 layers, d 128, 4 heads, 64 bytes of context"},
      {"mini", {4, 256, 4, 128, 256, 0.0f}, "4 layers, d 256, 4 heads, 128 bytes of context"},
      {"small", {12, 768, 12, 1024, 50257, 0.0f}, "GPT-2 small (124M)"},
      {"medium", {24, 1024, 16, 1024, 50257, 0.0f}, "GPT-2 medium (355M)"},
  };
  return presets;
}

}  // namespace scalescope
