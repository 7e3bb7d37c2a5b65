// Where a Model's step keeps its tensors (DESIGN.md "Memory"): the outputs some backward reads
// (in fp32, or in 16 bits under bf16 and fp16), the others in an arena only while their readers
// run; the activation gradients in ping-pong buffers (a sequence) or, in a graph, in the same
// arena as the outputs, once those are done. A sequence keeps what backward reads for the whole
// step, a graph in its arena only until the last backward that reads it.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <variant>
#include <vector>

#include "core/check.h"
#include "models/fusion.h"
#include "models/memory_plan.h"
#include "models/model.h"
#include "models/model_plan.h"

namespace scalescope {
namespace {

// Per layer, the layers that read its output (the model's input has none here).
std::vector<std::vector<int>> layer_readers(const ModelDef& def) {
  std::vector<std::vector<int>> readers(def.layers.size());
  for (size_t r = 0; r < def.layers.size(); ++r) {
    for (const int from : layer_inputs(def, static_cast<int>(r))) {
      if (from != kModelInput) readers[static_cast<size_t>(from)].push_back(static_cast<int>(r));
    }
  }
  return readers;
}

// Appends to `step` a tensor of sizes[i] floats live over spans[i] for each layer i whose span
// is not empty (last >= 0), and returns each one's index in `step` (0: none; the step's first
// tensors are the layers' outputs).
std::vector<size_t> add_step_tensors(ArenaTensors& step, const std::vector<int64_t>& sizes,
                                     const std::vector<LiveSpan>& spans) {
  std::vector<size_t> index(sizes.size(), 0);
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 0 || spans[i].last < 0) continue;
    index[i] = step.sizes.size();
    step.sizes.push_back(sizes[i]);
    step.spans.push_back(spans[i]);
  }
  return index;
}

}  // namespace

Model::Memory Model::memory(int64_t batch) {
  const Plan& plan = plan_for(batch);
  const auto bytes = [](const Tensor& t) { return static_cast<int64_t>(t.bytes()); };
  Memory m;
  m.parameters = bytes(weights_) + bytes(grads_) + bytes(tied_grads_) + bytes(buffers_);
  for (const DeviceBuffer& b : plan.kept_buffers) m.kept += static_cast<int64_t>(b.bytes());
  // A graph's kept outputs are all live at the loss, side by side in its arena.
  m.kept += plan.kept_in_arena;
  m.transient = bytes(plan.transient) - plan.kept_in_arena;
  m.gradients = bytes(plan.grad_a) + bytes(plan.grad_b);
  m.kernels = plan.kernel_bytes;
  m.kept_by_layer = plan.kept_bytes;
  m.kernels_by_layer = plan.kernel_bytes_by_layer;
  return m;
}

