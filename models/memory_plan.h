// How a model that is a graph (residual blocks, transformer blocks) lays out the tensors of a
// step that need not live for all of it: the activation gradients during backward, and the
// outputs no backward reads during forward. Each set shares one arena, each tensor at an
// offset of its own only while it is live.
#pragma once

#include <cstdint>
#include <vector>

#include "models/zoo.h"

namespace scalescope {

// A tensor is live from the pass over layer `first` to the pass over layer `last`, inclusive.
struct LiveSpan {
  int first = 0;
  int last = 0;
  bool meets(const LiveSpan& other) const { return first <= other.last && other.first <= last; }
};

// The arenas' offsets are multiples of this many floats (256 bytes) unless told otherwise.
inline constexpr int64_t kArenaAlignment = 64;

struct MemoryArena {
  std::vector<int64_t> offsets;  // per tensor, floats from the arena's start
  int64_t size = 0;              // floats
};

// Whether the arenas place tensors whose spans do not meet in the same memory (true, the
// default) or each apart: the reference a shared plan's results are tested against, whatever
// spans it got wrong. Process-wide, read when a plan is made; thread-safe.
void set_arena_sharing(bool share);
bool arena_sharing();

// Places tensors of `sizes` floats (0: no tensor) so that two whose spans meet never share a
// float, every offset a multiple of `alignment` floats: greedy, largest first, at the lowest
// offset free over the tensor's span, which on residual stacks keeps an arena to a few tensors.
MemoryArena plan_arena(const std::vector<int64_t>& sizes, const std::vector<LiveSpan>& spans,
                       int64_t alignment = kArenaAlignment);

// Per layer, [layer, its last reader], given each layer's inputs (a negative index is the
// model's input). Forward writes layer i's output at i and its readers read it up to the last;
// backward, which runs the layers last to first, writes the gradient of that output at the
// last reader (the loss, for the last layer) and reads it at i: the same span in its order.
// Throws Error for a layer that reads one that does not come before it.
std::vector<LiveSpan> reader_spans(const std::vector<std::vector<int>>& inputs);

// Per layer, the later layer whose gradient buffer holds its gradient, or -1 for its own: an
// Add passes its gradient unchanged to its inputs, so the gradient of an input that Add alone
// reads is the Add's, and backward reads it there instead of the Add copying it (a GPT's
// attention and MLP projections, each read only by its residual add). So is that of an input
// the Add reads after every other reader (a residual stream, read by a layer norm first): the
// other readers' backwards, which run after the Add's, add their gradients into the buffer, so
// long as no layer sharing it reads it in between (else none such is shared).
// `passes_unchanged[k]`: layer k is an Add without a fused ReLU, whose mask would change the
// gradient. An Add whose own gradient is another's resolves to that one.
std::vector<int> gradient_aliases(const std::vector<std::vector<int>>& inputs,
                                  const std::vector<bool>& passes_unchanged);

// Tensors to place in an arena: each one's floats (0: none) and span.
struct ArenaTensors {
  std::vector<int64_t> sizes;
  std::vector<LiveSpan> spans;
};

// A graph's activation gradients as tensors of an arena: per layer, the floats its gradient
// takes where it has memory of its own (0 where a fused producer's or an Add's holds it) and the
// span it is live in, in layer indices read backwards (written at the pass over `last`, read at
// the pass over `first`). Arguments as plan_gradient_arena's.
ArenaTensors gradient_tensors(const std::vector<int64_t>& sizes,
                              const std::vector<std::vector<int>>& inputs,
                              const std::vector<bool>& in_producer = {},
                              const std::vector<int>& aliases = {});

// One arena for a graph's whole step: tensors of the step's time, then the activation
// gradients, on one timeline of its passes (forward over layer i at i, the loss at L for L
// layers, backward over layer i at 2L − i). `step_sizes` and `step_spans` are in that time
// already (the transient outputs by their readers', the model's output until the loss, what
// backward reads until its last reader, a restored output's slot at the backwards that restore
// it, a second reader's scratch at its backward), any number of them; the L
// `gradients` (gradient_tensors') map to [2L − last, 2L − first], the model output's from the
// loss on. Offsets: the step tensors', then the gradients'.
MemoryArena plan_step_arena(const std::vector<int64_t>& step_sizes,
                            const std::vector<LiveSpan>& step_spans, const ArenaTensors& gradients,
                            int64_t alignment = kArenaAlignment);

// The arena of a graph's activation gradients (`sizes[i]` floats for layer i's).
// `in_producer[i]`: layer i's backward runs inside layer i − 1's (a ReLU fused into its
// producer), which reads layer i's gradient and never writes its own. Empty: none.
// `aliases` (gradient_aliases; empty: none): a layer with an alias takes no memory, and the
// gradient holding its gradient lives until its backward.
MemoryArena plan_gradient_arena(const std::vector<int64_t>& sizes,
                                const std::vector<std::vector<int>>& inputs,
                                const std::vector<bool>& in_producer = {},
                                int64_t alignment = kArenaAlignment,
                                const std::vector<int>& aliases = {});

// Per layer that reads one input, the scratch its backward writes that input's gradient into
// before adding it to the gradient a later reader wrote already (backward runs the later reader
// first): the input's floats where a later layer reads it too (a residual stream's), else 0
// (and for the model's input). Each is live at its layer's backward alone: 2L − layer on
// plan_step_arena's timeline, for L layers.
ArenaTensors second_reader_scratch(const std::vector<int64_t>& sizes,
                                   const std::vector<std::vector<int>>& inputs);

// Per layer of `def`, whether a backward reads its output: its own (backward_reads' output)
// or a reader's (backward_reads' input). The others need their memory only until their
// readers' forwards are done (the model's output until the loss has read it).
std::vector<bool> outputs_read_in_backward(const ModelDef& def);

}  // namespace scalescope
