// Token and position embeddings on our kernels (embedding_ops.cu). The token embedding owns
// the scratch of its gradient's sort, allocated at construction.
#include <memory>

#include "core/buffer.h"
#include "core/check.h"
#include "models/cuda/cuda_kernels.h"
#include "models/cuda/cuda_layer_util.h"
#include "models/cuda/embedding_ops.h"

namespace scalescope {
namespace {

class EmbeddingKernel final : public LayerKernel {
 public:
  EmbeddingKernel(const EmbeddingSpec& spec, const LayerBinding& b, CudaDevice& device)
      : vocab_(spec.vocab),
        dim_(spec.dim),
        tokens_(b.in.numel()),
        weight_(b.params[0].data),
        grad_(b.grads[0].data),
        scratch_bytes_(cuda_ops::embedding_backward_scratch(tokens_, vocab_)),
        scratch_(device, scratch_bytes_) {
    // The sort's keys, positions and item count are ints.
    to_int(tokens_, "the batch's token count", LayerSpec(spec));
    to_int(vocab_, "the vocabulary", LayerSpec(spec));
  }

  void forward(const float* in, float* out, Stream& stream) override {
    cuda_ops::embedding_forward(in, weight_, out, tokens_, vocab_, dim_, cuda_stream(stream));
  }

  void backward(const float* in, const float*, const float* dout, float* din,
                Stream& stream) override {
    const cudaStream_t s = cuda_stream(stream);
    SS_CHECK_CUDA(cudaMemsetAsync(grad_, 0, static_cast<size_t>(vocab_ * dim_) * sizeof(float), s));
    SS_CHECK_CUDA(cuda_ops::embedding_backward(in, dout, grad_, tokens_, vocab_, dim_,
                                               scratch_.data(), scratch_bytes_, s));
    if (din == nullptr) return;  // token ids have no gradient: zeros
    SS_CHECK_CUDA(cudaMemsetAsync(din, 0, static_cast<size_t>(tokens_) * sizeof(float), s));
  }

 private:
  int64_t vocab_, dim_, tokens_;
  const float* weight_;
  float* grad_;
  size_t scratch_bytes_;
  DeviceBuffer scratch_;
};

class PositionEmbeddingKernel final : public LayerKernel {
 public:
  explicit PositionEmbeddingKernel(const LayerBinding& b)
      : batch_(b.in[0]),
        row_(b.in[1] * b.in[2]),
        weight_(b.params[0].data),
        grad_(b.grads[0].data) {}

  void forward(const float* in, float* out, Stream& stream) override {
    cuda_ops::position_embedding_forward(in, weight_, out, batch_, row_, cuda_stream(stream));
  }

  void backward(const float*, const float*, const float* dout, float* din,
                Stream& stream) override {
    const cudaStream_t s = cuda_stream(stream);
    cuda_ops::position_embedding_backward(dout, grad_, batch_, row_, s);
    if (din == nullptr) return;
    SS_CHECK_CUDA(cudaMemcpyAsync(din, dout, static_cast<size_t>(batch_ * row_) * sizeof(float),
                                  cudaMemcpyDeviceToDevice, s));
  }

 private:
  int64_t batch_, row_;
  const float* weight_;
  float* grad_;
};

}  // namespace

std::unique_ptr<LayerKernel> make_cuda_embedding(const EmbeddingSpec& spec,
                                                 const LayerBinding& binding, CudaDevice& device) {
  return std::make_unique<EmbeddingKernel>(spec, binding, device);
}

std::unique_ptr<LayerKernel> make_cuda_position_embedding(const PositionEmbeddingSpec& /*spec*/,
                                                          const LayerBinding& binding,
                                                          CudaDevice& /*device*/) {
  return std::make_unique<PositionEmbeddingKernel>(binding);
}

}  // namespace scalescope
