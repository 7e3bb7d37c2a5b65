#include "models/model.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>
#include <optional>

#include "core/check.h"
#include "core/random.h"
#include "models/fusion.h"
#include "models/memory_plan.h"
#include "models/model_plan.h"

namespace scalescope {

namespace {

// Host values of every tensor of `infos`: Glorot-uniform from one generator stream per
// tensor where fan_in is set (so the values do not depend on the backend, the layout or the
// order of construction), else every value `fill`.
std::vector<std::vector<float>> initial_values(const std::vector<ParamInfo>& infos, uint64_t seed) {
  std::vector<std::vector<float>> host(infos.size());
  for (size_t i = 0; i < infos.size(); ++i) {
    const ParamSpec& p = infos[i].spec;
    host[i].assign(static_cast<size_t>(p.shape.numel()), p.fill);
    if (p.fan_in == 0) continue;
    const float limit = std::sqrt(6.0f / static_cast<float>(p.fan_in + p.fan_out));
    Rng rng(seed, i);
    for (float& v : host[i]) v = rng.uniform(-limit, limit);
  }
  return host;
}

// Brackets one layer's pass for the probe, when there is one; not while an exception unwinds.
class ProbeScope {
 public:
  ProbeScope(LayerProbe* probe, int layer, LayerProbe::Pass pass, Stream& stream)
      : probe_(probe), layer_(layer), pass_(pass), stream_(stream) {
    if (probe_ != nullptr) probe_->begin(layer_, pass_, stream_);
  }
  ~ProbeScope() {
    if (probe_ != nullptr && std::uncaught_exceptions() == 0) probe_->end(layer_, pass_, stream_);
  }
  ProbeScope(const ProbeScope&) = delete;
  ProbeScope& operator=(const ProbeScope&) = delete;

