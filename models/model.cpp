#include "models/model.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "core/random.h"

namespace scalescope {

struct Model::Plan {
  int64_t batch = 0;
  std::vector<std::unique_ptr<LayerKernel>> kernels;
  std::vector<Tensor> activations;  // activations[i] = output of layer i
  Tensor grad_a;                    // ping-pong buffers for activation gradients
  Tensor grad_b;
  std::unique_ptr<LossKernel> loss;
  float* dout = nullptr;  // gradient w.r.t. the model output, set by the loss
};

Model::Model(ModelDef def, Shape input, Device& device, uint64_t seed)
    : def_(std::move(def)), device_(device) {
  SS_CHECK(!def_.layers.empty(), "model '{}' has no layers", def_.name);
  shapes_ = layer_shapes(def_, input);
  params_ = param_infos(def_, input);
  const Shape& out = shapes_.back();
  SS_CHECK(def_.loss != LossKind::kBinaryCrossEntropy || out == Shape{1},
           "model '{}': binary cross-entropy needs one output per sample, not {}", def_.name,
           out.to_string());
  SS_CHECK(out.rank() == 1, "model '{}' ends in shape {}; a loss needs a flat output", def_.name,
           out.to_string());

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

  // Initialisation on the host from one generator stream per parameter, so the values do
  // not depend on the backend, the layout or the order of construction.
  std::vector<std::vector<float>> host(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    const ParamSpec& p = params_[i].spec;
    host[i].assign(static_cast<size_t>(p.shape.numel()), 0.0f);
    if (p.fan_in == 0) continue;  // biases start at zero
    const float limit = std::sqrt(6.0f / static_cast<float>(p.fan_in + p.fan_out));
    Rng rng(seed, i);
    for (float& v : host[i]) v = rng.uniform(-limit, limit);
  }
  weights_from_host(host);
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

Model::Plan& Model::plan_for(int64_t batch) {
  SS_CHECK(batch > 0, "batch size {} must be positive", batch);
  auto it = plans_.find(batch);
  if (it != plans_.end()) return *it->second;

  auto plan = std::make_unique<Plan>();
  plan->batch = batch;
  KernelBackend& kernels = kernel_backend(device_.id().kind);
  int64_t max_act = shapes_.front().numel();
  for (size_t layer = 0; layer < def_.layers.size(); ++layer) {
    LayerBinding binding;
    binding.in = shapes_[layer].with_batch(batch);
    binding.out = shapes_[layer + 1].with_batch(batch);
    for (size_t i = 0; i < params_.size(); ++i) {
      if (params_[i].layer != static_cast<int>(layer)) continue;
      binding.params.push_back(param(i));
      binding.grads.push_back(grad(i));
    }
    plan->kernels.push_back(kernels.make_layer(def_.layers[layer], binding, device_));
    plan->activations.emplace_back(device_, binding.out);
    max_act = std::max(max_act, shapes_[layer + 1].numel());
  }
  plan->grad_a = Tensor(device_, Shape{batch * max_act});
  plan->grad_b = Tensor(device_, Shape{batch * max_act});
  plan->loss = kernels.make_loss(def_.loss, shapes_.back().with_batch(batch), device_);
  return *plans_.emplace(batch, std::move(plan)).first->second;
}

std::vector<std::vector<KernelChoice>> Model::kernel_choices(int64_t batch) const {
  const auto it = plans_.find(batch);
  SS_CHECK(it != plans_.end(), "model '{}' has no kernels planned for batch size {}", def_.name,
           batch);
  std::vector<std::vector<KernelChoice>> out;
  for (const std::unique_ptr<LayerKernel>& kernel : it->second->kernels)
    out.push_back(kernel->choices());
  return out;
}

void Model::forward(const float* input, int64_t batch, Stream& stream) {
  Plan& plan = plan_for(batch);
  current_ = &plan;
  input_ = input;
  const float* in = input;
  for (size_t layer = 0; layer < plan.kernels.size(); ++layer) {
    float* out = plan.activations[layer].data();
    plan.kernels[layer]->forward(in, out, stream);
    in = out;
  }
}

const float* Model::output() const {
  SS_CHECK(current_ != nullptr, "model output read before any forward");
  return current_->activations.back().data();
}

void Model::loss_forward_backward(const float* labels, float scale, float* loss, Stream& stream) {
  SS_CHECK(current_ != nullptr, "loss computed before any forward");
  current_->dout = current_->grad_a.data();
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
  float* dout = plan->dout;
  float* spare = dout == plan->grad_a.data() ? plan->grad_b.data() : plan->grad_a.data();
  for (int layer = static_cast<int>(plan->kernels.size()) - 1; layer >= 0; --layer) {
    const float* in =
        layer == 0 ? input_ : plan->activations[static_cast<size_t>(layer) - 1].data();
    const float* out = plan->activations[static_cast<size_t>(layer)].data();
    float* din = layer == 0 ? nullptr : spare;
    plan->kernels[static_cast<size_t>(layer)]->backward(in, out, dout, din, stream);
    if (on_layer_done) on_layer_done(layer);
    spare = dout;
    dout = din;
  }
  plan->dout = nullptr;
}

}  // namespace scalescope
