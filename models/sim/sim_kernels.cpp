#include "models/sim/sim_kernels.h"

#include "core/check.h"
#include "core/sim/sim_device.h"
#include "models/cpu/cpu_kernels.h"

namespace scalescope {
namespace {

SimDevice& sim(Device& device) {
  auto* s = dynamic_cast<SimDevice*>(&device);
  SS_CHECK(s != nullptr, "simulated-device kernels asked for on {}", to_string(device.id()));
  return *s;
}

// Each call of a CPU kernel becomes a launch on the stream it names. Pointers are captured,
// and the kernel is shared with its launches, so that work still queued when the kernel's
// owner goes away can run (as a GPU finishes a launch whose host objects are gone); the
// stream is captured by reference (a stream outlives the work queued on it).
class SimLayer final : public LayerKernel {
 public:
  SimLayer(SimDevice& device, std::unique_ptr<LayerKernel> cpu)
      : device_(device), cpu_(std::move(cpu)) {}
  void forward(const float* in, float* out, Stream& stream) override {
    device_.launch(stream, [k = cpu_, in, out, &stream] { k->forward(in, out, stream); });
  }
  void forward_eval(const float* in, float* out, Stream& stream) override {
    device_.launch(stream, [k = cpu_, in, out, &stream] { k->forward_eval(in, out, stream); });
  }
  void backward(const float* in, const float* out, const float* dout, float* din,
                Stream& stream) override {
    device_.launch(stream, [k = cpu_, in, out, dout, din, &stream] {
      k->backward(in, out, dout, din, stream);
    });
  }
  bool adds_input_gradient() const override { return cpu_->adds_input_gradient(); }
  void backward_adding(const float* in, const float* out, const float* dout, float* din,
                       Stream& stream) override {
    device_.launch(stream, [k = cpu_, in, out, dout, din, &stream] {
      k->backward_adding(in, out, dout, din, stream);
    });
  }
  bool reads_saved(kernel_math::HalfFormat format) const override {
    return cpu_->reads_saved(format);
  }
  bool forwards_from_saved(kernel_math::HalfFormat format) const override {
    return cpu_->forwards_from_saved(format);
  }
  void forward_saved(const uint16_t* in, float* out, Stream& stream) override {
    device_.launch(stream, [k = cpu_, in, out, &stream] { k->forward_saved(in, out, stream); });
  }
  SavedOutput forwards_into_saved(kernel_math::HalfFormat format) const override {
    return cpu_->forwards_into_saved(format);
  }
  void forward_into_saved(const float* in, const uint16_t* saved_in, uint16_t* out,
                          kernel_math::HalfFormat format, Stream& stream) override {
    device_.launch(stream, [k = cpu_, in, saved_in, out, format, &stream] {
      k->forward_into_saved(in, saved_in, out, format, stream);
    });
  }
  void backward_saved(const uint16_t* in, const uint16_t* out, const float* dout, float* din,
                      Stream& stream) override {
    device_.launch(stream, [k = cpu_, in, out, dout, din, &stream] {
      k->backward_saved(in, out, dout, din, stream);
    });
  }
  bool adds_input_gradient_from_saved(kernel_math::HalfFormat format) const override {
    return cpu_->adds_input_gradient_from_saved(format);
  }
  void backward_saved_adding(const uint16_t* in, const uint16_t* out, const float* dout, float* din,
                             Stream& stream) override {
    device_.launch(stream, [k = cpu_, in, out, dout, din, &stream] {
      k->backward_saved_adding(in, out, dout, din, stream);
    });
  }
  bool reads_half_gradient(kernel_math::HalfFormat format) const override {
    return cpu_->reads_half_gradient(format);
  }
  void backward_from_half_gradient(const uint16_t* in, const uint16_t* out, const uint16_t* dout,
                                   float* din, Stream& stream) override {
    device_.launch(stream, [k = cpu_, in, out, dout, din, &stream] {
      k->backward_from_half_gradient(in, out, dout, din, stream);
    });
  }
  bool writes_half_gradient(kernel_math::HalfFormat format) const override {
    return cpu_->writes_half_gradient(format);
  }
  void backward_into_half_gradient(const uint16_t* in, const uint16_t* out, const float* dout,
                                   uint16_t* din, Stream& stream) override {
    device_.launch(stream, [k = cpu_, in, out, dout, din, &stream] {
      k->backward_into_half_gradient(in, out, dout, din, stream);
    });
  }
  // The stages are launches like the passes; the model enqueues the all-reduce between them.
  int sync_points(Pass pass) const override { return cpu_->sync_points(pass); }
  TensorView sync_values(Pass pass) const override { return cpu_->sync_values(pass); }
  void forward_stage(int stage, const float* in, float* out, Stream& stream) override {
    device_.launch(
        stream, [k = cpu_, stage, in, out, &stream] { k->forward_stage(stage, in, out, stream); });
  }
  void backward_stage(int stage, const float* in, const float* out, const float* dout, float* din,
                      Stream& stream) override {
    device_.launch(stream, [k = cpu_, stage, in, out, dout, din, &stream] {
      k->backward_stage(stage, in, out, dout, din, stream);
    });
  }
  // Fixed at construction, read on the host: no need to go through the stream.
  std::vector<KernelChoice> choices() const override { return cpu_->choices(); }