void Model::plan_memory(Plan& plan) {
  const size_t layers = def_.layers.size();
  std::vector<std::vector<int>> inputs;
  std::vector<int64_t> sizes;  // floats of each layer's output, and of its gradient
  for (size_t layer = 0; layer < layers; ++layer) {
    inputs.push_back(layer_inputs(def_, static_cast<int>(layer)));
    sizes.push_back(plan.batch * shapes_[layer + 1].numel());
  }
  // A fused producer's output is its activation's: what backward reads of it is read there.
  std::vector<bool> read = outputs_read_in_backward(def_);
  for (size_t layer = 0; layer < layers; ++layer) {
    if (!plan.fused_into(layer) || !read[layer]) continue;
    read[layer] = false;
    read[layer + 1] = true;
  }
  plan.saved_format = half_format(precision());
  // What backward reads of each output (a fused producer's in its activation's), in floats: the
  // fp32 values, or under bf16 and fp16 their 16-bit copy (and every fp32 output transient).
  std::vector<int64_t> kept_floats(layers, 0);
  for (size_t layer = 0; layer < layers; ++layer) {
    if (read[layer]) kept_floats[layer] = plan.saved_format ? (sizes[layer] + 1) / 2 : sizes[layer];
  }
  plan.kept_bytes.assign(layers, 0);
  std::vector<bool> kept = read;
  if (plan.saved_format) kept.assign(layers, false);
  plan.saved.assign(layers, nullptr);
  std::vector<LiveSpan> spans = reader_spans(inputs);
  const std::vector<int64_t> transient = transient_outputs(plan, sizes, kept, spans);
  if (!def_.inputs.empty()) {
    plan_step_arena_of(plan, sizes, inputs, {transient, std::move(spans)}, kept_floats);
    plan_saved_outputs(plan);
    return;
  }
  // A sequence: what backward reads in buffers of its own, the forward arena, and ping-pong
  // buffers for the gradients.
  std::vector<float*> kept_at(layers, nullptr);
  for (size_t layer = 0; layer < layers; ++layer) {
    if (kept_floats[layer] == 0) continue;
    const size_t element = plan.saved_format ? sizeof(uint16_t) : sizeof(float);
    plan.kept_buffers.emplace_back(device_, static_cast<size_t>(sizes[layer]) * element);
    plan.kept_bytes[layer] = static_cast<int64_t>(plan.kept_buffers.back().bytes());
    void* at = plan.kept_buffers.back().data();
    if (plan.saved_format) {
      plan.saved[layer] = static_cast<uint16_t*>(at);
    } else {
      kept_at[layer] = static_cast<float*>(at);
    }
  }
  plan_saved_outputs(plan);
  const MemoryArena arena = plan_arena(transient, spans);
  if (arena.size > 0) plan.transient = Tensor(device_, Shape{arena.size});
  place_outputs(plan, kept_at, arena.offsets);
  plan_half_gradients(plan);
  int64_t largest = shapes_.front().numel() * plan.batch;
  for (const int64_t s : sizes) largest = std::max(largest, s);
  plan.grad_a = Tensor(device_, Shape{largest});
  plan.grad_b = Tensor(device_, Shape{largest});
}

// A graph's step arena: the transient outputs while their readers run, then the activation
// gradients (16-bit ones in half the floats) while they are live, the outputs backward reads (or
// under bf16 and fp16 their saved copies) from their forward to their last backward, and under
// bf16 and fp16 a slot for each output a backward restores, at the backwards that restore it:
// memory shared wherever their times do not meet.
void Model::plan_step_arena_of(Plan& plan, std::vector<int64_t> sizes,
                               const std::vector<std::vector<int>>& inputs, ArenaTensors step,
                               const std::vector<int64_t>& kept_floats) {
  const size_t layers = sizes.size();
  if (!step.spans.empty()) step.spans.back().last = static_cast<int>(layers);  // the loss reads it
  const std::vector<StepRead> reads = step_reads(plan);
  const std::vector<size_t> restore_slot = add_step_tensors(step, sizes, restore_spans(reads));
  const std::vector<size_t> kept_slot =
      add_step_tensors(step, kept_floats, kept_spans(plan, reads, kept_floats));
  std::vector<bool> in_producer(layers, false);
  for (size_t layer = 0; layer + 1 < layers; ++layer) {
    in_producer[layer + 1] = plan.runs_relu_backward(layer);
  }
  std::vector<bool> unchanged(layers, false);
  for (size_t layer = 0; layer < layers; ++layer) {
    unchanged[layer] =
        std::holds_alternative<AddSpec>(def_.layers[layer]) && !plan.runs_relu_backward(layer);
  }
  plan.grad_alias = gradient_aliases(inputs, unchanged);
  plan_half_gradients(plan);
  const ArenaTensors scratch = second_reader_scratch(sizes, inputs);
  const std::vector<size_t> scratch_slot = add_step_tensors(step, scratch.sizes, scratch.spans);
  for (size_t layer = 0; layer < layers; ++layer) {
    if (plan.half_gradient[layer]) sizes[layer] = (sizes[layer] + 1) / 2;
  }
  const MemoryArena arena = plan_step_arena(
      step.sizes, step.spans, gradient_tensors(sizes, inputs, in_producer, plan.grad_alias));
  if (arena.size > 0) plan.transient = Tensor(device_, Shape{arena.size});
  const auto at = [&](size_t slot) { return plan.transient.data() + arena.offsets[slot]; };
  std::vector<float*> kept_at(layers, nullptr);
  plan.scratch.assign(layers, nullptr);
  for (size_t i = 0; i < layers; ++i) {
    if (scratch_slot[i] > 0) plan.scratch[i] = at(scratch_slot[i]);
    if (kept_slot[i] == 0) continue;
    plan.kept_bytes[i] = kept_floats[i] * static_cast<int64_t>(sizeof(float));
    plan.kept_in_arena += plan.kept_bytes[i];
    if (plan.saved_format) {
      plan.saved[i] = reinterpret_cast<uint16_t*>(at(kept_slot[i]));
    } else {
      kept_at[i] = at(kept_slot[i]);
    }
  }
  place_outputs(plan, kept_at, arena.offsets);
  for (size_t i = layers; i-- > 0;) {
    if (plan.fused_into(i)) {
      plan.restored[i] = plan.restored[i + 1];
    } else if (restore_slot[i] > 0) {
      plan.restored[i] = at(restore_slot[i]);
    }
  }
  plan.grad_offsets.assign(arena.offsets.end() - static_cast<std::ptrdiff_t>(layers),
                           arena.offsets.end());
}

