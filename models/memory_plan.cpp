#include "models/memory_plan.h"

#include <algorithm>
#include <numeric>

#include "core/check.h"

namespace scalescope {
namespace {

struct Span {
  int first = 0;  // the layer whose backward reads the gradient last
  int last = 0;   // the reader whose backward writes it first
  bool meets(const Span& other) const { return first <= other.last && other.first <= last; }
};

std::vector<Span> live_spans(const std::vector<std::vector<int>>& inputs) {
  const int layers = static_cast<int>(inputs.size());
  std::vector<Span> spans(inputs.size());
  for (int i = 0; i < layers; ++i) spans[static_cast<size_t>(i)] = {i, i};
  for (int reader = 0; reader < layers; ++reader) {
    for (const int from : inputs[static_cast<size_t>(reader)]) {
      if (from < 0) continue;
      SS_CHECK(from < reader, "layer {} reads layer {}, which does not come before it", reader,
               from);
      Span& s = spans[static_cast<size_t>(from)];
      s.last = std::max(s.last, reader);
    }
  }
  return spans;
}

int64_t aligned(int64_t floats, int64_t alignment) {
  return (floats + alignment - 1) / alignment * alignment;
}

}  // namespace

GradientArena plan_gradient_arena(const std::vector<int64_t>& sizes,
                                  const std::vector<std::vector<int>>& inputs, int64_t alignment) {
  SS_CHECK(sizes.size() == inputs.size(), "{} gradient sizes for {} layers", sizes.size(),
           inputs.size());
  SS_CHECK(alignment > 0, "alignment {} must be positive", alignment);
  const std::vector<Span> spans = live_spans(inputs);
  std::vector<size_t> order(sizes.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return sizes[a] > sizes[b]; });
  GradientArena arena;
  arena.offsets.assign(sizes.size(), 0);
  std::vector<size_t> placed;
  for (const size_t g : order) {
    // The ranges of the placed gradients live at the same time as g, by offset.
    std::vector<std::pair<int64_t, int64_t>> taken;
    for (const size_t p : placed) {
      if (spans[p].meets(spans[g]))
        taken.emplace_back(arena.offsets[p], arena.offsets[p] + sizes[p]);
    }
    std::sort(taken.begin(), taken.end());
    int64_t offset = 0;
    for (const auto& [begin, end] : taken) {
      if (offset + sizes[g] <= begin) break;
      offset = std::max(offset, aligned(end, alignment));
    }
    arena.offsets[g] = offset;
    arena.size = std::max(arena.size, offset + sizes[g]);
    placed.push_back(g);
  }
  return arena;
}

}  // namespace scalescope
