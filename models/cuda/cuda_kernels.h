// The CUDA kernels: cuDNN for convolution, cuBLAS for dense layers, and kernels of our own
// (models/cuda/*.cu) for the rest: bias, activations, pooling, flatten, losses, accuracy,
// the fused optimizer updates and gradient accumulation. They compute the functions of the
// CPU kernels (models/cpu) on the same layouts, so that a model trains the same on either.
//
// Every kernel plans at construction (cuDNN algorithms, workspaces, library handles), so a
// training step allocates nothing and never synchronizes the host. The cuDNN and cuBLAS
// handles are shared by the kernels one thread builds for one device (CudaLibraries, in
// cuda_libraries.h) and die with the last of them.
//
// Status: compiled on every CUDA build; tests/models/cuda_kernels_test.cpp compares each op
// with the CPU kernels and skips without a GPU.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/cuda/cuda_device.h"
#include "models/kernels.h"

namespace scalescope {

// cuda_layers.cpp: whether a ReLU after `producer` runs inside its kernel both ways
// (KernelBackend::fuses_activation and fuses_relu_backward): the batch norm's.
bool cuda_fuses_relu(const LayerSpec& producer);
// cuda_layers.cpp
std::unique_ptr<LayerKernel> make_cuda_layer(const LayerSpec& spec, const LayerBinding& binding,
                                             CudaDevice& device);
// cuda_dense.cpp
std::unique_ptr<LayerKernel> make_cuda_dense(const DenseSpec& dense, const LayerSpec& spec,
                                             const LayerBinding& binding, CudaDevice& device);
// cuda_conv.cpp
std::unique_ptr<LayerKernel> make_cuda_conv(const Conv2DSpec& conv, const LayerSpec& spec,
                                            const LayerBinding& binding, CudaDevice& device);
// cuda_norm.cpp: batch normalization and the option-A shortcut of CIFAR ResNets; called by
// make_cuda_layer, which checks the binding.
std::unique_ptr<LayerKernel> make_cuda_batch_norm(const BatchNorm2DSpec& spec,
                                                  const LayerBinding& binding, CudaDevice& device);
std::unique_ptr<LayerKernel> make_cuda_pad_shortcut(const PadShortcutSpec& spec,
                                                    const LayerBinding& binding);
// cuda_layer_norm.cpp, cuda_attention.cpp, cuda_embedding.cpp: the layers of GPT-style
// decoders; called by make_cuda_layer, which checks the binding.
std::unique_ptr<LayerKernel> make_cuda_layer_norm(const LayerNormSpec& spec,
                                                  const LayerBinding& binding, CudaDevice& device);
std::unique_ptr<LayerKernel> make_cuda_attention(const CausalSelfAttentionSpec& spec,
                                                 const LayerBinding& binding, CudaDevice& device);
std::unique_ptr<LayerKernel> make_cuda_embedding(const EmbeddingSpec& spec,
                                                 const LayerBinding& binding, CudaDevice& device);
std::unique_ptr<LayerKernel> make_cuda_position_embedding(const PositionEmbeddingSpec& spec,
                                                          const LayerBinding& binding,
                                                          CudaDevice& device);
// cuda_losses.cpp
std::unique_ptr<LossKernel> make_cuda_loss(LossKind kind, const Shape& output, CudaDevice& device);
// cuda_optimizers.cpp
std::unique_ptr<OptimizerKernel> make_cuda_optimizer(const OptimizerConfig& config, int64_t n,
                                                     CudaDevice& device);
// cuda_optimizers.cpp: accumulate_into() (models/kernels.h) on device memory, on `stream`.
void accumulate_into_cuda(float* acc, const float* grads, int64_t count, bool first,
                          Stream& stream);
// cuda_optimizers.cpp: add_into() and accumulate_relu_gradient_into() (models/kernels.h) on
// device memory, on `stream`.
void add_into_cuda(float* out, const float* a, const float* b, int64_t count, bool relu,
                   const kernel_math::HalfRow& saved, Stream& stream);
void accumulate_relu_gradient_cuda(float* acc, const float* grads,
                                   const kernel_math::ReluOutput& relu_output, int64_t count,
                                   bool first, Stream& stream);
// cuda_optimizers.cpp: compress_gradients() and decompress_gradients() (models/kernels.h) on
// device memory, on `stream`.
void compress_gradients_cuda(const float* grads, uint16_t* half, int64_t count, int replicas,
                             kernel_math::HalfFormat format, Stream& stream);
void decompress_gradients_cuda(const uint16_t* half, float* grads, int64_t count,
                               kernel_math::HalfFormat format, Stream& stream);
// cuda_optimizers.cpp: squared_norm() (models/kernels.h) on device memory, on `stream`.
void squared_norm_cuda(const float* values, int64_t count, double* out, Stream& stream);
// cuda_optimizers.cpp: unscale_gradients() (models/kernels.h) on device memory, on `stream`.
void unscale_gradients_cuda(float* grads, int64_t count, float inv_scale, float* found_inf,
                            Stream& stream);

class CudaKernelBackend final : public KernelBackend {
 public:
  DeviceKind kind() const override { return DeviceKind::kCuda; }
  std::vector<LibraryVersion> library_versions() const override;  // cuDNN and cuBLAS
  std::vector<Precision> precisions() const override {
    return {Precision::kTf32, Precision::kFp32, Precision::kBf16, Precision::kFp16};
  }
  std::string precision_note(Precision precision) const override;
  bool has_nondeterministic() const override { return true; }
  bool fuses_activation(const LayerSpec& layer, Activation activation) const override {
    return activation == Activation::kRelu && cuda_fuses_relu(layer);
  }
  bool fuses_relu_backward(const LayerSpec& producer) const override {
    return cuda_fuses_relu(producer);
  }
  std::unique_ptr<LayerKernel> make_layer(const LayerSpec& spec, const LayerBinding& binding,
                                          Device& device) override {
    return make_cuda_layer(spec, binding, cuda(device));
  }
  std::unique_ptr<LossKernel> make_loss(LossKind kind, const Shape& output,
                                        Device& device) override {
    return make_cuda_loss(kind, output, cuda(device));
  }
  std::unique_ptr<OptimizerKernel> make_optimizer(const OptimizerConfig& config, int64_t n,
                                                  Device& device) override {
    return make_cuda_optimizer(config, n, cuda(device));
  }
  void accumulate(float* acc, const float* grads, int64_t count, bool first,
                  Stream& stream) override {
    accumulate_into_cuda(acc, grads, count, first, stream);
  }
  void add(float* out, const float* a, const float* b, int64_t count, bool relu,
           const kernel_math::HalfRow& saved, Stream& stream) override {
    add_into_cuda(out, a, b, count, relu, saved, stream);
  }
  void accumulate_relu_gradient(float* acc, const float* grads,
                                const kernel_math::ReluOutput& relu_output, int64_t count,
                                bool first, Stream& stream) override {
    accumulate_relu_gradient_cuda(acc, grads, relu_output, count, first, stream);
  }
  void compress(const float* grads, uint16_t* half, int64_t count, int replicas,
                kernel_math::HalfFormat format, Stream& stream) override {
    compress_gradients_cuda(grads, half, count, replicas, format, stream);
  }
  void decompress(const uint16_t* half, float* grads, int64_t count, kernel_math::HalfFormat format,
                  Stream& stream) override {
    decompress_gradients_cuda(half, grads, count, format, stream);
  }
  void squared_norm(const float* values, int64_t count, double* out, Stream& stream) override {
    squared_norm_cuda(values, count, out, stream);
  }
  void unscale(float* grads, int64_t count, float inv_scale, float* found_inf,
               Stream& stream) override {
    unscale_gradients_cuda(grads, count, inv_scale, found_inf, stream);
  }

 private:
  static CudaDevice& cuda(Device& device);
};

}  // namespace scalescope