// Each output a backward reads, in layer order of the readers: its holder (a fused producer's
// output is its activation's), the step time of the reading backward (2L − the reader's index)
// and whether that backward restores it from its saved copy first (under bf16 and fp16, a kernel
// that does not read the copy as it is).
std::vector<Model::StepRead> Model::step_reads(const Plan& plan) const {
  const int layers = static_cast<int>(def_.layers.size());
  std::vector<StepRead> reads;
  const auto read = [&](int of, int at, bool restored) {
    reads.push_back({plan.holder(static_cast<size_t>(of)), at, restored});
  };
  for (int layer = 0; layer < layers; ++layer) {
    const int at = 2 * layers - layer;
    const LayerKernel* kernel = plan.kernels[static_cast<size_t>(layer)].get();
    if (kernel == nullptr) {  // an Add, whose fused ReLU's mask reads its output (or its copy)
      if (plan.runs_relu_backward(static_cast<size_t>(layer))) read(layer, at, false);
      continue;
    }
    const SavedReads r = saved_reads(plan, *kernel, layer);
    const bool restored = plan.saved_format && !r.as_saved;
    if (r.input) read(r.from, at, restored);
    if (r.output) read(layer, at, restored);
  }
  return reads;
}

// Per layer (a fused producer's in its activation's), the step times of the backwards that
// restore its output from its saved copy, as a span; last < 0: none.
std::vector<LiveSpan> Model::restore_spans(const std::vector<StepRead>& reads) const {
  std::vector<LiveSpan> spans(def_.layers.size(), {std::numeric_limits<int>::max(), -1});
  for (const StepRead& r : reads) {
    if (!r.restored) continue;
    LiveSpan& s = spans[r.holder];
    s = {std::min(s.first, r.at), std::max(s.last, r.at)};
  }
  return spans;
}

// Per layer whose output backward reads (`floats` > 0: the output, or its saved copy), the step
// times that lives: from the forward that writes it (its producer's, where that one applies the
// layer's activation) over the loss to the last backward that reads it (under bf16 and fp16, as
// it is or to restore it). The others' spans are of no tensor.
std::vector<LiveSpan> Model::kept_spans(const Plan& plan, const std::vector<StepRead>& reads,
                                        const std::vector<int64_t>& floats) const {
  const int layers = static_cast<int>(def_.layers.size());
  std::vector<LiveSpan> spans(floats.size(), {0, -1});
  for (int o = 0; o < layers; ++o) {
    const bool by_producer = o > 0 && plan.fused_into(static_cast<size_t>(o) - 1);
    if (floats[static_cast<size_t>(o)] > 0)
      spans[static_cast<size_t>(o)] = {o - by_producer, layers};
  }
  for (const StepRead& r : reads) spans[r.holder].last = std::max(spans[r.holder].last, r.at);
  return spans;
}

