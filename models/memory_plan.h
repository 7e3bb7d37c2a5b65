// Where the activation gradients of a model that is a graph (residual blocks, transformer
// blocks) live during backward: one arena, each gradient at an offset of its own for as long
// as it is live, and reused once its layer's backward has read it.
#pragma once

#include <cstdint>
#include <vector>

namespace scalescope {

struct GradientArena {
  std::vector<int64_t> offsets;  // per layer, floats from the arena's start
  int64_t size = 0;              // floats
};

// Backward runs the layers last to first. The gradient of layer i's output is written by the
// first of its readers that backward meets (the loss for the last layer) and read by layer i's
// own backward; it is live over layers [i, last reader], and two gradients whose spans meet
// never share memory. `sizes[i]` is the floats of layer i's gradient, `inputs[i]` the layers
// that layer i reads (a negative index is the model's input, which needs no gradient). Every
// offset is a multiple of `alignment` floats. Placement is greedy, largest first, at the lowest
// offset free over the gradient's span, which on residual stacks keeps the arena to a few
// gradients instead of one per layer.
GradientArena plan_gradient_arena(const std::vector<int64_t>& sizes,
                                  const std::vector<std::vector<int>>& inputs,
                                  int64_t alignment = 64);

}  // namespace scalescope
