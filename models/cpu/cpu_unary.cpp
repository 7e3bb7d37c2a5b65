// The CPU kernels of layers without parameters, one oneDNN primitive each way: activations
// (eltwise), flatten (a reorder) and global average pooling.
#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <memory>

#include "models/cpu/cpu_kernels.h"
#include "models/cpu/dnnl_kernel.h"

namespace scalescope {
namespace {

using cpu_dnnl::Call;
using cpu_dnnl::DnnlKernel;
using cpu_dnnl::f32_desc;
using cpu_dnnl::image_dims;
using cpu_dnnl::set_handle;
using dnnl::memory;
using Tag = memory::format_tag;

// A layer without parameters: one primitive forward (src -> dst) and one backward
// (diff_dst, and src or dst where the primitive wants it -> diff_src). Subclasses plan forward_
// and backward_ over the four memory objects.
class UnaryKernel : public DnnlKernel {
 public:
  void forward(const float* in, float* out, Stream&) override {
    set_handle(src_, in);
    set_handle(dst_, out);
    forward_.run(stream_);
  }

  void backward(const float* in, const float* out, const float* dout, float* din,
                Stream&) override {
    if (din == nullptr) return;  // no parameters: nothing to do without the input's gradient
    set_handle(src_, in);
    set_handle(dst_, out);
    set_handle(diff_dst_, dout);
    set_handle(diff_src_, din);
    backward_.run(stream_);
  }

 protected:
  using DnnlKernel::DnnlKernel;

  // The four memory objects, unbound: the input and its gradient in `in`'s layout, the output
  // and its gradient in `out`'s.
  void unbound_data(const memory::desc& in, const memory::desc& out) {
    src_ = unbound(in);
    diff_src_ = unbound(in);
    dst_ = unbound(out);
    diff_dst_ = unbound(out);
  }

  memory src_, dst_, diff_src_, diff_dst_;
  Call forward_, backward_;
};

// Global average pooling: one oneDNN average-pooling window over the whole image, so the
// [N, 1, 1, C] result is exactly the [N, C] output. No padding, so excluding it or not is
// the same; pooling_avg_exclude_padding is oneDNN's plain average.
class GlobalAvgPoolKernel final : public UnaryKernel {
 public:
  GlobalAvgPoolKernel(Device& device, const Shape& in) : UnaryKernel(device) {
    const memory::desc src = f32_desc(image_dims(in), Tag::nhwc);
    const memory::desc dst = f32_desc({in[0], in[3], 1, 1}, Tag::nhwc);
    const memory::dims window = {in[1], in[2]};
    const memory::dims no_padding = {0, 0};
    const auto average = dnnl::algorithm::pooling_avg_exclude_padding;
    const dnnl::pooling_forward::desc fwd(dnnl::prop_kind::forward_training, average, src, dst,
                                          window, window, no_padding, no_padding);
    const dnnl::pooling_forward::primitive_desc fwd_pd(fwd, attr_, engine_);
    const dnnl::pooling_backward::desc bwd(average, src, dst, window, window, no_padding,
                                           no_padding);
    const dnnl::pooling_backward::primitive_desc bwd_pd(bwd, attr_, engine_, fwd_pd);
    unbound_data(src, dst);
    forward_ = plan<dnnl::pooling_forward>(fwd_pd, {{DNNL_ARG_SRC, src_}, {DNNL_ARG_DST, dst_}});
    backward_ = plan<dnnl::pooling_backward>(
        bwd_pd, {{DNNL_ARG_DIFF_DST, diff_dst_}, {DNNL_ARG_DIFF_SRC, diff_src_}});
    allocate_scratchpad();
  }
};

// Element-wise activations over the flat tensor (any layout) but GELU (cpu_gelu.cpp). Backward
// computes the derivative from the output (the *_use_dst_for_bwd algorithms), which the caller
// keeps.
class EltwiseKernel final : public UnaryKernel {
 public:
  EltwiseKernel(Device& device, dnnl::algorithm algorithm, int64_t numel) : UnaryKernel(device) {
    const memory::desc data = f32_desc({numel}, Tag::a);
    const dnnl::eltwise_forward::desc fwd(dnnl::prop_kind::forward_training, algorithm, data, 0.0f,
                                          0.0f);
    const dnnl::eltwise_forward::primitive_desc fwd_pd(fwd, attr_, engine_);
    const dnnl::eltwise_backward::desc bwd(algorithm, data, data, 0.0f, 0.0f);
    const dnnl::eltwise_backward::primitive_desc bwd_pd(bwd, attr_, engine_, fwd_pd);
    unbound_data(data, data);
    forward_ = plan<dnnl::eltwise_forward>(fwd_pd, {{DNNL_ARG_SRC, src_}, {DNNL_ARG_DST, dst_}});
    backward_ = plan<dnnl::eltwise_backward>(
        bwd_pd,
        {{DNNL_ARG_DST, dst_}, {DNNL_ARG_DIFF_DST, diff_dst_}, {DNNL_ARG_DIFF_SRC, diff_src_}});
    if (precision() == Precision::kBf16) plan_bf16_forward(algorithm, numel);
    allocate_scratchpad();
  }

