// Batch normalization and the option-A shortcut of CIFAR ResNets on our kernels (norm_ops.cu).
//
// Batch normalization runs our kernels rather than cuDNN's so that its sums are added in an
// order fixed by the shape (kernel_math/norm_math.h), checked on the host, with no atomics.
// The kernel owns the batch's mean and invstd (saved by the training forward for backward),
// the scratch of the per-channel sums and what a synchronized stage all-reduces
// (--sync-batchnorm), all allocated at construction. A ReLU after it runs inside it both ways
// (cuda_fuses_relu): its forward pass over the activations and its backward's are the batch
// norm's own, and in ResNet-50 such a ReLU follows 33 of the 53 batch norms.
#include <memory>
#include <optional>

#include "core/buffer.h"
#include "core/check.h"
#include "models/cuda/cuda_kernels.h"
#include "models/cuda/cuda_layer_util.h"
#include "models/cuda/cuda_ops.h"
#include "models/kernel_math/norm_math.h"

namespace scalescope {
namespace {

namespace km = kernel_math;

class BatchNormKernel final : public LayerKernel {
 public:
  BatchNormKernel(const BatchNorm2DSpec& spec, const LayerBinding& b, CudaDevice& device)
      : spec_(spec),
        relu_(b.activation == Activation::kRelu),
        relu_backward_(b.relu_backward),
        rows_(b.in[0] * b.in[1] * b.in[2]),
        channels_(b.in[3]),
        gamma_grad_(b.grads[0].data),
        beta_grad_(b.grads[1].data),
        mean_(float_buffer(device, channels_)),
        invstd_(float_buffer(device, channels_)),
        scratch_(float_buffer(device, cuda_ops::batch_norm_scratch(rows_, channels_))),
        sync_group_(b.sync),
        sync_(float_buffer(device, km::norm_sync_buffer_floats(channels_, b.sync.replicas))),
        tensors_{b.params[0].data,  b.params[1].data,  b.buffers[0].data,
                 b.buffers[1].data, b.buffers[2].data, floats(mean_),
                 floats(invstd_),   floats(scratch_),  floats(sync_)} {}

  void forward(const float* in, float* out, Stream& stream) override {
    check_rows();
    cuda_ops::batch_norm_forward_train(in, out, rows_, channels_, spec_.eps, spec_.momentum, relu_,
                                       tensors_, cuda_stream(stream));
  }

  // Synchronized (cuda_ops.h): forward gathers every replica's moments, backward sums Σdy and
  // Σdy·x̂, its gradients staying this replica's.
  int sync_points(Pass pass) const override { return batch_norm_sync_points(pass); }
  TensorView sync_values(Pass pass) const override {
    return {floats(sync_), Shape{pass == Pass::kForward
                                     ? km::norm_forward_sync_floats(channels_, sync_group_.replicas)
                                     : km::norm_backward_sync_floats(channels_)}};
  }
  void forward_stage(int stage, const float* in, float* out, Stream& stream) override {
    // Each replica checks its own batch, as the CPU kernel does (PyTorch's SyncBatchNorm would
    // take one value per replica when there are several; the two backends agree instead).
    if (stage == 0) check_rows();
    cuda_ops::batch_norm_forward_stage(stage, sync_group_.rank, sync_group_.replicas, in, out,
                                       rows_, channels_, spec_.eps, spec_.momentum, relu_, tensors_,
                                       cuda_stream(stream));
  }
  void backward_stage(int stage, const float* in, const float* out, const float* dout, float* din,
                      Stream& stream) override {
    cuda_ops::batch_norm_backward_stage(stage, sync_group_.replicas, in, dout, relu_output(out),
                                        din, gamma_grad_, beta_grad_, rows_, channels_, tensors_,
                                        cuda_stream(stream));
  }

  void forward_eval(const float* in, float* out, Stream& stream) override {
    cuda_ops::batch_norm_forward_eval(in, out, rows_, channels_, spec_.eps, relu_, tensors_,
                                      cuda_stream(stream));
  }

  // `out` is the fused ReLU's output where there is one.
  void backward(const float* in, const float* out, const float* dout, float* din,
                Stream& stream) override {
    cuda_ops::batch_norm_backward(in, dout, relu_output(out), din, gamma_grad_, beta_grad_, rows_,
                                  channels_, tensors_, cuda_stream(stream));
  }