 private:
  LayerProbe* probe_;
  int layer_;
  LayerProbe::Pass pass_;
  Stream& stream_;
};

// Refuses a batch past what the kernels' libraries index: cuBLAS and cuDNN take 32-bit sizes,
// and oneDNN 2.6 stopped on SIGFPE planning a dense layer of 2^32 rows (mlp-41m at batch 2^32;
// 2^31 planned, then failed as out of memory). So every layer's rows, its batch times the
// positions of a sample (pixels, tokens), stay within 2^31 - 1, which no device's memory
// reaches for a trainable model anyway.
void check_batch_fits(const ModelDef& def, const std::vector<Shape>& shapes, int64_t batch) {
  constexpr int64_t kMaxRows = std::numeric_limits<int32_t>::max();
  for (size_t i = 0; i < shapes.size(); ++i) {
    const Shape& shape = shapes[i];
    const int64_t width = shape.rank() == 0 ? 1 : shape[shape.rank() - 1];
    const int64_t positions = width == 0 ? 0 : shape.numel() / width;
    if (positions == 0 || batch <= kMaxRows / positions) continue;
    const std::string what =
        i == 0 ? std::string("its input")
               : fmt::format("layer {} ({})'s output", i - 1, describe(def.layers[i - 1]));
    throw_usage_error(fmt::format(
        "batch size {} is too large for model '{}': {} would have {} x {} rows (of {} values), "
        "more than the 2^31 - 1 rows the kernels' libraries index (cuBLAS, cuDNN, oneDNN)",
        batch, def.name, what, batch, positions, width));
  }
}

}  // namespace

Model::Model(ModelDef def, Shape input, Device& device, uint64_t seed)
    : def_(std::move(def)), device_(device) {
  SS_CHECK(!def_.layers.empty(), "model '{}' has no layers", def_.name);
  shapes_ = layer_shapes(def_, input);
  params_ = param_infos(def_, input);
  const Shape& out = shapes_.back();
  SS_CHECK(def_.loss != LossKind::kBinaryCrossEntropy || out == Shape{1},
           "model '{}': binary cross-entropy needs one output per sample, not {}", def_.name,
           out.to_string());
  try {
    loss_rows(def_.loss, out.with_batch(1));
  } catch (const Error& e) {
    throw_error(
        fmt::format("model '{}' ends in shape {}: {}", def_.name, out.to_string(), e.message()));
  }

  // Offsets in reverse layer order; inside a layer, weight before bias. Each parameter starts
  // on a 256-byte boundary, so that every gradient bucket does too: NCCL's vectorised kernels
  // need aligned pointers (a 4-byte-aligned bucket runs markedly slower). The padding stays
  // zero in weights, gradients and optimizer state, and adds zeros to every all-reduce.
  offsets_.assign(params_.size(), 0);
  int64_t total = 0;
  for (int layer = static_cast<int>(def_.layers.size()) - 1; layer >= 0; --layer) {
    for (size_t i = 0; i < params_.size(); ++i) {
      if (params_[i].layer != layer) continue;
      offsets_[i] = total;
      total = aligned_param_end(total + params_[i].spec.shape.numel());
      param_count_ += params_[i].spec.shape.numel();
    }
  }
  weights_ = Tensor(device_, Shape{total});
  grads_ = Tensor(device_, Shape{total});
  device_.fill_zero(grads_.data(), grads_.bytes(), device_.default_stream());
  // A device that only plans holds no values: drawing them would be most of a plan's time.
  const bool values = !device_.plans_only();
  if (values) weights_from_host(initial_values(params_, seed));

  aliases_ = scalescope::param_aliases(def_, input);
  int64_t tied_total = 0;
  for (const ParamAlias& a : aliases_) {
    tied_offsets_.push_back(tied_total);
    tied_total += params_[a.param].spec.shape.numel();
  }
  if (tied_total > 0) tied_grads_ = Tensor(device_, Shape{tied_total});

  buffer_infos_ = scalescope::buffer_infos(def_, input);
  int64_t buffer_total = 0;
  for (const ParamInfo& b : buffer_infos_) {
    buffer_offsets_.push_back(buffer_total);
    buffer_total += b.spec.shape.numel();
  }
  buffer_count_ = buffer_total;
  if (buffer_total > 0) {
    buffers_ = Tensor(device_, Shape{buffer_total});
    if (values) buffers_from_host(initial_values(buffer_infos_, seed));
  }
}

Model::~Model() = default;

TensorView Model::param(size_t i) const {
  return TensorView{weights_.data() + offsets_.at(i), params_.at(i).spec.shape};
}

TensorView Model::grad(size_t i) const {
  return TensorView{grads_.data() + offsets_.at(i), params_.at(i).spec.shape};
}

std::pair<int64_t, int64_t> Model::layer_grad_range(int layer) const {
  int64_t begin = -1;
  int64_t end = -1;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (params_[i].layer != layer) continue;
    const int64_t b = offsets_[i];
    const int64_t e = aligned_param_end(b + params_[i].spec.shape.numel());
    begin = begin < 0 ? b : std::min(begin, b);
    end = std::max(end, e);
  }
  if (begin < 0) return {0, 0};
  return {begin, end};
}

std::vector<std::vector<float>> Model::weights_to_host() const {
  const std::vector<float> flat = weights_.to_host();
  std::vector<std::vector<float>> out(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto begin = flat.begin() + offsets_[i];
    out[i].assign(begin, begin + params_[i].spec.shape.numel());
  }
  return out;
}

void Model::weights_from_host(const std::vector<std::vector<float>>& values) {
  SS_CHECK(values.size() == params_.size(), "model '{}' has {} parameter tensors, got {}",
           def_.name, params_.size(), values.size());
  std::vector<float> flat(static_cast<size_t>(weights_.numel()), 0.0f);
  for (size_t i = 0; i < params_.size(); ++i) {
    SS_CHECK(static_cast<int64_t>(values[i].size()) == params_[i].spec.shape.numel(),
             "parameter '{}' of model '{}' has {} values, got {}", params_[i].name, def_.name,
             params_[i].spec.shape.numel(), values[i].size());
    std::copy(values[i].begin(), values[i].end(), flat.begin() + offsets_[i]);
  }
  weights_.copy_from_host(flat);
}