  // Under bf16, forward from the saved copy of the input into the saved copy of the output, as
  // autocast runs an activation on a bf16 tensor: no fp32 read or written.
  SavedOutput forwards_into_saved(kernel_math::HalfFormat format) const override {
    return forward_bf16_ && format == kernel_math::HalfFormat::kBf16 ? SavedOutput::kFromSavedInput
                                                                     : SavedOutput::kNo;
  }
  void forward_into_saved(const float*, const uint16_t* saved_in, uint16_t* out,
                          kernel_math::HalfFormat, Stream&) override {
    src_bf16_.set_data_handle(const_cast<uint16_t*>(saved_in));
    dst_bf16_.set_data_handle(out);
    forward_bf16_.run(stream_);
  }

 private:
  void plan_bf16_forward(dnnl::algorithm algorithm, int64_t numel) {
    const memory::desc data({numel}, memory::data_type::bf16, Tag::a);
    const dnnl::eltwise_forward::desc fwd(dnnl::prop_kind::forward_training, algorithm, data, 0.0f,
                                          0.0f);
    const dnnl::eltwise_forward::primitive_desc pd(fwd, attr_, engine_);
    src_bf16_ = unbound(data);
    dst_bf16_ = unbound(data);
    forward_bf16_ =
        plan<dnnl::eltwise_forward>(pd, {{DNNL_ARG_SRC, src_bf16_}, {DNNL_ARG_DST, dst_bf16_}});
  }

  memory src_bf16_, dst_bf16_;
  Call forward_bf16_;
};

// Flatten restores PyTorch's per-sample (C, H, W) order from NHWC: a real transpose (one
// reorder between the two layouts of the same logical tensor), and its inverse backward.
// Inputs that are not images are already in order and are copied.
class FlattenKernel final : public UnaryKernel {
 public:
  FlattenKernel(Device& device, const Shape& in) : UnaryKernel(device) {
    memory::desc nhwc = f32_desc({in.numel()}, Tag::a);
    memory::desc nchw = nhwc;
    if (in.rank() == 4) {
      nhwc = f32_desc(image_dims(in), Tag::nhwc);
      nchw = f32_desc(image_dims(in), Tag::nchw);
    }
    unbound_data(nhwc, nchw);
    forward_ = reorder(src_, dst_);
    backward_ = reorder(diff_dst_, diff_src_);
    allocate_scratchpad();
  }
};

}  // namespace

std::unique_ptr<LayerKernel> make_cpu_eltwise(Activation kind, int64_t numel, Device& device) {
  if (kind == Activation::kGelu) return make_cpu_gelu(numel);
  return std::make_unique<EltwiseKernel>(device, cpu_dnnl::eltwise_algorithm(kind, false), numel);
}

std::unique_ptr<LayerKernel> make_cpu_flatten(const Shape& in, Device& device) {
  return std::make_unique<FlattenKernel>(device, in);
}

std::unique_ptr<LayerKernel> make_cpu_global_avg_pool(const Shape& in, Device& device) {
  return std::make_unique<GlobalAvgPoolKernel>(device, in);
}

}  // namespace scalescope