  // Under bf16 and fp16 the training passes read the model's saved 16-bit copies of the input
  // and of the fused ReLU's output as they are, the values their restores would give, and
  // forward may write its output only as its saved copy (where every reader reads that): no
  // restores, no fp32 output, and 2 bytes an element where each pass read 4. The input a
  // forward reads is then rounded to 16 bits; after a 16-bit convolution (ResNets'), whose
  // results cuDNN rounds, that changes no value, and otherwise it is autocast's 16-bit input.
  bool forwards_from_saved(km::HalfFormat format) const override { return half_ == format; }
  void forward_saved(const uint16_t* in, float* out, Stream& stream) override {
    check_rows();
    cuda_ops::batch_norm_forward_train({in, *half_}, out, nullptr, rows_, channels_, spec_.eps,
                                       spec_.momentum, relu_, tensors_, cuda_stream(stream));
  }
  SavedOutput forwards_into_saved(km::HalfFormat format) const override {
    return half_ == format ? SavedOutput::kFromSavedInput : SavedOutput::kNo;
  }
  void forward_into_saved(const float*, const uint16_t* saved_in, uint16_t* out,
                          km::HalfFormat format, Stream& stream) override {
    check_rows();
    cuda_ops::batch_norm_forward_train({saved_in, format}, nullptr, out, rows_, channels_,
                                       spec_.eps, spec_.momentum, relu_, tensors_,
                                       cuda_stream(stream));
  }
  bool reads_saved(km::HalfFormat format) const override { return half_ == format; }
  void backward_saved(const uint16_t* in, const uint16_t* out, const float* dout, float* din,
                      Stream& stream) override {
    backward_from_saved(in, out, dout, din, nullptr, stream);
  }
  // And backward may write its input's gradient only as the 16-bit copy a convolution's reads
  // (rounded as the convolution's own copy would be): 2 bytes an element written where fp32
  // wrote 4, and no rounding pass in the convolution's backward.
  bool writes_half_gradient(km::HalfFormat format) const override { return half_ == format; }
  void backward_into_half_gradient(const uint16_t* in, const uint16_t* out, const float* dout,
                                   uint16_t* din, Stream& stream) override {
    backward_from_saved(in, out, dout, nullptr, din, stream);
  }

 private:
  // The unbiased variance divides by rows - 1; PyTorch refuses such a batch in training too.
  void check_rows() const {
    SS_CHECK(rows_ >= 2,
             "{}: training needs more than one value per channel, but the batch has N·H·W = {}",
             describe(LayerSpec{spec_}), rows_);
  }

  void backward_from_saved(const uint16_t* in, const uint16_t* out, const float* dout, float* din,
                           uint16_t* din_half, Stream& stream) {
    const km::HalfValues relu_y{relu_backward_ ? out : nullptr, *half_};
    cuda_ops::batch_norm_backward(km::HalfValues{in, *half_}, dout, relu_y, din, din_half,
                                  gamma_grad_, beta_grad_, rows_, channels_, tensors_,
                                  cuda_stream(stream));
  }

  // What backward's masks read: the ReLU's output where its backward runs here.
  const float* relu_output(const float* out) const { return relu_backward_ ? out : nullptr; }

  BatchNorm2DSpec spec_;
  std::optional<km::HalfFormat> half_ = half_format(precision());  // the saved copies', if any
  bool relu_;           // forward applies the ReLU that follows
  bool relu_backward_;  // backward's dout is that ReLU's output gradient
  int64_t rows_;
  int64_t channels_;
  float* gamma_grad_;
  float* beta_grad_;
  DeviceBuffer mean_;    // the last training forward's, read by backward
  DeviceBuffer invstd_;  // (and its 1 / sqrt(var + eps))
  DeviceBuffer scratch_;
  SyncGroup sync_group_;
  DeviceBuffer sync_;  // what a sync point all-reduces (sync_values)
  cuda_ops::BatchNormTensors tensors_;
};

class PadShortcutKernel final : public LayerKernel {
 public:
  PadShortcutKernel(const PadShortcutSpec& spec, const LayerBinding& b)
      : shape_{b.in[1], b.in[2], b.in[3], b.out[1], b.out[2], b.out[3], spec.stride},
        batch_(b.in[0]) {}

  void forward(const float* in, float* out, Stream& stream) override {
    cuda_ops::pad_shortcut_forward(shape_, batch_, in, out, cuda_stream(stream));
  }

  void backward(const float*, const float*, const float* dout, float* din,
                Stream& stream) override {
    if (din == nullptr) return;  // no parameters: nothing to do without the input's gradient
    cuda_ops::pad_shortcut_backward(shape_, batch_, dout, din, cuda_stream(stream));
  }

 private:
  kernel_math::ShortcutShape shape_;
  int64_t batch_;
};

}  // namespace

std::unique_ptr<LayerKernel> make_cuda_batch_norm(const BatchNorm2DSpec& spec,
                                                  const LayerBinding& binding, CudaDevice& device) {
  return std::make_unique<BatchNormKernel>(spec, binding, device);
}

std::unique_ptr<LayerKernel> make_cuda_pad_shortcut(const PadShortcutSpec& spec,
                                                    const LayerBinding& binding) {
  return std::make_unique<PadShortcutKernel>(spec, binding);
}

}  // namespace scalescope
