// The CPU kernels: oneDNN primitives for convolution, average pooling, inner product,
// activations and reorders; plain loops (OpenMP across the device's threads) for the rest.
// Max pooling is a plain loop too: oneDNN 2.6's training-mode max pool with its workspace
// measured 10x slower on cifar-cnn's shapes (3.6 ms vs 0.34 ms forward on 2 threads).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/cpu/cpu_device.h"
#include "models/kernels.h"

namespace scalescope {

// The makers take any device whose kernels run on the host: a CPU device, or a simulated
// device, whose stream workers run them (models/sim). They allocate through `device` and
// use its threads().
// cpu_layers.cpp
std::unique_ptr<LayerKernel> make_cpu_layer(const LayerSpec& spec, const LayerBinding& binding,
                                            Device& device);
// cpu_layers.cpp: KernelBackend::fuses_activation, fuses_relu_backward and
// fuses_relu_gradient of these kernels.
bool cpu_fuses_activation(const LayerSpec& layer, Activation activation);
bool cpu_fuses_relu_backward(const LayerSpec& producer);
bool cpu_fuses_relu_gradient(const LayerSpec& reader);
// cpu_weighted.cpp: convolutions and dense layers (oneDNN primitives); called by make_cpu_layer,
// which checks the binding.
std::unique_ptr<LayerKernel> make_cpu_conv(const Conv2DSpec& spec, const LayerBinding& binding,
                                           Device& device);
std::unique_ptr<LayerKernel> make_cpu_dense(const DenseSpec& spec, const LayerBinding& binding,
                                            Device& device);
// cpu_pool.cpp, cpu_shortcut.cpp and cpu_norm.cpp: called by make_cpu_layer, which checks the
// binding.
std::unique_ptr<LayerKernel> make_cpu_max_pool(const MaxPool2DSpec& spec,
                                               const LayerBinding& binding);
std::unique_ptr<LayerKernel> make_cpu_pad_shortcut(const PadShortcutSpec& spec,
                                                   const LayerBinding& binding);
std::unique_ptr<LayerKernel> make_cpu_batch_norm(const BatchNorm2DSpec& spec,
                                                 const LayerBinding& binding, Device& device);
// cpu_layer_norm.cpp, cpu_attention.cpp, cpu_embedding.cpp: the layers of GPT-style decoders;
// called by make_cpu_layer, which checks the binding.
std::unique_ptr<LayerKernel> make_cpu_layer_norm(const LayerNormSpec& spec,
                                                 const LayerBinding& binding, Device& device);
std::unique_ptr<LayerKernel> make_cpu_attention(const CausalSelfAttentionSpec& spec,
                                                const LayerBinding& binding, Device& device);
std::unique_ptr<LayerKernel> make_cpu_embedding(const EmbeddingSpec& spec,
                                                const LayerBinding& binding, Device& device);
std::unique_ptr<LayerKernel> make_cpu_position_embedding(const PositionEmbeddingSpec& spec,
                                                         const LayerBinding& binding,
                                                         Device& device);
// cpu_unary.cpp: activations (oneDNN eltwise; GELU's make_cpu_gelu), flatten and global average
// pooling; called by make_cpu_layer, which checks the binding.
std::unique_ptr<LayerKernel> make_cpu_eltwise(Activation kind, int64_t numel, Device& device);
// cpu_gelu.cpp: GELU over `numel` floats, reading and writing 16-bit saved copies under the
// precision current when it is made (bf16, fp16).
std::unique_ptr<LayerKernel> make_cpu_gelu(int64_t numel);
std::unique_ptr<LayerKernel> make_cpu_flatten(const Shape& in, Device& device);
std::unique_ptr<LayerKernel> make_cpu_global_avg_pool(const Shape& in, Device& device);
// cpu_dropout.cpp: called by make_cpu_layer, which checks the binding.
std::unique_ptr<LayerKernel> make_cpu_dropout(const DropoutSpec& spec, const LayerBinding& binding);
// cpu_bias_grad.cpp: a dense layer's bias gradient db from its output's gradient [rows,
// channels], fp32 (`dy`) or its bf16 copy (`dy_bf16`, dy null), in kernel_math/bias_math.h's
// order (the CUDA kernel's), across the calling thread's OpenMP team.
void bias_grad_cpu(const float* dy, const uint16_t* dy_bf16, int64_t rows, int64_t channels,
                   float* db);
// cpu_losses.cpp
std::unique_ptr<LossKernel> make_cpu_loss(LossKind kind, const Shape& output, Device& device);
// cpu_optimizers.cpp
std::unique_ptr<OptimizerKernel> make_cpu_optimizer(const OptimizerConfig& config, int64_t n,
                                                    Device& device);
// cpu_accumulate.cpp: accumulate_into() (models/kernels.h) on CPU memory, across the calling
// thread's OpenMP threads.
void accumulate_into_cpu(float* acc, const float* grads, int64_t count, bool first);
// cpu_accumulate.cpp: add_into() and accumulate_relu_gradient_into() (models/kernels.h) on CPU
// memory, across the calling thread's OpenMP team.
void add_into_cpu(float* out, const float* a, const float* b, int64_t count, bool relu,
                  const kernel_math::HalfRow& saved = {});
void accumulate_relu_gradient_cpu(float* acc, const float* grads,
                                  const kernel_math::ReluOutput& relu_output, int64_t count,
                                  bool first);
// cpu_accumulate.cpp: compress_gradients() and decompress_gradients() (models/kernels.h) on
// CPU memory, across the calling thread's OpenMP threads.
void compress_gradients_cpu(const float* grads, uint16_t* half, int64_t count, int replicas,
                            kernel_math::HalfFormat format);
void decompress_gradients_cpu(const uint16_t* half, float* grads, int64_t count,
                              kernel_math::HalfFormat format);
// cpu_accumulate.cpp: Σ values[i]² in double precision, across the calling thread's OpenMP
// threads (each adds up its share; the shares are added in order).
double squared_norm_cpu(const float* values, int64_t count);
// cpu_accumulate.cpp: round_to_fp16_span (cpu_half.h) across the calling thread's OpenMP team.
void round_to_fp16_cpu(const float* in, float* out, int64_t count);
// cpu_accumulate.cpp: unscale_gradients() (models/kernels.h) on CPU memory, across the calling
// thread's OpenMP team.
void unscale_gradients_cpu(float* grads, int64_t count, float inv_scale, float* found_inf);

// cpu_kernels.cpp: KernelBackend::precisions and precision_note of these kernels.
// oneDNN 2.6's bf16 kernels return with the upper halves of the vector registers dirty (no
// VZEROUPPER) on every thread that ran them, and the SSE code the compiler makes of our loops
// for x86-64's baseline (the optimizers, the casts, the element-wise passes) then runs several
// times slower on those threads: each SSE instruction waits to merge the upper bits. Measured:
// SGD over mlp-41m's 41M parameters on one thread, 10.4 ms after fp32 kernels, 30.3 after bf16
// ones. Clears them on the calling thread's OpenMP team (the threads oneDNN ran on); nothing
// on a CPU without AVX.
void clear_vector_upper_halves();
std::vector<Precision> cpu_precisions();
std::string cpu_precision_note(Precision precision);
std::string cpu_precision_refusal(Precision precision);

class CpuKernelBackend final : public KernelBackend {
 public:
  DeviceKind kind() const override { return DeviceKind::kCpu; }
  std::vector<LibraryVersion> library_versions() const override;  // oneDNN
  std::vector<Precision> precisions() const override { return cpu_precisions(); }
  std::string precision_note(Precision precision) const override {
    return cpu_precision_note(precision);
  }
  std::string precision_refusal(Precision precision) const override {
    return cpu_precision_refusal(precision);
  }
  bool fuses_activation(const LayerSpec& layer, Activation activation) const override {
    return cpu_fuses_activation(layer, activation);
  }
  bool fuses_relu_backward(const LayerSpec& producer) const override {
    return cpu_fuses_relu_backward(producer);
  }
  bool fuses_relu_gradient(const LayerSpec& reader) const override {
    return cpu_fuses_relu_gradient(reader);
  }
  std::unique_ptr<LayerKernel> make_layer(const LayerSpec& spec, const LayerBinding& binding,
                                          Device& device) override {
    return make_cpu_layer(spec, binding, cpu(device));
  }
  std::unique_ptr<LossKernel> make_loss(LossKind kind, const Shape& output,
                                        Device& device) override {
    return make_cpu_loss(kind, output, cpu(device));
  }
  std::unique_ptr<OptimizerKernel> make_optimizer(const OptimizerConfig& config, int64_t n,
                                                  Device& device) override {
    return make_cpu_optimizer(config, n, cpu(device));
  }
  // On the calling thread: work on a CPU stream runs inline.
  void accumulate(float* acc, const float* grads, int64_t count, bool first,
                  Stream& /*stream*/) override {
    accumulate_into_cpu(acc, grads, count, first);
  }
  void add(float* out, const float* a, const float* b, int64_t count, bool relu,
           const kernel_math::HalfRow& saved, Stream& /*stream*/) override {
    add_into_cpu(out, a, b, count, relu, saved);
  }
  void accumulate_relu_gradient(float* acc, const float* grads,
                                const kernel_math::ReluOutput& relu_output, int64_t count,
                                bool first, Stream& /*stream*/) override {
    accumulate_relu_gradient_cpu(acc, grads, relu_output, count, first);
  }
  void compress(const float* grads, uint16_t* half, int64_t count, int replicas,
                kernel_math::HalfFormat format, Stream& /*stream*/) override {
    compress_gradients_cpu(grads, half, count, replicas, format);
  }
  void decompress(const uint16_t* half, float* grads, int64_t count, kernel_math::HalfFormat format,
                  Stream& /*stream*/) override {
    decompress_gradients_cpu(half, grads, count, format);
  }
  void squared_norm(const float* values, int64_t count, double* out, Stream& /*stream*/) override {
    *out = squared_norm_cpu(values, count);
  }
  void unscale(float* grads, int64_t count, float inv_scale, float* found_inf,
               Stream& /*stream*/) override {
    unscale_gradients_cpu(grads, count, inv_scale, found_inf);
  }

 private:
  // REQUIRES: a CPU device; throws Error otherwise.
  static Device& cpu(Device& device);
};

}  // namespace scalescope