 private:
  SimDevice& device_;
  std::shared_ptr<LayerKernel> cpu_;
};

class SimLoss final : public LossKernel {
 public:
  SimLoss(SimDevice& device, std::unique_ptr<LossKernel> cpu)
      : device_(device), cpu_(std::move(cpu)) {}
  void forward_backward(const float* output, const float* labels, float scale, float* loss,
                        float* dout, Stream& stream) override {
    device_.launch(stream, [k = cpu_, output, labels, scale, loss, dout, &stream] {
      k->forward_backward(output, labels, scale, loss, dout, stream);
    });
  }
  void forward(const float* output, const float* labels, float scale, float* loss,
               Stream& stream) override {
    device_.launch(stream, [k = cpu_, output, labels, scale, loss, &stream] {
      k->forward(output, labels, scale, loss, stream);
    });
  }
  void count_correct(const float* output, const float* labels, float* correct,
                     Stream& stream) override {
    device_.launch(stream, [k = cpu_, output, labels, correct, &stream] {
      k->count_correct(output, labels, correct, stream);
    });
  }

 private:
  SimDevice& device_;
  std::shared_ptr<LossKernel> cpu_;
};

class SimOptimizer final : public OptimizerKernel {
 public:
  SimOptimizer(SimDevice& device, std::unique_ptr<OptimizerKernel> cpu)
      : device_(device), cpu_(std::move(cpu)) {}
  void update(float* params, const float* grads, float lr, int64_t step, Stream& stream) override {
    device_.launch(stream, [k = cpu_, params, grads, lr, step, &stream] {
      k->update(params, grads, lr, step, stream);
    });
  }
  std::vector<TensorView> state() const override { return cpu_->state(); }
  // The CPU kernel reads the flag when its launch runs, in stream order.
  void skip_when(const float* flag) override { cpu_->skip_when(flag); }

 private:
  SimDevice& device_;
  std::shared_ptr<OptimizerKernel> cpu_;
};

}  // namespace

std::vector<LibraryVersion> SimKernelBackend::library_versions() const {
  return CpuKernelBackend().library_versions();
}

// The CPU kernels' precisions, and fp16 emulated (dnnl_kernel.h emulates_fp16): so that the
// loss scaling GPUs need for fp16 runs here, on the GPU path's orchestration.
std::vector<Precision> SimKernelBackend::precisions() const {
  std::vector<Precision> p = cpu_precisions();
  p.push_back(Precision::kFp16);
  return p;
}

std::string SimKernelBackend::precision_refusal(Precision precision) const {
  return precision == Precision::kFp16 ? "" : cpu_precision_refusal(precision);
}

std::string SimKernelBackend::precision_note(Precision precision) const {
  if (precision == Precision::kFp16) {
    return "simulated devices emulate fp16: the CPU kernels multiply operands rounded to fp16 "
           "values in fp32 (fp16's range and rounding, not its speed)";
  }
  return cpu_precision_note(precision);
}

bool SimKernelBackend::fuses_activation(const LayerSpec& layer, Activation activation) const {
  return cpu_fuses_activation(layer, activation);
}

bool SimKernelBackend::fuses_relu_backward(const LayerSpec& producer) const {
  return cpu_fuses_relu_backward(producer);
}

bool SimKernelBackend::fuses_relu_gradient(const LayerSpec& reader) const {
  return cpu_fuses_relu_gradient(reader);
}

std::unique_ptr<LayerKernel> SimKernelBackend::make_layer(const LayerSpec& spec,
                                                          const LayerBinding& binding,
                                                          Device& device) {
  return std::make_unique<SimLayer>(sim(device), make_cpu_layer(spec, binding, device));
}

std::unique_ptr<LossKernel> SimKernelBackend::make_loss(LossKind kind, const Shape& output,
                                                        Device& device) {
  return std::make_unique<SimLoss>(sim(device), make_cpu_loss(kind, output, device));
}

std::unique_ptr<OptimizerKernel> SimKernelBackend::make_optimizer(const OptimizerConfig& config,
                                                                  int64_t n, Device& device) {
  return std::make_unique<SimOptimizer>(sim(device), make_cpu_optimizer(config, n, device));
}

void SimKernelBackend::accumulate(float* acc, const float* grads, int64_t count, bool first,
                                  Stream& stream) {
  sim(stream.device()).launch(stream, [=] { accumulate_into_cpu(acc, grads, count, first); });
}

void SimKernelBackend::add(float* out, const float* a, const float* b, int64_t count, bool relu,
                           const kernel_math::HalfRow& saved, Stream& stream) {
  sim(stream.device()).launch(stream, [=] { add_into_cpu(out, a, b, count, relu, saved); });
}

void SimKernelBackend::accumulate_relu_gradient(float* acc, const float* grads,
                                                const kernel_math::ReluOutput& relu_output,
                                                int64_t count, bool first, Stream& stream) {
  sim(stream.device()).launch(stream, [=] {
    accumulate_relu_gradient_cpu(acc, grads, relu_output, count, first);
  });
}

void SimKernelBackend::compress(const float* grads, uint16_t* half, int64_t count, int replicas,
                                kernel_math::HalfFormat format, Stream& stream) {
  sim(stream.device()).launch(stream, [=] {
    compress_gradients_cpu(grads, half, count, replicas, format);
  });
}

void SimKernelBackend::decompress(const uint16_t* half, float* grads, int64_t count,
                                  kernel_math::HalfFormat format, Stream& stream) {
  sim(stream.device()).launch(stream, [=] {
    decompress_gradients_cpu(half, grads, count, format);
  });
}

void SimKernelBackend::squared_norm(const float* values, int64_t count, double* out,
                                    Stream& stream) {
  sim(stream.device()).launch(stream, [=] { *out = squared_norm_cpu(values, count); });
}

void SimKernelBackend::unscale(float* grads, int64_t count, float inv_scale, float* found_inf,
                               Stream& stream) {
  sim(stream.device()).launch(stream, [=] {
    unscale_gradients_cpu(grads, count, inv_scale, found_inf);
  });
}

}  // namespace scalescope
