#include "models/memory_plan.h"

#include <algorithm>
#include <atomic>
#include <numeric>
#include <utility>

#include "core/check.h"
#include "models/layer_spec.h"

namespace scalescope {
namespace {

int64_t aligned(int64_t floats, int64_t alignment) {
  return (floats + alignment - 1) / alignment * alignment;
}

std::atomic<bool> g_arena_sharing{true};

}  // namespace

void set_arena_sharing(bool share) {
  g_arena_sharing.store(share);
}

bool arena_sharing() {
  return g_arena_sharing.load();
}

MemoryArena plan_arena(const std::vector<int64_t>& sizes, const std::vector<LiveSpan>& spans,
                       int64_t alignment) {
  SS_CHECK(sizes.size() == spans.size(), "{} tensor sizes for {} spans", sizes.size(),
           spans.size());
  SS_CHECK(alignment > 0, "alignment {} must be positive", alignment);
  std::vector<size_t> order(sizes.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return sizes[a] > sizes[b]; });
  const bool share = arena_sharing();
  MemoryArena arena;
  arena.offsets.assign(sizes.size(), 0);
  std::vector<size_t> placed;
  for (const size_t t : order) {
    if (sizes[t] == 0) continue;
    // The ranges of the placed tensors live at the same time as t, by offset.
    std::vector<std::pair<int64_t, int64_t>> taken;
    for (const size_t p : placed) {
      if (!share || spans[p].meets(spans[t])) {
        taken.emplace_back(arena.offsets[p], arena.offsets[p] + sizes[p]);
      }
    }
    std::sort(taken.begin(), taken.end());
    int64_t offset = 0;
    for (const auto& [begin, end] : taken) {
      if (offset + sizes[t] <= begin) break;
      offset = std::max(offset, aligned(end, alignment));
    }
    arena.offsets[t] = offset;
    arena.size = std::max(arena.size, offset + sizes[t]);
    placed.push_back(t);
  }
  return arena;
}

std::vector<LiveSpan> reader_spans(const std::vector<std::vector<int>>& inputs) {
  const int layers = static_cast<int>(inputs.size());
  std::vector<LiveSpan> spans(inputs.size());
  for (int i = 0; i < layers; ++i) spans[static_cast<size_t>(i)] = {i, i};
  for (int reader = 0; reader < layers; ++reader) {
    for (const int from : inputs[static_cast<size_t>(reader)]) {
      if (from < 0) continue;
      SS_CHECK(from < reader, "layer {} reads layer {}, which does not come before it", reader,
               from);
      LiveSpan& s = spans[static_cast<size_t>(from)];
      s.last = std::max(s.last, reader);
    }
  }
  return spans;
}

std::vector<int> gradient_aliases(const std::vector<std::vector<int>>& inputs,
                                  const std::vector<bool>& passes_unchanged) {
  const size_t layers = inputs.size();
  SS_CHECK(passes_unchanged.size() == layers, "{} flags for {} layers", passes_unchanged.size(),
           layers);
  std::vector<int> readers(layers, 0);
  for (const std::vector<int>& from : inputs) {
    for (const int layer : from) {
      if (layer >= 0) ++readers.at(static_cast<size_t>(layer));
    }
  }
  std::vector<int> alias(layers, -1);
  for (size_t reader = 0; reader < layers; ++reader) {
    if (!passes_unchanged[reader]) continue;
    for (const int from : inputs[reader]) {
      if (from >= 0 && readers[static_cast<size_t>(from)] == 1)
        alias[static_cast<size_t>(from)] = static_cast<int>(reader);
    }
  }
  // Last to first: an Add's own alias is resolved before its inputs take it.
  for (size_t layer = layers; layer-- > 0;) {
    const int to = alias[layer];
    if (to >= 0 && alias[static_cast<size_t>(to)] >= 0)
      alias[layer] = alias[static_cast<size_t>(to)];
  }
  return alias;
}