std::vector<std::vector<float>> Model::buffers_to_host() const {
  std::vector<std::vector<float>> out(buffer_infos_.size());
  if (buffer_infos_.empty()) return out;
  const std::vector<float> flat = buffers_.to_host();
  for (size_t i = 0; i < buffer_infos_.size(); ++i) {
    const auto begin = flat.begin() + buffer_offsets_[i];
    out[i].assign(begin, begin + buffer_infos_[i].spec.shape.numel());
  }
  return out;
}

void Model::buffers_from_host(const std::vector<std::vector<float>>& values) {
  SS_CHECK(values.size() == buffer_infos_.size(), "model '{}' has {} buffers, got {}", def_.name,
           buffer_infos_.size(), values.size());
  if (buffer_infos_.empty()) return;
  std::vector<float> flat(static_cast<size_t>(buffers_.numel()), 0.0f);
  for (size_t i = 0; i < buffer_infos_.size(); ++i) {
    SS_CHECK(static_cast<int64_t>(values[i].size()) == buffer_infos_[i].spec.shape.numel(),
             "buffer '{}' of model '{}' has {} values, got {}", buffer_infos_[i].name, def_.name,
             buffer_infos_[i].spec.shape.numel(), values[i].size());
    std::copy(values[i].begin(), values[i].end(), flat.begin() + buffer_offsets_[i]);
  }
  buffers_.copy_from_host(flat);
}

LayerBinding Model::binding(size_t layer, int64_t batch) const {
  LayerBinding b;
  b.in = layer_input_shape(def_, shapes_, static_cast<int>(layer)).with_batch(batch);
  b.out = shapes_[layer + 1].with_batch(batch);
  for (size_t a = 0; a < aliases_.size(); ++a) {
    if (aliases_[a].layer != static_cast<int>(layer)) continue;
    b.params.push_back(param(aliases_[a].param));
    b.grads.push_back(
        TensorView{tied_grads_.data() + tied_offsets_[a], params_[aliases_[a].param].spec.shape});
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    if (params_[i].layer != static_cast<int>(layer)) continue;
    b.params.push_back(param(i));
    b.grads.push_back(grad(i));
  }
  for (size_t i = 0; i < buffer_infos_.size(); ++i) {
    if (buffer_infos_[i].layer != static_cast<int>(layer)) continue;
    b.buffers.push_back(
        TensorView{buffers_.data() + buffer_offsets_[i], buffer_infos_[i].spec.shape});
  }
  return b;
}

Model::Plan& Model::plan_for(int64_t batch) {
  SS_CHECK(batch > 0, "batch size {} must be positive", batch);
  auto it = plans_.find(batch);
  if (it != plans_.end()) return *it->second;
  check_batch_fits(def_, shapes_, batch);

  auto plan = std::make_unique<Plan>();
  plan->batch = batch;
  KernelBackend& kernels = kernel_backend(device_.id().kind);
  plan->fusions = plan_fusions(def_, kernels);
  plan->pool = std::make_shared<TransientPool>();
  for (size_t layer = 0; layer < def_.layers.size(); ++layer) {
    LayerBinding b = binding(layer, batch);
    b.transient = plan->pool;
    if (plan->fused_into(layer)) {
      b.activation = std::get<ActivationSpec>(def_.layers[layer + 1]).kind;
    }
    b.relu_backward = plan->runs_relu_backward(layer);
    b.relu_gradient = layer > 0 && plan->fusions[layer - 1].backward_in_reader;
    b.input_gradient = !reads_model_input(def_, static_cast<int>(layer));
    b.sync = sync_group_;
    const bool add = std::holds_alternative<AddSpec>(def_.layers[layer]);
    const int64_t before = device_.memory_in_use();
    plan->kernels.push_back(add || plan->fusions[layer].idle()
                                ? nullptr
                                : kernels.make_layer(def_.layers[layer], b, device_));
    plan->kernel_bytes_by_layer.push_back(device_.memory_in_use() - before);
    plan->kernel_bytes += plan->kernel_bytes_by_layer.back();
    SS_CHECK(!sync_ || !std::holds_alternative<BatchNorm2DSpec>(def_.layers[layer]) ||
                 plan->kernels.back()->sync_points(LayerKernel::Pass::kForward) > 0,
             "model '{}': layer {} ({}) cannot synchronize its statistics across replicas on "
             "{} devices (--sync-batchnorm)",
             def_.name, layer, describe(def_.layers[layer]), to_string(device_.id().kind));
  }
  const int64_t before_pool = device_.memory_in_use();
  plan->pool->allocate(device_);
  plan->kernel_bytes += device_.memory_in_use() - before_pool;
  plan_memory(*plan);
  const int64_t before_loss = device_.memory_in_use();
  plan->loss = kernels.make_loss(def_.loss, shapes_.back().with_batch(batch), device_);
  plan->kernel_bytes += device_.memory_in_use() - before_loss;
  return *plans_.emplace(batch, std::move(plan)).first->second;
}

