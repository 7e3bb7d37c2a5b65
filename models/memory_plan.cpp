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

namespace {

// Per layer, the layers that read its output, in order (a layer reading it twice, twice).
std::vector<std::vector<int>> readers_of(const std::vector<std::vector<int>>& inputs) {
  std::vector<std::vector<int>> readers(inputs.size());
  for (size_t reader = 0; reader < inputs.size(); ++reader) {
    for (const int from : inputs[reader]) {
      if (from >= 0) readers.at(static_cast<size_t>(from)).push_back(static_cast<int>(reader));
    }
  }
  return readers;
}

// Per layer, the Add that takes its gradient (-1: none): each input an Add alone reads, and
// with `shared_inputs` each input it reads once, after every other reader.
std::vector<int> add_parents(const std::vector<std::vector<int>>& inputs,
                             const std::vector<bool>& passes_unchanged,
                             const std::vector<std::vector<int>>& readers, bool shared_inputs) {
  std::vector<int> parent(inputs.size(), -1);
  for (size_t add = 0; add < inputs.size(); ++add) {
    if (!passes_unchanged[add]) continue;
    const int a = static_cast<int>(add);
    for (const int from : inputs[add]) {
      if (from < 0) continue;
      const std::vector<int>& r = readers[static_cast<size_t>(from)];
      const bool last_once = r.back() == a && (r.size() == 1 || r[r.size() - 2] != a);
      if (r.size() == 1 || (shared_inputs && last_once)) parent[static_cast<size_t>(from)] = a;
    }
  }
  return parent;
}

// Each layer's holder: its last ancestor through `parent`, -1 for a layer without a parent.
std::vector<int> resolve(const std::vector<int>& parent) {
  std::vector<int> alias = parent;
  // Last to first: an Add's own alias is resolved before its inputs take it.
  for (size_t layer = alias.size(); layer-- > 0;) {
    const int to = alias[layer];
    if (to >= 0 && alias[static_cast<size_t>(to)] >= 0)
      alias[layer] = alias[static_cast<size_t>(to)];
  }
  return alias;
}

// Whether every layer sharing a buffer finds its own gradient there when its backward reads
// it (at its index, the backwards running down from the last layer). The other readers of an
// input with several add their gradients into the buffer in their backwards; a sharer m must
// see exactly those of the inputs on its way up to the holder (itself and the Adds it passes
// through): a reader r of such an input comes before m (r > m) if and only if the input is on
// m's way.
bool sharers_read_their_own(const std::vector<int>& parent,
                            const std::vector<std::vector<int>>& readers) {
  const std::vector<int> alias = resolve(parent);
  const size_t layers = parent.size();
  const auto holder = [&](size_t layer) {
    return alias[layer] >= 0 ? static_cast<size_t>(alias[layer]) : layer;
  };
  const auto on_way = [&](size_t from, size_t m) {
    for (int x = static_cast<int>(m); x >= 0; x = parent[static_cast<size_t>(x)]) {
      if (static_cast<size_t>(x) == from) return true;
    }
    return false;
  };
  // Whether m's gradient is in from's buffer.
  const auto shares = [&](size_t m, size_t from) {
    return holder(m) == holder(from) && (alias[m] >= 0 || m == holder(from));
  };
  for (size_t from = 0; from < layers; ++from) {
    if (parent[from] < 0 || readers[from].size() < 2) continue;
    for (const int r : readers[from]) {
      // A reader adding into the buffer must not read its own gradient there.
      if (r != parent[from] && shares(static_cast<size_t>(r), from)) return false;
    }
    for (size_t m = 0; m < layers; ++m) {
      if (!shares(m, from)) continue;
      for (const int r : readers[from]) {
        if (r != parent[from] && (static_cast<size_t>(r) > m) != on_way(from, m)) return false;
      }
    }
  }
  return true;
}

}  // namespace

std::vector<int> gradient_aliases(const std::vector<std::vector<int>>& inputs,
                                  const std::vector<bool>& passes_unchanged) {
  const size_t layers = inputs.size();
  SS_CHECK(passes_unchanged.size() == layers, "{} flags for {} layers", passes_unchanged.size(),
           layers);
  const std::vector<std::vector<int>> readers = readers_of(inputs);
  const std::vector<int> shared = add_parents(inputs, passes_unchanged, readers, true);
  if (sharers_read_their_own(shared, readers)) return resolve(shared);
  return resolve(add_parents(inputs, passes_unchanged, readers, false));
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