std::vector<int64_t> Model::transient_outputs(const Plan& plan, const std::vector<int64_t>& sizes,
                                              const std::vector<bool>& kept,
                                              std::vector<LiveSpan>& spans) const {
  std::vector<int64_t> transient(sizes.size(), 0);
  for (size_t layer = 0; layer < sizes.size(); ++layer) {
    // A fused producer writes its activation's output: that one is live from the producer on.
    if (plan.fused_into(layer)) {
      spans[layer + 1].first = static_cast<int>(layer);
    } else if (!kept[layer]) {
      transient[layer] = sizes[layer];
    }
  }
  return transient;
}

void Model::place_outputs(Plan& plan, const std::vector<float*>& kept_at,
                          const std::vector<int64_t>& offsets) {
  const size_t layers = kept_at.size();
  plan.outputs.assign(layers, nullptr);
  plan.restored.assign(layers, nullptr);
  for (size_t layer = layers; layer-- > 0;) {
    if (plan.fused_into(layer)) {
      plan.outputs[layer] = plan.outputs[layer + 1];
    } else if (kept_at[layer] != nullptr) {
      plan.outputs[layer] = kept_at[layer];
    } else {
      plan.outputs[layer] = plan.transient.data() + offsets[layer];
    }
    plan.restored[layer] = plan.outputs[layer];
  }
}

bool Model::staged(const LayerKernel& kernel, LayerKernel::Pass pass) const {
  return sync_ && kernel.sync_points(pass) > 0;
}

// From the last layer back, so that each layer's readers have decided how they read it.
void Model::plan_saved_outputs(Plan& plan) const {
  const size_t layers = def_.layers.size();
  plan.into_saved.assign(layers, false);
  plan.saved_by_add.assign(layers, false);
  // Without fusion the model runs each pass on its own, the reference the fused passes are
  // tested against.
  if (!plan.saved_format || !fuse_layers()) return;
  for (size_t i = 0; i < layers; ++i) {
    plan.saved_by_add[i] =
        std::holds_alternative<AddSpec>(def_.layers[i]) && plan.saved[plan.holder(i)] != nullptr;
  }
  const std::vector<std::vector<int>> readers = layer_readers(def_);
  // The last layer's output is the loss's input. A producer that applies the next layer's
  // activation writes that layer's output: its readers and saved copy are the activation's,
  // whose own save is skipped too.
  for (size_t i = layers - 1; i-- > 0;) {
    LayerKernel* kernel = plan.kernels[i].get();
    const size_t o = plan.holder(i);
    if (kernel == nullptr || o + 1 >= layers || plan.saved[o] == nullptr ||
        plan.fusions[i].forward_in_producer || readers[o].empty() ||
        staged(*kernel, LayerKernel::Pass::kForward)) {
      continue;
    }
    const auto mode = kernel->forwards_into_saved(*plan.saved_format);
    if (mode == LayerKernel::SavedOutput::kNo) continue;
    const int from = layer_inputs(def_, static_cast<int>(i)).front();
    if (mode == LayerKernel::SavedOutput::kFromSavedInput &&
        (from == kModelInput || plan.saved[plan.holder(static_cast<size_t>(from))] == nullptr)) {
      continue;
    }
    plan.into_saved[i] = std::all_of(readers[o].begin(), readers[o].end(), [&](int r) {
      return reads_saved_input_only(plan, r, static_cast<int>(o));
    });
    plan.into_saved[o] = plan.into_saved[i];
  }
}

// Whether `reader`'s training forward reads layer `of`'s output only through its saved copy.
bool Model::reads_saved_input_only(const Plan& plan, int reader, int of) const {
  const auto r = static_cast<size_t>(reader);
  LayerKernel* kernel = plan.kernels[r].get();
  if (kernel == nullptr || plan.fusions[r].forward_in_producer ||
      layer_inputs(def_, reader) != std::vector<int>{of}) {
    return false;
  }
  if (plan.into_saved[r]) {
    return kernel->forwards_into_saved(*plan.saved_format) ==
           LayerKernel::SavedOutput::kFromSavedInput;
  }
  return kernel->forwards_from_saved(*plan.saved_format) &&
         !staged(*kernel, LayerKernel::Pass::kForward);
}