const Model::Plan& Model::planned(int64_t batch) const {
  const auto it = plans_.find(batch);
  SS_CHECK(it != plans_.end(), "model '{}' has no kernels planned for batch size {}", def_.name,
           batch);
  return *it->second;
}

std::vector<std::vector<KernelChoice>> Model::kernel_choices(int64_t batch) const {
  std::vector<std::vector<KernelChoice>> out;
  for (const std::unique_ptr<LayerKernel>& kernel : planned(batch).kernels)
    out.push_back(kernel ? kernel->choices() : std::vector<KernelChoice>{});
  return out;
}

std::vector<bool> Model::writes_saved_copies(int64_t batch) const {
  return planned(batch).into_saved;
}

std::vector<bool> Model::half_gradients(int64_t batch) const {
  return planned(batch).half_gradient;
}

std::vector<bool> Model::adds_writing_saved_copies(int64_t batch) const {
  return planned(batch).saved_by_add;
}

const float* Model::output_of(int layer) const {
  return layer == kModelInput ? input_ : current_->outputs[static_cast<size_t>(layer)];
}

const float* Model::layer_input(int layer) const {
  return output_of(layer_inputs(def_, layer).front());
}

void Model::forward(const float* input, int64_t batch, Stream& stream, bool training) {
  Plan& plan = plan_for(batch);
  current_ = &plan;
  input_ = input;
  for (size_t layer = 0; layer < plan.kernels.size(); ++layer) {
    const ProbeScope probe(training ? probe_ : nullptr, static_cast<int>(layer),
                           LayerProbe::Pass::kForward, stream);
    // A fused activation's output was written by the layer before.
    if (!plan.fusions[layer].forward_in_producer) forward_layer(layer, training, stream);
    if (training) save_output(static_cast<int>(layer), stream);
  }
}

void Model::forward_layer(size_t layer, bool training, Stream& stream) {
  const Plan& plan = *current_;
  float* out = plan.outputs[layer];
  LayerKernel* kernel = plan.kernels[layer].get();
  if (kernel == nullptr) {  // Add: out = a + b (and the ReLU after it, fused), on the device
    const std::vector<int> from = layer_inputs(def_, static_cast<int>(layer));
    const int64_t count = plan.batch * shapes_[layer + 1].numel();
    kernel_math::HalfRow saved;
    if (training && plan.saved_by_add[layer]) {
      saved = {plan.saved[plan.holder(layer)], *plan.saved_format};
    }
    add_into(out, output_of(from[0]), output_of(from[1]), count, plan.fused_into(layer), stream,
             saved);
  } else if (!training) {
    kernel->forward_eval(layer_input(static_cast<int>(layer)), out, stream);
  } else if (plan.into_saved[layer]) {
    forward_into_saved(*kernel, static_cast<int>(layer), stream);
  } else if (const uint16_t* saved = saved_input(*kernel, static_cast<int>(layer))) {
    kernel->forward_saved(saved, out, stream);
  } else {
    run_forward(*kernel, layer_input(static_cast<int>(layer)), out, stream);
  }
}

const float* Model::output() const {
  SS_CHECK(current_ != nullptr, "model output read before any forward");
  return current_->outputs.back();
}

void Model::loss_forward_backward(const float* labels, float scale, float* loss, Stream& stream) {
  SS_CHECK(current_ != nullptr, "loss computed before any forward");
  // A graph keeps each layer's output gradient in place: the last layer's is the loss's.
  current_->dout = def_.inputs.empty() ? current_->grad_a.data()
                                       : current_->gradient(current_->grad_offsets.size() - 1);
  current_->loss->forward_backward(output(), labels, scale, loss, current_->dout, stream);
}

