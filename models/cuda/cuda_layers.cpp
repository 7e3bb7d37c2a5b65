// The CUDA layer kernels: cuBLAS GEMMs for dense layers, our kernels (layer_ops.cu) for bias,
// activations, pooling and flatten; convolution on cuDNN is in cuda_conv.cpp.
//
// Every kernel is planned completely in its constructor: descriptors, cuDNN algorithms and
// their workspace, scratch and internal weight copies. forward() and backward() only bind the
// library handles to the caller's stream and enqueue work: no allocation, no host
// synchronization.
//
// Layouts are the CPU kernels': activations NHWC (4-D) or [N, features], parameters in
// PyTorch's layout (conv OIHW, dense [out, in]).
#include <cublas_v2.h>
#include <cudnn.h>

#include <cstdint>
#include <memory>
#include <variant>
#include <vector>

#include "core/buffer.h"
#include "core/check.h"
#include "core/overloaded.h"
#include "models/cuda/cuda_kernels.h"
#include "models/cuda/cuda_layer_util.h"
#include "models/cuda/cuda_libraries.h"
#include "models/cuda/cuda_ops.h"

namespace scalescope {
namespace {

// ---- dense

// y = x·Wᵀ + b with x [N, in] and W [out, in] row-major, N the rows: the samples, or every
// position of every sample for sequences [batch, S, in]. cuBLAS is column-major, where these
// buffers read as xᵀ [in, N], W as Wᵀ [in, out] and y as yᵀ [out, N]:
//   forward   yᵀ  = W·xᵀ       gemm(T, N), m = out, n = N,  k = in
//   weights   dWᵀ = xᵀ·dy      gemm(N, T), m = in,  n = out, k = N   (dW [out, in] row-major)
//   data      dxᵀ = Wᵀ·dyᵀ     gemm(N, N), m = in,  n = N,  k = out
class DenseKernel final : public LayerKernel {
 public:
  DenseKernel(const DenseSpec& d, const LayerSpec& spec, const LayerBinding& b, CudaDevice& device)
      : libraries_(cuda_libraries(device)),
        rows_(to_int(b.in.numel() / b.in[b.in.rank() - 1], "the rows", spec)),
        in_(to_int(b.in[b.in.rank() - 1], "the input features", spec)),
        units_(to_int(d.units, "the units", spec)),
        // Chosen per kernel, not on the shared handle: see CublasHandle.
        compute_(allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F),
        weight_(b.params[0].data),
        bias_(d.bias ? b.params[1].data : nullptr),
        weight_grad_(b.grads[0].data),
        bias_grad_(d.bias ? b.grads[1].data : nullptr),
        bias_scratch_(
            float_buffer(device, d.bias ? cuda_ops::bias_grad_scratch(rows_, units_) : 0)) {}

  void forward(const float* in, float* out, Stream& stream) override {
    const cudaStream_t s = cuda_stream(stream);
    gemm(s, CUBLAS_OP_T, CUBLAS_OP_N, units_, rows_, in_, weight_, in_, in, in_, out, units_);
    if (bias_ != nullptr) cuda_ops::bias_add(out, bias_, rows_, units_, s);
  }

  void backward(const float* in, const float*, const float* dout, float* din,
                Stream& stream) override {
    const cudaStream_t s = cuda_stream(stream);
    gemm(s, CUBLAS_OP_N, CUBLAS_OP_T, in_, units_, rows_, in, in_, dout, units_, weight_grad_, in_);
    if (bias_grad_ != nullptr) {
      cuda_ops::bias_grad(dout, bias_grad_, rows_, units_, floats(bias_scratch_), s);
    }
    if (din == nullptr) return;  // first layer: nobody needs the input's gradient
    gemm(s, CUBLAS_OP_N, CUBLAS_OP_N, in_, rows_, units_, weight_, in_, dout, units_, din, in_);
  }

  // cuBLAS picks its GEMM kernel itself (CUBLAS_GEMM_DEFAULT); with atomics not allowed (a
  // handle's default) its results are bit-identical run after run on one GPU.
  std::vector<KernelChoice> choices() const override {
    const char* math = compute_ == CUBLAS_COMPUTE_32F_FAST_TF32 ? "CUBLAS_COMPUTE_32F_FAST_TF32"
                                                                : "CUBLAS_COMPUTE_32F";
    std::vector<KernelChoice> out;
    for (const char* pass : {"forward", "backward-weights", "backward-data"})
      out.push_back({pass, "cublasGemmEx CUBLAS_GEMM_DEFAULT", math, "NC", true, 0});
    return out;
  }