ArenaTensors gradient_tensors(const std::vector<int64_t>& sizes,
                              const std::vector<std::vector<int>>& inputs,
                              const std::vector<bool>& in_producer,
                              const std::vector<int>& aliases) {
  SS_CHECK(sizes.size() == inputs.size(), "{} gradient sizes for {} layers", sizes.size(),
           inputs.size());
  SS_CHECK(in_producer.empty() || in_producer.size() == sizes.size(),
           "{} fusion flags for {} layers", in_producer.size(), sizes.size());
  SS_CHECK(aliases.empty() || aliases.size() == sizes.size(), "{} aliases for {} layers",
           aliases.size(), sizes.size());
  ArenaTensors g{sizes, reader_spans(inputs)};
  for (size_t layer = 1; layer < in_producer.size(); ++layer) {
    if (!in_producer[layer]) continue;
    g.sizes[layer - 1] = 0;
    g.spans[layer].first = static_cast<int>(layer) - 1;
  }
  for (size_t layer = 0; layer < aliases.size(); ++layer) {
    const int holder = aliases[layer];
    if (holder < 0) continue;
    SS_CHECK(static_cast<size_t>(holder) > layer && static_cast<size_t>(holder) < sizes.size(),
             "layer {}'s gradient held by layer {}, which does not come after it", layer, holder);
    g.sizes[layer] = 0;
    LiveSpan& held = g.spans[static_cast<size_t>(holder)];
    held.first = std::min(held.first, g.spans[layer].first);
  }
  return g;
}

MemoryArena plan_step_arena(const std::vector<int64_t>& step_sizes,
                            const std::vector<LiveSpan>& step_spans, const ArenaTensors& gradients,
                            int64_t alignment) {
  const size_t layers = gradients.sizes.size();
  SS_CHECK(step_spans.size() == step_sizes.size() && gradients.spans.size() == layers,
           "{} step tensors with {} spans, {} gradients with {} spans", step_sizes.size(),
           step_spans.size(), layers, gradients.spans.size());
  const int end = 2 * static_cast<int>(layers);
  std::vector<int64_t> sizes = step_sizes;
  std::vector<LiveSpan> spans = step_spans;
  sizes.insert(sizes.end(), gradients.sizes.begin(), gradients.sizes.end());
  for (const LiveSpan& s : gradients.spans) spans.push_back({end - s.last, end - s.first});
  // The loss writes the model output's gradient as it reads the output.
  if (layers > 0) spans.back().first = static_cast<int>(layers);
  return plan_arena(sizes, spans, alignment);
}

MemoryArena plan_gradient_arena(const std::vector<int64_t>& sizes,
                                const std::vector<std::vector<int>>& inputs,
                                const std::vector<bool>& in_producer, int64_t alignment,
                                const std::vector<int>& aliases) {
  const ArenaTensors g = gradient_tensors(sizes, inputs, in_producer, aliases);
  return plan_arena(g.sizes, g.spans, alignment);
}

ArenaTensors second_reader_scratch(const std::vector<int64_t>& sizes,
                                   const std::vector<std::vector<int>>& inputs) {
  SS_CHECK(sizes.size() == inputs.size(), "{} output sizes for {} layers", sizes.size(),
           inputs.size());
  const int layers = static_cast<int>(inputs.size());
  const std::vector<LiveSpan> readers = reader_spans(inputs);
  ArenaTensors scratch{std::vector<int64_t>(inputs.size(), 0), {}};
  for (int layer = 0; layer < layers; ++layer) {
    scratch.spans.push_back({2 * layers - layer, 2 * layers - layer});
    const std::vector<int>& from = inputs[static_cast<size_t>(layer)];
    if (from.size() != 1 || from.front() < 0) continue;
    const auto input = static_cast<size_t>(from.front());
    if (readers[input].last > layer) scratch.sizes[static_cast<size_t>(layer)] = sizes[input];
  }
  return scratch;
}

std::vector<bool> outputs_read_in_backward(const ModelDef& def) {
  const size_t layers = def.layers.size();
  std::vector<bool> read(layers, false);
  for (size_t layer = 0; layer < layers; ++layer) {
    const BackwardReads reads = backward_reads(def.layers[layer]);
    if (reads.output) read[layer] = true;
    if (!reads.input) continue;
    for (const int from : layer_inputs(def, static_cast<int>(layer))) {
      if (from >= 0) read[static_cast<size_t>(from)] = true;
    }
  }
  return read;
}

}  // namespace scalescope