void Model::loss_forward(const float* labels, float scale, float* loss, Stream& stream) {
  SS_CHECK(current_ != nullptr, "loss computed before any forward");
  current_->loss->forward(output(), labels, scale, loss, stream);
}

void Model::count_correct(const float* labels, float* correct, Stream& stream) {
  SS_CHECK(current_ != nullptr, "accuracy computed before any forward");
  current_->loss->count_correct(output(), labels, correct, stream);
}

void Model::backward(Stream& stream, const std::function<void(int layer)>& on_layer_done) {
  Plan* plan = current_;
  SS_CHECK(plan != nullptr && plan->dout != nullptr, "backward before the loss was computed");
  if (!def_.inputs.empty()) {
    backward_graph(stream, on_layer_done);
    return;
  }
  float* dout = plan->dout;
  float* spare = dout == plan->grad_a.data() ? plan->grad_b.data() : plan->grad_a.data();
  for (int layer = static_cast<int>(plan->kernels.size()) - 1; layer >= 0; --layer) {
    const LayerFusion& fusion = plan->fusions[static_cast<size_t>(layer)];
    if (fusion.backward_in_reader || fusion.backward_in_producer) {
      // The next layer's backward computed this one's, its output being this layer's input
      // gradient, or the previous layer's will, from this layer's output gradient.
      if (on_layer_done) on_layer_done(layer);
      continue;
    }
    float* din = layer == 0 ? nullptr : spare;
    {
      const ProbeScope probe(probe_, layer, LayerProbe::Pass::kBackward, stream);
      backward_layer(*plan->kernels[static_cast<size_t>(layer)], layer, dout, din, stream);
      add_tied_gradients(layer, stream);
    }
    if (on_layer_done) on_layer_done(layer);
    spare = dout;
    dout = din;
  }
  plan->dout = nullptr;
}

void Model::set_sync(SyncGroup group, SyncSum sum) {
  SS_CHECK(plans_.empty(), "model '{}': set_sync after kernels were planned", def_.name);
  SS_CHECK(group.valid(), "model '{}': replica {} of {}", def_.name, group.rank, group.replicas);
  sync_group_ = group;
  sync_ = std::move(sum);
}

void Model::run_forward(LayerKernel& kernel, const float* in, float* out, Stream& stream) {
  const int points = sync_ ? kernel.sync_points(LayerKernel::Pass::kForward) : 0;
  if (points == 0) {
    kernel.forward(in, out, stream);
    return;
  }
  const TensorView values = kernel.sync_values(LayerKernel::Pass::kForward);
  for (int stage = 0; stage <= points; ++stage) {
    kernel.forward_stage(stage, in, out, stream);
    if (stage < points) sync_(values.data, values.numel(), false);
  }
}

void Model::run_backward(LayerKernel& kernel, const float* in, const float* out, const float* dout,
                         float* din, Stream& stream, bool adding) {
  const int points = sync_ ? kernel.sync_points(LayerKernel::Pass::kBackward) : 0;
  if (adding) {
    SS_CHECK(points == 0, "model '{}': a staged backward cannot add to its input's gradient",
             def_.name);
    kernel.backward_adding(in, out, dout, din, stream);
    return;
  }
  if (points == 0) {
    kernel.backward(in, out, dout, din, stream);
    return;
  }
  const TensorView values = kernel.sync_values(LayerKernel::Pass::kBackward);
  for (int stage = 0; stage <= points; ++stage) {
    kernel.backward_stage(stage, in, out, dout, din, stream);
    if (stage < points) sync_(values.data, values.numel(), true);
  }
}