 private:
  // c = op(a)·op(b), overwriting c.
  void gemm(cudaStream_t s, cublasOperation_t op_a, cublasOperation_t op_b, int m, int n, int k,
            const float* a, int lda, const float* b, int ldb, float* c, int ldc) const {
    const float one = 1.0f;
    const float zero = 0.0f;
    SS_CHECK_CUBLAS(cublasGemmEx(libraries_->cublas(s), op_a, op_b, m, n, k, &one, a, CUDA_R_32F,
                                 lda, b, CUDA_R_32F, ldb, &zero, c, CUDA_R_32F, ldc, compute_,
                                 CUBLAS_GEMM_DEFAULT));
  }

  std::shared_ptr<CudaLibraries> libraries_;
  int rows_, in_, units_;
  cublasComputeType_t compute_;
  const float* weight_;
  const float* bias_;  // null without a bias, as bias_grad_
  float* weight_grad_;
  float* bias_grad_;
  DeviceBuffer bias_scratch_;
};

// ---- layers without parameters: our kernels

// Element-wise activations, in our kernels rather than cuDNN's so that the functions are the
// CPU's exactly (relu passing NaN, derivatives taken from the output) and GELU is PyTorch's.
class ActivationKernel final : public LayerKernel {
 public:
  ActivationKernel(Activation kind, int64_t count) : kind_(kind), count_(count) {}

  void forward(const float* in, float* out, Stream& stream) override {
    cuda_ops::activation_forward(kind_, in, out, count_, cuda_stream(stream));
  }
  void backward(const float* in, const float* out, const float* dout, float* din,
                Stream& stream) override {
    if (din == nullptr) return;  // no parameters: nothing to do without the input's gradient
    cuda_ops::activation_backward(kind_, in, out, dout, din, count_, cuda_stream(stream));
  }

 private:
  Activation kind_;
  int64_t count_;
};

// Dropout: each training forward draws the next pass's mask (kernel_math/dropout_math.h, the
// CPU kernel's), and the backward that follows applies it again.
class DropoutKernel final : public LayerKernel {
 public:
  DropoutKernel(const DropoutSpec& spec, int64_t count)
      : spec_(spec), scale_(1.0f / (1.0f - spec.rate)), count_(count) {}

  void forward(const float* in, float* out, Stream& stream) override {
    ++pass_;
    cuda_ops::dropout(in, out, count_, spec_.rate, scale_, spec_.seed, pass_, cuda_stream(stream));
  }
  void forward_eval(const float* in, float* out, Stream& stream) override {
    SS_CHECK_CUDA(cudaMemcpyAsync(out, in, static_cast<size_t>(count_) * sizeof(float),
                                  cudaMemcpyDeviceToDevice, cuda_stream(stream)));
  }
  void backward(const float*, const float*, const float* dout, float* din,
                Stream& stream) override {
    if (din == nullptr) return;
    cuda_ops::dropout(dout, din, count_, spec_.rate, scale_, spec_.seed, pass_,
                      cuda_stream(stream));
  }

 private:
  DropoutSpec spec_;
  float scale_;
  int64_t count_;
  uint64_t pass_ = 0;
};

// Max pooling in our kernels rather than cuDNN's: cuDNN's backward may split the gradient of
// tied inputs differently, where ours sends it to the same input as the CPU kernel (the first
// maximum of the window); NaN wins as there. No workspace: backward finds each window's
// maximum again from `in` and `out`.
class MaxPoolKernel final : public LayerKernel {
 public:
  MaxPoolKernel(const MaxPool2DSpec& p, const Shape& in, const Shape& out)
      : shape_{in[0], in[1], in[2], in[3], out[1], out[2], p.pool, p.stride, p.pad} {}

  void forward(const float* in, float* out, Stream& stream) override {
    cuda_ops::max_pool_forward(shape_, in, out, cuda_stream(stream));
  }
  void backward(const float* in, const float* out, const float* dout, float* din,
                Stream& stream) override {
    if (din == nullptr) return;  // no parameters: nothing to do without the input's gradient
    cuda_ops::max_pool_backward(shape_, in, out, dout, din, cuda_stream(stream));
  }

 private:
  cuda_ops::PoolShape shape_;
};

// Flatten restores PyTorch's per-sample (C, H, W) order from NHWC: a transpose of each sample's
// [H·W, C] matrix, and the inverse backward. Inputs that are not images are already in order
// and are copied.
class FlattenKernel final : public LayerKernel {
 public:
  explicit FlattenKernel(const Shape& in)
      : image_(in.rank() == 4),
        batch_(in[0]),
        pixels_(image_ ? in[1] * in[2] : 0),
        channels_(image_ ? in[3] : 0),
        bytes_(static_cast<size_t>(in.numel()) * sizeof(float)) {}

