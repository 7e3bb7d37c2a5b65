// The CUDA layer kernels: our kernels (layer_ops.cu) for activations, pooling and flatten, and
// the factory of every layer kernel; dense layers on cuBLAS are in cuda_dense.cpp, convolution
// on cuDNN in cuda_conv.cpp.
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
#include <optional>
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

// ---- layers without parameters: our kernels

// Element-wise activations, in our kernels rather than cuDNN's so that the functions are the
// CPU's exactly (relu passing NaN, derivatives taken from the output) and GELU is PyTorch's.
// Under bf16 and fp16 GELU, as the CPU's, reads and writes the model's saved 16-bit copies
// itself (`half_`, the format it was built under): forward from the saved input into the saved
// output, backward from the saved input, where the model would otherwise write the fp32 output,
// round it into its copy, and restore the input into fp32 before backward.
class ActivationKernel final : public LayerKernel {
 public:
  ActivationKernel(Activation kind, int64_t count)
      : kind_(kind),
        count_(count),
        half_(kind == Activation::kGelu ? half_format(precision()) : std::nullopt) {}

  void forward(const float* in, float* out, Stream& stream) override {
    cuda_ops::activation_forward(kind_, in, out, count_, cuda_stream(stream));
  }
  void backward(const float* in, const float* out, const float* dout, float* din,
                Stream& stream) override {
    if (din == nullptr) return;  // no parameters: nothing to do without the input's gradient
    cuda_ops::activation_backward(kind_, in, out, dout, din, count_, cuda_stream(stream));
  }

  SavedOutput forwards_into_saved(kernel_math::HalfFormat format) const override {
    return half_ == format ? SavedOutput::kFromSavedInput : SavedOutput::kNo;
  }
  void forward_into_saved(const float*, const uint16_t* saved_in, uint16_t* out,
                          kernel_math::HalfFormat format, Stream& stream) override {
    cuda_ops::gelu_forward_half(saved_in, out, count_, format, cuda_stream(stream));
  }

  bool reads_saved(kernel_math::HalfFormat format) const override { return half_ == format; }
  void backward_saved(const uint16_t* in, const uint16_t*, const float* dout, float* din,
                      Stream& stream) override {
    if (din == nullptr) return;
    cuda_ops::gelu_backward_half(in, dout, din, count_, *half_, cuda_stream(stream));
  }

 private:
  Activation kind_;
  int64_t count_;
  std::optional<kernel_math::HalfFormat> half_;  // GELU's saved copies' format, under 16 bits
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
// Keeps each window's choice from the training forward to backward (kernel_math/pool_math.h):
// two bytes per output.
class MaxPoolKernel final : public LayerKernel {
 public:
  MaxPoolKernel(const MaxPool2DSpec& p, const LayerBinding& b, CudaDevice& device)
      : shape_{b.in[0], b.in[1], b.in[2], b.in[3], b.out[1], b.out[2], p.pool, p.stride, p.pad},
        choices_(device, checked_choices(p, b.out.numel()) * sizeof(uint16_t)) {}

  void forward(const float* in, float* out, Stream& stream) override {
    cuda_ops::max_pool_forward(shape_, in, out, window_choices(), cuda_stream(stream));
  }
  void forward_eval(const float* in, float* out, Stream& stream) override {
    cuda_ops::max_pool_forward(shape_, in, out, nullptr, cuda_stream(stream));
  }
  // Reads the choices of the last training forward, neither its input nor its output.
  void backward(const float*, const float*, const float* dout, float* din,
                Stream& stream) override {
    if (din == nullptr) return;  // no parameters: nothing to do without the input's gradient
    cuda_ops::max_pool_backward(shape_, window_choices(), dout, din, cuda_stream(stream));
  }
  // So under bf16 and fp16 the model need not restore the saved copies of either (which it
  // keeps for the fused ReLU before and the convolution after): no pass over them.
  bool reads_saved(kernel_math::HalfFormat) const override { return true; }
  void backward_saved(const uint16_t*, const uint16_t*, const float* dout, float* din,
                      Stream& stream) override {
    backward(nullptr, nullptr, dout, din, stream);
  }

 private:
  static int64_t checked_choices(const MaxPool2DSpec& p, int64_t outputs) {
    SS_CHECK(p.pool <= kernel_math::kMaxRecordedPool,
             "{}: GPUs record each window's choice in 16 bits, for pools of at most {}x{}",
             describe(LayerSpec(p)), kernel_math::kMaxRecordedPool, kernel_math::kMaxRecordedPool);
    return outputs;
  }
  uint16_t* window_choices() const { return static_cast<uint16_t*>(choices_.data()); }

  cuda_ops::PoolShape shape_;
  DeviceBuffer choices_;
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

bool cuda_fuses_relu(const LayerSpec& producer) {
  return std::holds_alternative<BatchNorm2DSpec>(producer);
}

std::unique_ptr<LayerKernel> make_cuda_layer(const LayerSpec& spec, const LayerBinding& b,
                                             CudaDevice& device) {
  check_layer_binding(spec, b);
  const bool fused = b.activation || b.relu_backward || b.relu_gradient;
  SS_CHECK(
      !fused || (cuda_fuses_relu(spec) && b.activation == Activation::kRelu && !b.relu_gradient),
      "{}: the CUDA kernels fuse only a ReLU into the batch norm before it", describe(spec));
  // Planning queries the device (free memory, cuDNN heuristics) and creates handles on it.
  ScopedCudaDevice scope(device.id().index);
  return std::visit(
      Overloaded{
          [&](const Conv2DSpec& c) -> std::unique_ptr<LayerKernel> {
            return make_cuda_conv(c, spec, b, device);
          },
          [&](const MaxPool2DSpec& p) -> std::unique_ptr<LayerKernel> {
            return std::make_unique<MaxPoolKernel>(p, b, device);
          },
          [&](const DenseSpec& d) -> std::unique_ptr<LayerKernel> {
            return make_cuda_dense(d, spec, b, device);
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
