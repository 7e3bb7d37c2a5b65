// Layer normalization on our kernels (layer_norm_ops.cu) rather than cuDNN's: the sums are added
// in the CPU kernel's order (kernel_math/layer_norm_math.h), so the two agree to the bit, with
// no atomics. The kernel owns each row's mean and rstd (saved by forward for backward) and the
// scratch of the parameter gradients' partial sums, all allocated at construction.
#include <memory>

#include "core/buffer.h"
#include "core/check.h"
#include "models/cuda/cuda_kernels.h"
#include "models/cuda/cuda_layer_util.h"
#include "models/cuda/cuda_ops.h"
#include "models/cuda/layer_norm_ops.h"

namespace scalescope {
namespace {

class LayerNormKernel final : public LayerKernel {
 public:
  LayerNormKernel(const LayerNormSpec& spec, const LayerBinding& b, CudaDevice& device)
      : eps_(spec.eps),
        d_(b.in[b.in.rank() - 1]),
        rows_(b.in.numel() / d_),
        weight_grad_(b.grads[0].data),
        bias_grad_(b.grads[1].data),
        mean_(float_buffer(device, rows_)),
        rstd_(float_buffer(device, rows_)),
        scratch_(float_buffer(device, cuda_ops::layer_norm_scratch(rows_, d_))),
        tensors_{b.params[0].data, b.params[1].data, floats(mean_), floats(rstd_),
                 floats(scratch_)} {}

  void forward(const float* in, float* out, Stream& stream) override {
    cuda_ops::layer_norm_forward(in, out, rows_, d_, eps_, tensors_, cuda_stream(stream));
  }

  // Under bf16 and fp16 the rows go straight into the model's saved copy (its readers, dense
  // layers, multiply that copy), as the CPU kernel does: no fp32 output written and read again
  // by the model's save.
  SavedOutput forwards_into_saved(kernel_math::HalfFormat) const override {
    return SavedOutput::kFromInput;
  }
  void forward_into_saved(const float* in, const uint16_t*, uint16_t* out,
                          kernel_math::HalfFormat format, Stream& stream) override {
    cuda_ops::layer_norm_forward_half(in, out, format, rows_, d_, eps_, tensors_,
                                      cuda_stream(stream));
  }

  void backward(const float* in, const float*, const float* dout, float* din,
                Stream& stream) override {
    cuda_ops::layer_norm_backward(in, dout, din, weight_grad_, bias_grad_, rows_, d_, tensors_,
                                  false, cuda_stream(stream));
  }

  // A residual stream's layer norm adds its dx in the same kernel (no scratch, no second pass).
  bool adds_input_gradient() const override { return true; }
  void backward_adding(const float* in, const float*, const float* dout, float* din,
                       Stream& stream) override {
    SS_CHECK(din != nullptr && din != dout,
             "layer norm: backward_adding needs an input gradient apart from dout");
    cuda_ops::layer_norm_backward(in, dout, din, weight_grad_, bias_grad_, rows_, d_, tensors_,
                                  true, cuda_stream(stream));
  }

 private:
  float eps_;
  int64_t d_;
  int64_t rows_;
  float* weight_grad_;
  float* bias_grad_;
  DeviceBuffer mean_;  // [rows] each: the last forward's, read by backward
  DeviceBuffer rstd_;
  DeviceBuffer scratch_;
  cuda_ops::LayerNormTensors tensors_;
};

}  // namespace

std::unique_ptr<LayerKernel> make_cuda_layer_norm(const LayerNormSpec& spec,
                                                  const LayerBinding& binding, CudaDevice& device) {
  return std::make_unique<LayerNormKernel>(spec, binding, device);
}

}  // namespace scalescope