void Model::forward_into_saved(LayerKernel& kernel, int layer, Stream& stream) {
  const Plan& plan = *current_;
  uint16_t* out = plan.saved[plan.holder(static_cast<size_t>(layer))];
  if (kernel.forwards_into_saved(*plan.saved_format) == LayerKernel::SavedOutput::kFromInput) {
    kernel.forward_into_saved(layer_input(layer), nullptr, out, *plan.saved_format, stream);
    return;
  }
  const auto from = static_cast<size_t>(layer_inputs(def_, layer).front());
  kernel.forward_into_saved(nullptr, plan.saved[plan.holder(from)], out, *plan.saved_format,
                            stream);
}

void Model::save_output(int layer, Stream& stream) {
  const Plan& plan = *current_;
  const auto i = static_cast<size_t>(layer);
  if (!plan.saved_format || plan.saved[i] == nullptr || plan.into_saved[i]) return;
  // An Add wrote it (its own output's, or the fused ReLU's after it).
  if (plan.saved_by_add[i] || (i > 0 && plan.fused_into(i - 1) && plan.saved_by_add[i - 1])) {
    return;
  }
  compress_gradients(plan.outputs[i], plan.saved[i], plan.batch * shapes_[i + 1].numel(), 1,
                     *plan.saved_format, stream);
}

const uint16_t* Model::saved_copy(int reader, int of) const {
  const Plan& plan = *current_;
  const uint16_t* saved = plan.saved[plan.holder(static_cast<size_t>(of))];
  SS_CHECK(saved != nullptr,
           "model '{}': layer {}'s backward reads the output of layer {}, which was not saved",
           def_.name, reader, of);
  return saved;
}

const uint16_t* Model::saved_input(LayerKernel& kernel, int layer) const {
  const Plan& plan = *current_;
  // Asked of every layer of every training forward: fp32's answer costs no lookup.
  if (!plan.saved_format || !kernel.forwards_from_saved(*plan.saved_format) ||
      staged(kernel, LayerKernel::Pass::kForward)) {
    return nullptr;
  }
  const int from = layer_inputs(def_, layer).front();
  if (from == kModelInput) return nullptr;
  return plan.saved[plan.holder(static_cast<size_t>(from))];
}

void Model::restore_saved(int reader, int of, Stream& stream) {
  const Plan& plan = *current_;
  const size_t i = plan.holder(static_cast<size_t>(of));
  decompress_gradients(saved_copy(reader, of), plan.restored[i],
                       plan.batch * shapes_[i + 1].numel(), *plan.saved_format, stream);
}

Model::SavedReads Model::saved_reads(const Plan& plan, const LayerKernel& kernel, int layer) const {
  BackwardReads reads = backward_reads(def_.layers[static_cast<size_t>(layer)]);
  // A fused ReLU's backward reads its output, which is this layer's.
  reads.output = reads.output || plan.runs_relu_backward(static_cast<size_t>(layer));
  SavedReads r;
  r.from = layer_inputs(def_, layer).front();
  r.input = reads.input && r.from != kModelInput;
  r.output = reads.output;
  // A kernel that reads the saved copies as they are needs no restore (a staged one always
  // does, and the model's input has no saved copy).
  r.as_saved = plan.saved_format && (r.input || r.output) && !(reads.input && !r.input) &&
               kernel.reads_saved(*plan.saved_format) &&
               !staged(kernel, LayerKernel::Pass::kBackward);
  return r;
}

