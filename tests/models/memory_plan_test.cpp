#include "models/memory_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "models/zoo.h"

namespace scalescope {
namespace {

// The layers whose backward sees the gradient of `layer` live: [layer, its last reader].
std::pair<int, int> span_of(const std::vector<std::vector<int>>& inputs, int layer) {
  int last = layer;
  for (int reader = 0; reader < static_cast<int>(inputs.size()); ++reader) {
    for (int from : inputs[static_cast<size_t>(reader)]) {
      if (from == layer) last = std::max(last, reader);
    }
  }
  return {layer, last};
}

// Per layer of `def`, its output's floats (at its default input) and the layers it reads.
std::pair<std::vector<int64_t>, std::vector<std::vector<int>>> graph_of(const ModelDef& def) {
  const std::vector<Shape> shapes = layer_shapes(def, def.default_input);
  std::vector<int64_t> sizes;
  std::vector<std::vector<int>> inputs;
  for (size_t layer = 0; layer < def.layers.size(); ++layer) {
    sizes.push_back(shapes[layer + 1].numel());
    inputs.push_back(layer_inputs(def, static_cast<int>(layer)));
  }
  return {sizes, inputs};
}

// No two gradients that are live at once share a float, and every offset is aligned.
void expect_disjoint_while_live(const MemoryArena& a, const std::vector<int64_t>& sizes,
                                const std::vector<std::vector<int>>& inputs, int64_t alignment) {
  ASSERT_EQ(a.offsets.size(), sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_EQ(a.offsets[i] % alignment, 0) << "layer " << i;
    EXPECT_LE(a.offsets[i] + sizes[i], a.size) << "layer " << i;
    const auto [fi, li] = span_of(inputs, static_cast<int>(i));
    for (size_t j = i + 1; j < sizes.size(); ++j) {
      const auto [fj, lj] = span_of(inputs, static_cast<int>(j));
      const bool live_together = fi <= lj && fj <= li;
      const bool share =
          a.offsets[i] < a.offsets[j] + sizes[j] && a.offsets[j] < a.offsets[i] + sizes[i];
      EXPECT_FALSE(live_together && share) << "layers " << i << " and " << j;
    }
  }
}

TEST(MemoryArena, AResidualBlockNeedsTheGradientsLiveAtOnceNotOnePerLayer) {
  // 0 reads the input, 1 reads 0, 2 reads 1, 3 = 0 + 2, 4 reads 3. While backward is at
  // layer 2, the gradients of 0 (kept for the add's second path), 1 and 2 are live.
  const std::vector<std::vector<int>> inputs = {{-1}, {0}, {1}, {0, 2}, {3}};
  const std::vector<int64_t> sizes(5, 100);
  const MemoryArena a = plan_gradient_arena(sizes, inputs, {}, 1);
  expect_disjoint_while_live(a, sizes, inputs, 1);
  EXPECT_EQ(a.size, 300);
  EXPECT_EQ(a.offsets, (std::vector<int64_t>{0, 100, 200, 100, 0}));
  // Layer 0 has two readers: the earlier, whose backward runs second, needs a scratch of its
  // size, at its own backward (2·5 − 1); the add writes its inputs' gradients itself.
  const ArenaTensors scratch = second_reader_scratch({100, 20, 30, 100, 500}, inputs);
  EXPECT_EQ(scratch.sizes, (std::vector<int64_t>{0, 100, 0, 0, 0}));
  EXPECT_EQ(scratch.spans[1].first, 9);
  EXPECT_EQ(scratch.spans[1].last, 9);
  EXPECT_EQ(second_reader_scratch({1, 2, 3, 4}, {{-1}, {0}, {1}, {2}}).sizes,
            (std::vector<int64_t>(4, 0)));
}

TEST(MemoryArena, AGradientIsReusedOnlyAfterItsLayersBackward) {
  // A plain chain: each gradient lives from its reader's backward to its own, so two buffers
  // alternate; with alignment 64 the second starts at 64.
  const std::vector<std::vector<int>> inputs = {{-1}, {0}, {1}, {2}};
  const std::vector<int64_t> sizes = {10, 30, 20, 40};
  const MemoryArena a = plan_gradient_arena(sizes, inputs);
  expect_disjoint_while_live(a, sizes, inputs, 64);
  EXPECT_EQ(a.size, 64 + 20);  // 40 and 30 at 0 (never live together), 20 and 10 at 64
}

// A ReLU (layer 2) whose backward its producer (layer 1) runs: the ReLU's gradient is read at
// layer 1, so it must not share memory with layer 0's, written there; layer 1's is never
// written and takes none. Without the fusion, layer 2's gradient and layer 0's shared offset 0.
TEST(MemoryArena, AGradientReadByAFusedProducerLivesUntilItsBackward) {
  const std::vector<std::vector<int>> inputs = {{-1}, {0}, {1}, {2}};
  const std::vector<int64_t> sizes(4, 100);
  const MemoryArena plain = plan_gradient_arena(sizes, inputs, {}, 1);
  EXPECT_EQ(plain.offsets[2], plain.offsets[0]);
  const MemoryArena fused = plan_gradient_arena(sizes, inputs, {false, false, true, false}, 1);
  EXPECT_EQ(fused.size, 200);
  EXPECT_NE(fused.offsets[2], fused.offsets[0]);
  EXPECT_NE(fused.offsets[2], fused.offsets[3]);
  EXPECT_ANY_THROW(plan_gradient_arena(sizes, inputs, {false, true}));
}

// An Add passes its gradient on unchanged: an input it alone reads (a GPT block's projections)
// has the Add's gradient, not a copy of it; so does one it reads after a layer norm (the
// residual stream), whose backward then adds its own into that buffer; an Add with a fused
// ReLU (a ResNet block's) changes the gradient and shares it with nobody.
TEST(MemoryArena, AnInputOnlyItsAddReadsHasTheAddsGradient) {
  // 0 the stream, 1 = ln(0), 2 = proj(1), 3 = 0 + 2, 4 = ln(3), 5 = proj(4), 6 = 3 + 5, 7 =
  // head(6): the whole stream's gradient in 6's buffer, which ln 4's backward (after 5 read
  // it) and ln 1's (after 2 read it) add to.
  const std::vector<std::vector<int>> block = {{-1}, {0}, {1}, {0, 2}, {3}, {4}, {3, 5}, {6}};
  std::vector<bool> adds(8, false);
  adds[3] = adds[6] = true;
  EXPECT_EQ(gradient_aliases(block, adds), (std::vector<int>{6, -1, 6, 6, -1, 6, -1, -1}));
  // x + f(x) with f one layer: f's backward would read the buffer it adds x's gradient to, so
  // x keeps its own (0 = x, 1 = f(0), 2 = 0 + 1, 3 = g(2), 4 = h(2), 5 = 3 + 4).
  const std::vector<std::vector<int>> direct = {{-1}, {0}, {0, 1}, {2}, {2}, {3, 4}};
  EXPECT_EQ(gradient_aliases(direct, {false, false, true, false, false, true}),
            (std::vector<int>{-1, 2, -1, 5, 5, -1}));
  // Two inputs of one Add that both reach its buffer, one read elsewhere too: 0 = m, 1 = q, 2 =
  // p, 3 = 0 + 1, 4 = r(2), 5 = 3 + 2, 6 = relu(5 + 4). r's gradient would reach m and q
  // through the shared buffer (their backwards run after r's), so p keeps its own.
  const std::vector<std::vector<int>> siblings = {{-1}, {-1}, {-1}, {0, 1}, {2}, {3, 2}, {5, 4}};
  EXPECT_EQ(gradient_aliases(siblings, {false, false, false, true, false, true, false}),
            (std::vector<int>{5, 5, -1, 5, -1, -1, -1}));
  EXPECT_EQ(gradient_aliases(block, std::vector<bool>(8, false)), std::vector<int>(8, -1));
  // Chains resolve to the last Add: 2 = 0 + 1, 4 = 2 + 3 (each input read once).
  const std::vector<std::vector<int>> chain = {{-1}, {-1}, {0, 1}, {-1}, {2, 3}, {4}};
  EXPECT_EQ(gradient_aliases(chain, {false, false, true, false, true, false}),
            (std::vector<int>{4, 4, 4, 4, -1, -1}));
  // x + x: two reads of one input, which gets the sum of both.
  EXPECT_EQ(gradient_aliases({{-1}, {0, 0}}, {false, true}), (std::vector<int>{-1, -1}));

  // In the arena, an aliased gradient takes nothing, and its holder's lives until the aliased
  // layer's backward: layer 1's gradient, which layer 2's backward writes while it reads layer
  // 3's (6's buffer), must not share memory with it.
  const std::vector<int64_t> sizes(8, 100);
  const std::vector<int> aliases = gradient_aliases(block, adds);
  const MemoryArena plain = plan_gradient_arena(sizes, block, {}, 1);
  const MemoryArena shared = plan_gradient_arena(sizes, block, {}, 1, aliases);
  EXPECT_EQ(plain.offsets[1], plain.offsets[3]);  // without the alias 3 is dead by then
  EXPECT_NE(shared.offsets[1], shared.offsets[6]);
  EXPECT_NE(shared.offsets[4], shared.offsets[6]);
  EXPECT_LE(shared.size, plain.size);
  EXPECT_ANY_THROW(plan_gradient_arena(sizes, block, {}, 1, {-1, -1, 1, -1, -1, -1, -1, -1}));
}

// The step's one arena, a chain of 3 layers (L = 3: forward at 0..2, the loss at 3, backward
// over layer i at 6 − i). The outputs are done before backward starts, so the gradients take
// their memory: one arena of 300 floats (greedy, largest first) where the forward's and the
// gradients' apart take 200 each.
TEST(StepArena, GradientsReuseTheMemoryOfOutputsDoneWith) {
  const std::vector<std::vector<int>> inputs = {{-1}, {0}, {1}};
  const std::vector<int64_t> sizes = {100, 100, 100};
  const ArenaTensors g = gradient_tensors(sizes, inputs);
  const std::vector<LiveSpan> outputs = {{0, 1}, {1, 2}, {2, 3}};  // the model's to the loss
  const MemoryArena a = plan_step_arena(sizes, outputs, g, 1);
  ASSERT_EQ(a.offsets.size(), 6u);
  EXPECT_EQ(a.size, 300);
  EXPECT_EQ(plan_arena(sizes, outputs, 1).size + plan_gradient_arena(sizes, inputs, {}, 1).size,
            400);
  // At the loss (time 3) the model's output and its gradient, which the loss writes as it
  // reads the output, are both live: apart.
  EXPECT_NE(a.offsets[2], a.offsets[5]);
  // Layer 1's gradient (written at 4, read at 5) and layer 2's (3 to 4) meet at 4.
  EXPECT_NE(a.offsets[4], a.offsets[5]);
}

// A restored output's slot lives at the backwards that restore it (here time 5, layer 1's
// backward restoring its input, layer 0's output), and no gradient live then shares it.
TEST(StepArena, ARestoreSlotStaysApartFromTheGradientsLiveThen) {
  const std::vector<std::vector<int>> inputs = {{-1}, {0}, {1}};
  const std::vector<int64_t> sizes = {100, 100, 100};
  const ArenaTensors g = gradient_tensors(sizes, inputs);
  const std::vector<int64_t> step = {100, 100, 100, 100};
  const std::vector<LiveSpan> spans = {{0, 1}, {1, 2}, {2, 3}, {5, 5}};
  const MemoryArena a = plan_step_arena(step, spans, g, 1);
  ASSERT_EQ(a.offsets.size(), 7u);
  const auto meet = [&](size_t i, size_t j) {
    return a.offsets[i] < a.offsets[j] + 100 && a.offsets[j] < a.offsets[i] + 100;
  };
  EXPECT_FALSE(meet(3, 4 + 0));  // layer 0's gradient, written at 5 by layer 1's backward
  EXPECT_FALSE(meet(3, 4 + 1));  // layer 1's, read at 5
  EXPECT_EQ(a.size, 300);
  EXPECT_ANY_THROW(plan_step_arena(step, {{0, 1}}, g, 1));
}

// The zoo's graphs: one arena for outputs and gradients is smaller than the two apart.
TEST(StepArena, TheZoosGraphsNeedLessThanTwoArenas) {
  for (const std::string spec : {"resnet:depth=50", "cifar-resnet:depth=20"}) {
    SCOPED_TRACE(spec);
    const ModelDef def = make_model(spec);
    const auto [sizes, inputs] = graph_of(def);
    std::vector<LiveSpan> spans = reader_spans(inputs);
    spans.back().last = static_cast<int>(sizes.size());
    const int64_t apart = plan_arena(sizes, spans).size + plan_gradient_arena(sizes, inputs).size;
    const MemoryArena one = plan_step_arena(sizes, spans, gradient_tensors(sizes, inputs));
    EXPECT_LT(one.size * 10, apart * 7) << one.size << " against " << apart;
  }
}

TEST(MemoryArena, RefusesAReaderBeforeWhatItReads) {
  EXPECT_ANY_THROW(plan_gradient_arena({1, 1}, {{1}, {-1}}));
  EXPECT_ANY_THROW(plan_gradient_arena({1}, {{-1}, {0}}));
}

// The zoo's graphs: the arena holds a handful of gradients, where the plan before kept one per
// layer for the whole of backward (ResNet-50 at 64 per GPU: 20.4 GB peak on an H200, PyTorch
// 10.9 GB).
TEST(MemoryArena, TheZoosGraphsKeepAFewGradientsLive) {
  for (const std::string spec : {"resnet:depth=50", "cifar-resnet:depth=20", "gpt:preset=small"}) {
    SCOPED_TRACE(spec);
    const ModelDef def = make_model(spec);
    ASSERT_FALSE(def.inputs.empty());
    const auto [sizes, inputs] = graph_of(def);
    const MemoryArena a = plan_gradient_arena(sizes, inputs);
    expect_disjoint_while_live(a, sizes, inputs, 64);
    int64_t sum = 0;
    for (int64_t s : sizes) sum += s;
    const int64_t largest = *std::max_element(sizes.begin(), sizes.end());
    // Seen: ResNet-50's arena 3.0 times its largest gradient and 15.6 times less than the sum
    // of all; GPT-2 small's 1.01 times its largest (the logits', 51.5 million floats).
    EXPECT_LE(a.size, 4 * (largest + 64)) << "sum of all " << sum;
    // The scratch is the residual stream's size, not the largest output's: in a ResNet the
    // largest output is a block's, read by the next block and its shortcut; in a GPT it is
    // the logits.
    const std::vector<int64_t> scratches = second_reader_scratch(sizes, inputs).sizes;
    const int64_t scratch = *std::max_element(scratches.begin(), scratches.end());
    EXPECT_LE(scratch, largest);
    if (spec.rfind("gpt", 0) == 0) {
      EXPECT_LT(scratch * 50, largest);  // 768 against 50,257 values per position
    } else {
      EXPECT_LT(a.size * 5, sum);
    }
  }
}

}  // namespace
}  // namespace scalescope