  void forward(const float* in, float* out, Stream& stream) override {
    const cudaStream_t s = cuda_stream(stream);
    if (image_) {
      cuda_ops::transpose(in, out, batch_, pixels_, channels_, s);
    } else {
      SS_CHECK_CUDA(cudaMemcpyAsync(out, in, bytes_, cudaMemcpyDeviceToDevice, s));
    }
  }
  void backward(const float*, const float*, const float* dout, float* din,
                Stream& stream) override {
    if (din == nullptr) return;  // no parameters: nothing to do without the input's gradient
    const cudaStream_t s = cuda_stream(stream);
    if (image_) {
      cuda_ops::transpose(dout, din, batch_, channels_, pixels_, s);
    } else {
      SS_CHECK_CUDA(cudaMemcpyAsync(din, dout, bytes_, cudaMemcpyDeviceToDevice, s));
    }
  }

 private:
  bool image_;
  int64_t batch_, pixels_, channels_;
  size_t bytes_;
};

class GlobalAvgPoolKernel final : public LayerKernel {
 public:
  explicit GlobalAvgPoolKernel(const Shape& in)
      : batch_(in[0]), pixels_(in[1] * in[2]), channels_(in[3]) {}

  void forward(const float* in, float* out, Stream& stream) override {
    cuda_ops::global_avg_pool_forward(in, out, batch_, pixels_, channels_, cuda_stream(stream));
  }
  void backward(const float*, const float*, const float* dout, float* din,
                Stream& stream) override {
    if (din == nullptr) return;  // no parameters: nothing to do without the input's gradient
    cuda_ops::global_avg_pool_backward(dout, din, batch_, pixels_, channels_, cuda_stream(stream));
  }

 private:
  int64_t batch_, pixels_, channels_;
};

}  // namespace

std::unique_ptr<LayerKernel> make_cuda_layer(const LayerSpec& spec, const LayerBinding& b,
                                             CudaDevice& device) {
  check_layer_binding(spec, b);
  SS_CHECK(!b.activation && !b.relu_gradient, "{}: the CUDA kernels fuse no layers",
           describe(spec));
  // Planning queries the device (free memory, cuDNN heuristics) and creates handles on it.
  ScopedCudaDevice scope(device.id().index);
  return std::visit(
      Overloaded{
          [&](const Conv2DSpec& c) -> std::unique_ptr<LayerKernel> {
            return make_cuda_conv(c, spec, b, device);
          },
          [&](const MaxPool2DSpec& p) -> std::unique_ptr<LayerKernel> {
            return std::make_unique<MaxPoolKernel>(p, b.in, b.out);
          },
          [&](const DenseSpec& d) -> std::unique_ptr<LayerKernel> {
            return std::make_unique<DenseKernel>(d, spec, b, device);
          },
          [&](const ActivationSpec& a) -> std::unique_ptr<LayerKernel> {
            return std::make_unique<ActivationKernel>(a.kind, b.in.numel());
          },
          [&](const FlattenSpec&) -> std::unique_ptr<LayerKernel> {
            return std::make_unique<FlattenKernel>(b.in);
          },
          [&](const GlobalAvgPoolSpec&) -> std::unique_ptr<LayerKernel> {
            return std::make_unique<GlobalAvgPoolKernel>(b.in);
          },
          [&](const BatchNorm2DSpec& n) { return make_cuda_batch_norm(n, b, device); },
          [&](const PadShortcutSpec& p) { return make_cuda_pad_shortcut(p, b); },
          [&](const AddSpec&) -> std::unique_ptr<LayerKernel> {
            throw_error("Add is computed by the model, not a layer kernel");
          },
          [&](const LayerNormSpec& n) { return make_cuda_layer_norm(n, b, device); },
          [&](const CausalSelfAttentionSpec& a) { return make_cuda_attention(a, b, device); },
          [&](const EmbeddingSpec& e) { return make_cuda_embedding(e, b, device); },
          [&](const PositionEmbeddingSpec& p) {
            return make_cuda_position_embedding(p, b, device);
          },
          [&](const DropoutSpec& d) -> std::unique_ptr<LayerKernel> {
            return std::make_unique<DropoutKernel>(d, b.in.numel());
          },
      },
      spec);
}

}  // namespace scalescope