// A gradient stays 16-bit where the layer's backward reads it so and its one reader's writes
// it so, both from the saved copies, neither fused with a neighbour's backward, and the reader
// writing it first (no alias, no second reader adding to it). Without fusion every pass runs
// on its own: the reference the fused passes are tested against.
void Model::plan_half_gradients(Plan& plan) const {
  const size_t layers = def_.layers.size();
  plan.half_gradient.assign(layers, false);
  if (!plan.saved_format || !fuse_layers()) return;
  const std::vector<std::vector<int>> readers = layer_readers(def_);
  // A layer with a backward of its own, which reads the saved copies as they are (the reader
  // may run its ReLU's too).
  const auto plain = [&](size_t layer) {
    const LayerFusion& f = plan.fusions[layer];
    return plan.kernels[layer] != nullptr && !f.forward_in_producer && !f.backward_in_reader &&
           !f.backward_in_producer &&
           saved_reads(plan, *plan.kernels[layer], static_cast<int>(layer)).as_saved;
  };
  // From the last layer back: a reader that reads its own gradient in 16 bits writes fp32.
  for (size_t x = layers - 1; x-- > 0;) {
    if (readers[x].size() != 1 || !plain(x) || plan.fused_into(x) || plan.runs_relu_backward(x) ||
        (x < plan.grad_alias.size() && plan.grad_alias[x] >= 0)) {
      continue;
    }
    const auto r = static_cast<size_t>(readers[x].front());
    plan.half_gradient[x] = plain(r) && !plan.half_gradient[r] &&
                            plan.kernels[x]->reads_half_gradient(*plan.saved_format) &&
                            plan.kernels[r]->writes_half_gradient(*plan.saved_format);
  }
}

bool Model::adds_to_input_gradient(const LayerKernel& kernel, int layer) const {
  const Plan& plan = *current_;
  if (staged(kernel, LayerKernel::Pass::kBackward)) return false;
  if (plan.saved_format && saved_reads(plan, kernel, layer).as_saved) {
    return kernel.adds_input_gradient_from_saved(*plan.saved_format);
  }
  return kernel.adds_input_gradient();
}

void Model::backward_layer(LayerKernel& kernel, int layer, const float* dout, float* din,
                           Stream& stream, bool adding) {
  const Plan& plan = *current_;
  const float* out = plan.outputs[static_cast<size_t>(layer)];
  if (!plan.saved_format) {
    run_backward(kernel, layer_input(layer), out, dout, din, stream, adding);
    return;
  }
  const SavedReads reads = saved_reads(plan, kernel, layer);
  const int from = reads.from;
  SS_CHECK(!adding || !reads.as_saved || kernel.adds_input_gradient_from_saved(*plan.saved_format),
           "model '{}': layer {}'s backward reads 16-bit copies and cannot add to its input's "
           "gradient",
           def_.name, layer);
  if (reads.as_saved) {
    const uint16_t* in = reads.input ? saved_copy(layer, from) : nullptr;
    const uint16_t* saved_out = reads.output ? saved_copy(layer, layer) : nullptr;
    // Gradients kept in 16 bits live in their fp32 places (plan_half_gradients); an input's
    // gradient added to is an fp32 one (adds_to_input_gradient).
    if (adding) {
      kernel.backward_saved_adding(in, saved_out, dout, din, stream);
    } else if (plan.half_gradient[static_cast<size_t>(layer)]) {
      kernel.backward_from_half_gradient(in, saved_out, reinterpret_cast<const uint16_t*>(dout),
                                         din, stream);
    } else if (din != nullptr && from != kModelInput &&
               plan.half_gradient[static_cast<size_t>(from)]) {
      kernel.backward_into_half_gradient(in, saved_out, dout, reinterpret_cast<uint16_t*>(din),
                                         stream);
    } else {
      kernel.backward_saved(in, saved_out, dout, din, stream);
    }
    return;
  }
  if (reads.input) restore_saved(layer, from, stream);
  if (reads.output) restore_saved(layer, layer, stream);
  run_backward(kernel, from == kModelInput ? input_ : plan.restored[static_cast<size_t>(from)],
               plan.restored[static_cast<size_t>(layer)], dout, din, stream, adding);
}

}  // namespace scalescope