// The gradient of a layer's output is the sum over its readers, in the order backward
// meets them (later layers first): the first reader writes it, the others add to it. With
// `relu_output`, `gradient` is a fused ReLU's output gradient, masked on the way.
void Model::add_gradient(int layer, const float* gradient, Stream& stream,
                         const kernel_math::ReluOutput* relu_output) {
  Plan& plan = *current_;
  float* target = plan.output_gradient(static_cast<size_t>(layer));
  const int64_t count = plan.batch * shapes_[static_cast<size_t>(layer) + 1].numel();
  const bool first = !plan.filled[static_cast<size_t>(layer)];
  if (relu_output != nullptr) {
    accumulate_relu_gradient_into(target, gradient, *relu_output, count, first, stream);
  } else {
    accumulate_into(target, gradient, count, first, stream);
  }
  plan.filled[static_cast<size_t>(layer)] = true;
}

void Model::add_tied_gradients(int layer, Stream& stream) {
  for (size_t a = 0; a < aliases_.size(); ++a) {
    const size_t p = aliases_[a].param;
    if (params_[p].layer != layer) continue;
    accumulate_into(grad(p).data, tied_grads_.data() + tied_offsets_[a],
                    params_[p].spec.shape.numel(), false, stream);
  }
}

// One layer's backward in a graph: its output's gradient to its inputs' (and its weights').
void Model::backward_graph_layer(int layer, Stream& stream) {
  Plan& plan = *current_;
  // A ReLU fused both ways has no backward of its own: its producer's starts from its gradient.
  if (plan.fusions[static_cast<size_t>(layer)].idle()) return;
  const float* dout = plan.gradient(plan.gradient_holder(static_cast<size_t>(layer)));
  const std::vector<int> from = layer_inputs(def_, layer);
  LayerKernel* kernel = plan.kernels[static_cast<size_t>(layer)].get();
  if (kernel == nullptr) {
    // Add passes its gradient to both inputs unchanged, or through the ReLU fused after it,
    // whose output (this layer's) the mask reads as kept, or under bf16 and fp16 from its
    // saved copy as it is.
    std::optional<kernel_math::ReluOutput> relu;
    if (plan.runs_relu_backward(static_cast<size_t>(layer))) {
      relu.emplace();
      if (plan.saved_format) {
        relu->saved = saved_copy(layer, layer);
        relu->format = *plan.saved_format;
      } else {
        relu->values = plan.outputs[static_cast<size_t>(layer)];
      }
    }
    for (const int input : from) {
      if (input == kModelInput) continue;
      // An input only this Add reads has its gradient in this Add's buffer already.
      if (plan.grad_alias[static_cast<size_t>(input)] >= 0) {
        plan.filled[static_cast<size_t>(input)] = true;
        continue;
      }
      add_gradient(input, dout, stream, relu ? &*relu : nullptr);
    }
    return;
  }
  const int input = from.front();
  const bool needs_din = input != kModelInput;
  // The first reader writes the input's gradient in place; a later one adds to it, in its
  // backward where the kernel can, else through scratch.
  const bool in_place = needs_din && !plan.filled[static_cast<size_t>(input)];
  const bool adding = needs_din && !in_place && adds_to_input_gradient(*kernel, layer);
  float* din = !needs_din           ? nullptr
               : in_place || adding ? plan.output_gradient(static_cast<size_t>(input))
                                    : plan.scratch[static_cast<size_t>(layer)];
  SS_CHECK(!needs_din || din != nullptr,
           "model '{}': layer {}'s backward has no scratch planned for its input's gradient",
           def_.name, layer);
  backward_layer(*kernel, layer, dout, din, stream, adding);
  if (in_place) plan.filled[static_cast<size_t>(input)] = true;
  if (needs_din && !in_place && !adding) add_gradient(input, din, stream);
  add_tied_gradients(layer, stream);
}

void Model::backward_graph(Stream& stream, const std::function<void(int layer)>& on_layer_done) {
  Plan& plan = *current_;
  const int last = static_cast<int>(plan.kernels.size()) - 1;
  plan.filled.assign(plan.kernels.size(), false);
  plan.filled[static_cast<size_t>(last)] = true;  // the loss wrote it
  for (int layer = last; layer >= 0; --layer) {
    {
      const ProbeScope probe(probe_, layer, LayerProbe::Pass::kBackward, stream);
      backward_graph_layer(layer, stream);
    }
    if (on_layer_done) on_layer_done(layer);
  }
  plan.dout = nullptr;
}

}  // namespace scalescope
