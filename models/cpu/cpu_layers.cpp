// The CPU layer kernels: one oneDNN primitive (or a few) per layer, planned once per shape.
//
// Every kernel is planned completely in its constructor: primitive descriptors, primitives,
// memory objects, internal weight copies and one scratchpad shared by the kernel's
// primitives. forward() and backward() only point memory objects at the caller's buffers
// and execute, so a training step allocates no tensor memory. Max pooling (cpu_pool.cpp), batch
// and layer normalization are plain OpenMP loops instead (their files say why).
//
// Layouts: activations are NHWC (4-D), [N, features] (2-D) or sequences [N, S, features],
// parameters are PyTorch's
// (conv OIHW, dense [out, in]). Convolution lets oneDNN choose the layout of its weights
// (format_tag::any, blocked on AVX2); the kernel then keeps its own copy, refreshed by a
// reorder on every forward because the optimizer updates the weights in place, and
// reorders the weight gradients back into PyTorch's layout.
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <variant>
#include <vector>

#include "core/buffer.h"
#include "core/check.h"
#include "core/overloaded.h"
#include "models/cpu/cpu_kernels.h"
#include "models/cpu/dnnl_kernel.h"

namespace scalescope {
namespace {

using cpu_dnnl::Call;
using cpu_dnnl::DnnlKernel;
using cpu_dnnl::emulates_fp16;
using dnnl::memory;
using Tag = memory::format_tag;

memory::desc f32_desc(const memory::dims& dims, Tag tag) {
  return memory::desc(dims, memory::data_type::f32, tag);
}

// The data type convolutions and dense layers multiply in (models/kernels.h set_precision):
// bf16 under Precision::kBf16, fp32 under every other (TF32 is a GPU format).
memory::data_type compute_type() {
  return precision() == Precision::kBf16 ? memory::data_type::bf16 : memory::data_type::f32;
}

// An image batch [N, H, W, C] as oneDNN's logical dims (N, C, H, W); the nhwc tag below
// says the memory itself is channels-last.
memory::dims image_dims(const Shape& nhwc) {
  return {nhwc[0], nhwc[3], nhwc[1], nhwc[2]};
}

void set_handle(const memory& m, const float* data) {
  // oneDNN takes void* for inputs and outputs alike; inputs are only read.
  m.set_data_handle(const_cast<float*>(data));
}

// The descriptors of a layer with weights and a bias: convolution or inner product.
// Under bf16 the primitives read bf16 copies of the input, the weights and the output's
// gradient (`src_compute`, `diff_dst_compute`, weights in the type of `fwd`'s) and write fp32
// outputs, input gradients and weight gradients; under fp32 the copies are the tensors.
template <class Fwd, class BwdData, class BwdWeights>
struct WeightedDescs {
  const char* layout;                          // of the activations, as reported: "NHWC", "NC"
  memory::desc src, dst;                       // activations, in their fixed layouts (fp32)
  memory::desc src_compute, diff_dst_compute;  // what the primitives read: src, dst or bf16
  memory::desc weights;                        // PyTorch's layout (fp32)
  memory::desc bias;
  typename Fwd::desc fwd;
  typename BwdData::desc bwd_data;
  typename BwdWeights::desc bwd_weights;
  // Dense layers: the forward as this matmul instead (`fwd` then only hints the backward
  // primitives): src × the weights in PyTorch's [out, in] layout read as [in, out] through
  // strides, plus the bias as one [1, out] row; `matmul_weights` is the [out, in] buffer it
  // reads through them (the weights themselves, or their bf16 copy). oneDNN 2.6's inner product
  // with those weights runs gemm:jit, measured 2.4x slower on cifar-cnn's 4096->64 layer and 1.8x
  // on mlp-41m's 8000->4000 (batch 64 and 32, 2 threads); its backward passes are as fast as
  // matmul's.
  std::optional<dnnl::matmul::desc> matmul;
  memory::desc matmul_weights;
  memory::desc matmul_bias;
};

// oneDNN's algorithm for an activation. As a layer of its own, the *_use_dst_for_bwd form:
// its backward reads the output, which the model keeps (GELU's reads the input). As a post-op
// (a fused activation, LayerBinding::activation), the plain form of the same function; GELU
// is never fused, as fusing never writes the input its backward needs.
dnnl::algorithm eltwise_algorithm(Activation kind, bool post_op) {
  using dnnl::algorithm;
  switch (kind) {
    case Activation::kRelu:
      return post_op ? algorithm::eltwise_relu : algorithm::eltwise_relu_use_dst_for_bwd;
    case Activation::kTanh:
      return post_op ? algorithm::eltwise_tanh : algorithm::eltwise_tanh_use_dst_for_bwd;
    case Activation::kSigmoid:
      return post_op ? algorithm::eltwise_logistic : algorithm::eltwise_logistic_use_dst_for_bwd;
    case Activation::kGelu:
      SS_CHECK(!post_op, "GELU cannot be fused into the layer before it");
      return algorithm::eltwise_gelu_tanh;
  }
  throw_error(fmt::format("unknown activation {}", static_cast<int>(kind)));
}

// Convolution and dense layers: y = W·x + b, with the weights in whatever layout (and type)
// the primitive descriptors ask for, reordered from and to PyTorch's fp32 when it differs.
template <class Fwd, class BwdData, class BwdWeights>
class WeightedKernel final : public DnnlKernel {
 public:
  using Descs = WeightedDescs<Fwd, BwdData, BwdWeights>;

  WeightedKernel(Device& device, const LayerBinding& binding, const Descs& d) : DnnlKernel(device) {
    const typename Fwd::primitive_desc fwd_pd(d.fwd, forward_attr(binding.activation), engine_);
    const typename BwdData::primitive_desc bwd_data_pd(d.bwd_data, attr_, engine_, fwd_pd);
    const typename BwdWeights::primitive_desc bwd_weights_pd(d.bwd_weights, attr_, engine_, fwd_pd);
    math_ = emulates_fp16() ? "fp16-emulated" : d.src_compute == d.src ? "fp32" : "bf16";
    src_ = unbound(d.src);
    dst_ = unbound(d.dst);
    diff_src_ = unbound(d.src);
    diff_dst_ = unbound(d.dst);
    // The copies of the input and of the output's gradient are made again in each pass that
    // reads them, so that they need memory only during it (the model keeps the input).
    use_pool(binding.transient);
    src_compute_ = adopt_operand(src_, d.src_compute, src_to_compute_, true);
    diff_dst_compute_ = adopt_operand(diff_dst_, d.diff_dst_compute, diff_dst_to_compute_, true);

    const memory weights = over(d.weights, binding.params[0].data);
    // A bias: convolutions and dense layers may have none.
    const float* bias = binding.params.size() > 1 ? binding.params[1].data : nullptr;
    const memory fwd_weights = plan_forward(fwd_pd, d, binding.activation, weights, bias);
    plan_backward_weights(bwd_weights_pd, d, binding);

    // Backward data reads the weights of the last forward; when it wants the layout the
    // forward already produced, it shares that copy and backward reorders nothing.
    const memory::desc bwd_weights_desc = bwd_data_pd.weights_desc();
    const memory data_weights = bwd_weights_desc == fwd_weights.get_desc()
                                    ? fwd_weights
                                    : adopt_operand(weights, bwd_weights_desc, weights_to_bwd_);
    backward_data_ = plan<BwdData>(bwd_data_pd, {{DNNL_ARG_DIFF_DST, diff_dst_compute_},
                                                 {DNNL_ARG_WEIGHTS, data_weights},
                                                 {DNNL_ARG_DIFF_SRC, diff_src_}});
    allocate_scratchpad();
    choices_.push_back(choice("backward-data", bwd_data_pd, d.layout));
    choices_.push_back(choice("backward-weights", bwd_weights_pd, d.layout));
  }

  void forward(const float* in, float* out, Stream&) override {
    bind_pass_local();
    set_handle(src_, in);
    if (src_to_compute_) src_to_compute_.run(stream_);
    forward_from_copies(out);
  }

  // Under bf16 the forward reads the input as a plain bf16 copy in its own layout: the model's
  // saved one (backward_saved's) is that copy.
  bool forwards_from_saved(kernel_math::HalfFormat format) const override {
    return reads_saved(format);
  }
  void forward_saved(const uint16_t* in, float* out, Stream&) override {
    bind_pass_local();
    src_compute_.set_data_handle(const_cast<uint16_t*>(in));
    forward_from_copies(out);
  }

  // REQUIRES (beyond LayerKernel's): the weights unchanged since the last forward, which the
  // training step guarantees (the optimizer runs after backward).
  void backward(const float* in, const float*, const float* dout, float* din, Stream&) override {
    bind_pass_local();
    set_handle(src_, in);
    if (src_to_compute_) src_to_compute_.run(stream_);
    backward_from_copies(dout, din);
  }

  // Under bf16 the primitives read the input as a plain bf16 copy in its own layout: the
  // model's saved one is that copy (pass-local, so the next pass binds its own again).
  bool reads_saved(kernel_math::HalfFormat format) const override {
    return format == kernel_math::HalfFormat::kBf16 && math_ == "bf16" && pooled();
  }
  void backward_saved(const uint16_t* in, const uint16_t*, const float* dout, float* din,
                      Stream&) override {
    bind_pass_local();
    src_compute_.set_data_handle(const_cast<uint16_t*>(in));
    backward_from_copies(dout, din);
  }

  std::vector<KernelChoice> choices() const override { return choices_; }

 private:
  // Forward once src_compute_ holds the input as the primitive reads it.
  void forward_from_copies(float* out) {
    set_handle(dst_, out);
    if (weights_to_fwd_) weights_to_fwd_.run(stream_);
    if (bias_to_fwd_) bias_to_fwd_.run(stream_);
    forward_.run(stream_);
  }
  // Backward once src_compute_ holds the input as the primitives read it.
  void backward_from_copies(const float* dout, float* din) {
    set_handle(diff_dst_, dout);
    if (diff_dst_to_compute_) diff_dst_to_compute_.run(stream_);
    backward_weights_.run(stream_);
    if (diff_weights_back_) diff_weights_back_.run(stream_);
    if (diff_bias_back_) diff_bias_back_.run(stream_);
    if (din == nullptr) return;  // first layer: nobody needs the input's gradient
    set_handle(diff_src_, din);
    if (weights_to_bwd_) weights_to_bwd_.run(stream_);
    backward_data_.run(stream_);
  }

  // oneDNN's name of the implementation it dispatched to ("brg:avx512_core_amx_bf16",
  // "gemm:jit", "ref:any": the last is a slow reference kernel worth knowing about). oneDNN's
  // CPU kernels are deterministic for a fixed thread count.
  template <class Pd>
  KernelChoice choice(const char* pass, const Pd& pd, const char* layout) const {
    return {pass,  pd.impl_info_str(),
            math_, layout,
            true,  static_cast<int64_t>(pd.scratchpad_desc().get_size())};
  }

  // The forward's attributes: the shared ones, plus the fused activation as a post-op.
  static dnnl::primitive_attr forward_attr(std::optional<Activation> activation) {
    dnnl::primitive_attr attr = new_attr();
    if (activation) {
      dnnl::post_ops ops;
      ops.append_eltwise(1.0f, eltwise_algorithm(*activation, true), 0.0f, 0.0f);
      attr.set_post_ops(ops);
    }
    return attr;
  }

  // Plans forward_ (`d.matmul` when set, else `fwd_pd`) and the reorders it needs; returns
  // the weights it reads.
  memory plan_forward(const typename Fwd::primitive_desc& fwd_pd, const Descs& d,
                      std::optional<Activation> activation, const memory& weights,
                      const float* bias) {
    std::vector<std::pair<int, memory>> args{{DNNL_ARG_SRC, src_compute_}, {DNNL_ARG_DST, dst_}};
    if (d.matmul) {
      const dnnl::matmul::primitive_desc pd(*d.matmul, forward_attr(activation), engine_);
      const memory read = adopt_operand(weights, d.matmul_weights, weights_to_fwd_);
      args.emplace_back(DNNL_ARG_WEIGHTS,
                        memory(pd.weights_desc(), engine_, read.get_data_handle()));
      if (bias != nullptr) args.emplace_back(DNNL_ARG_BIAS, over(d.matmul_bias, bias));
      forward_ = plan<dnnl::matmul>(pd, std::move(args));
      choices_.push_back(choice("forward", pd, d.layout));
      return read;
    }
    const memory fwd_weights = adopt_operand(weights, fwd_pd.weights_desc(), weights_to_fwd_);
    args.emplace_back(DNNL_ARG_WEIGHTS, fwd_weights);
    if (bias != nullptr) {
      args.emplace_back(DNNL_ARG_BIAS,
                        adopt(over(d.bias, bias), fwd_pd.bias_desc(), true, bias_to_fwd_));
    }
    forward_ = plan<Fwd>(fwd_pd, std::move(args));
    choices_.push_back(choice("forward", fwd_pd, d.layout));
    return fwd_weights;
  }

  // Plans backward_weights_, writing the gradients in PyTorch's layout (through a copy where
  // the primitive wants another).
  void plan_backward_weights(const typename BwdWeights::primitive_desc& pd, const Descs& d,
                             const LayerBinding& binding) {
    const memory diff_weights = over(d.weights, binding.grads[0].data);
    std::vector<std::pair<int, memory>> args{
        {DNNL_ARG_SRC, src_compute_},
        {DNNL_ARG_DIFF_DST, diff_dst_compute_},
        {DNNL_ARG_DIFF_WEIGHTS,
         adopt(diff_weights, pd.diff_weights_desc(), false, diff_weights_back_)}};
    if (binding.grads.size() > 1) {
      const memory diff_bias = over(d.bias, binding.grads[1].data);
      args.emplace_back(DNNL_ARG_DIFF_BIAS,
                        adopt(diff_bias, pd.diff_bias_desc(), false, diff_bias_back_));
    }
    backward_weights_ = plan<BwdWeights>(pd, std::move(args));
  }

  std::vector<KernelChoice> choices_;
  std::string math_;  // "fp32", "bf16" or "fp16-emulated", as reported
  memory src_, dst_, diff_src_, diff_dst_;
  // What the primitives read: src_ and diff_dst_ themselves, or their 16-bit copies.
  memory src_compute_, diff_dst_compute_;
  Call src_to_compute_, diff_dst_to_compute_;
  Call weights_to_fwd_, bias_to_fwd_, weights_to_bwd_, diff_weights_back_, diff_bias_back_;
  Call forward_, backward_data_, backward_weights_;
};

using ConvKernel = WeightedKernel<dnnl::convolution_forward, dnnl::convolution_backward_data,
                                  dnnl::convolution_backward_weights>;
using DenseKernel = WeightedKernel<dnnl::inner_product_forward, dnnl::inner_product_backward_data,
                                   dnnl::inner_product_backward_weights>;

std::unique_ptr<LayerKernel> make_conv(const Conv2DSpec& c, const LayerBinding& b, Device& device) {
  const memory::data_type t = compute_type();
  const memory::dims src_dims = image_dims(b.in);
  const memory::dims dst_dims = image_dims(b.out);
  const memory::dims strides = {c.stride, c.stride};
  // Keras's "same" puts the odd pixel after, which oneDNN takes as asymmetric padding.
  const Pads h = conv_padding(c, b.in[1]);
  const Pads w = conv_padding(c, b.in[2]);
  const memory::dims pad_before = {h.before, w.before};
  const memory::dims pad_after = {h.after, w.after};
  const memory::desc src = f32_desc(src_dims, Tag::nhwc);
  const memory::desc dst = f32_desc(dst_dims, Tag::nhwc);
  const memory::desc src_t(src_dims, t, Tag::nhwc);
  const memory::desc diff_dst_t(dst_dims, t, Tag::nhwc);
  const memory::dims weight_dims = {c.filters, b.in[3], c.kernel, c.kernel};
  const memory::desc any_weights_t(weight_dims, t, Tag::any);
  const memory::desc any_weights = f32_desc(weight_dims, Tag::any);
  // A zero descriptor is oneDNN's "no bias".
  const memory::desc bias = c.bias ? f32_desc({c.filters}, Tag::a) : memory::desc();
  const auto direct = dnnl::algorithm::convolution_direct;
  const ConvKernel::Descs descs{
      "NHWC",
      src,
      dst,
      src_t,
      diff_dst_t,
      f32_desc(weight_dims, Tag::oihw),
      bias,
      {dnnl::prop_kind::forward_training, direct, src_t, any_weights_t, bias, dst, strides,
       pad_before, pad_after},
      {direct, src, any_weights_t, diff_dst_t, strides, pad_before, pad_after},
      {direct, src_t, any_weights, bias, diff_dst_t, strides, pad_before, pad_after},
      std::nullopt,
      {},
      {},
  };
  return std::make_unique<ConvKernel>(device, b, descs);
}

// Over the last dimension: a sequence's positions are rows like the samples, so [N, S, D] is
// one [N·S, D] matrix.
std::unique_ptr<LayerKernel> make_dense(const DenseSpec& d, const LayerBinding& b, Device& device) {
  const memory::data_type t = compute_type();
  const int64_t features = b.in[b.in.rank() - 1];
  const int64_t rows = b.in.numel() / features;
  const memory::desc src = f32_desc({rows, features}, Tag::nc);
  const memory::desc dst = f32_desc({rows, d.units}, Tag::nc);
  const memory::desc src_t({rows, features}, t, Tag::nc);
  const memory::desc diff_dst_t({rows, d.units}, t, Tag::nc);
  const memory::dims weight_dims = {d.units, features};
  // PyTorch's [out, in] layout for every pass: oneDNN's choice ("ba" forward) would cost a
  // transpose of the weights every forward and of their gradient every backward, measured
  // as large as the GEMM itself for mlp-41m's 8000x4000 layer; gemm takes either layout.
  const memory::desc plain_weights = f32_desc(weight_dims, Tag::ab);
  const memory::desc plain_weights_t(weight_dims, t, Tag::ab);
  // A zero descriptor is oneDNN's "no bias".
  const memory::desc bias = d.bias ? f32_desc({d.units}, Tag::a) : memory::desc();
  const DenseKernel::Descs descs{
      "NC",
      src,
      dst,
      src_t,
      diff_dst_t,
      plain_weights,
      bias,
      {dnnl::prop_kind::forward_training, src_t, plain_weights_t, bias, dst},
      {src, plain_weights_t, diff_dst_t},
      {src_t, plain_weights, bias, diff_dst_t},
      dnnl::matmul::desc(src_t, memory::desc({features, d.units}, t, memory::dims{1, features}),
                         d.bias ? f32_desc({1, d.units}, Tag::ab) : memory::desc(), dst),
      plain_weights_t,
      f32_desc({1, d.units}, Tag::ab),
  };
  return std::make_unique<DenseKernel>(device, b, descs);
}

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
    src_ = unbound(src);
    dst_ = unbound(dst);
    diff_src_ = unbound(src);
    diff_dst_ = unbound(dst);
    forward_ = plan<dnnl::pooling_forward>(fwd_pd, {{DNNL_ARG_SRC, src_}, {DNNL_ARG_DST, dst_}});
    backward_ = plan<dnnl::pooling_backward>(
        bwd_pd, {{DNNL_ARG_DIFF_DST, diff_dst_}, {DNNL_ARG_DIFF_SRC, diff_src_}});
    allocate_scratchpad();
  }
};

// Element-wise activations over the flat tensor (any layout). Backward computes the
// derivative from the output (the *_use_dst_for_bwd algorithms), which the caller keeps, except
// GELU's, which oneDNN computes from the input.
class EltwiseKernel final : public UnaryKernel {
 public:
  EltwiseKernel(Device& device, dnnl::algorithm algorithm, int64_t numel) : UnaryKernel(device) {
    const memory::desc data = f32_desc({numel}, Tag::a);
    const dnnl::eltwise_forward::desc fwd(dnnl::prop_kind::forward_training, algorithm, data, 0.0f,
                                          0.0f);
    const dnnl::eltwise_forward::primitive_desc fwd_pd(fwd, attr_, engine_);
    const dnnl::eltwise_backward::desc bwd(algorithm, data, data, 0.0f, 0.0f);
    const dnnl::eltwise_backward::primitive_desc bwd_pd(bwd, attr_, engine_, fwd_pd);
    src_ = unbound(data);
    dst_ = unbound(data);
    diff_src_ = unbound(data);
    diff_dst_ = unbound(data);
    const bool from_src = algorithm == dnnl::algorithm::eltwise_gelu_tanh;
    forward_ = plan<dnnl::eltwise_forward>(fwd_pd, {{DNNL_ARG_SRC, src_}, {DNNL_ARG_DST, dst_}});
    backward_ = plan<dnnl::eltwise_backward>(
        bwd_pd, {{from_src ? DNNL_ARG_SRC : DNNL_ARG_DST, from_src ? src_ : dst_},
                 {DNNL_ARG_DIFF_DST, diff_dst_},
                 {DNNL_ARG_DIFF_SRC, diff_src_}});
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
    src_ = unbound(nhwc);
    dst_ = unbound(nchw);
    diff_src_ = unbound(nhwc);
    diff_dst_ = unbound(nchw);
    forward_ = reorder(src_, dst_);
    backward_ = reorder(diff_dst_, diff_src_);
    allocate_scratchpad();
  }
};

std::unique_ptr<LayerKernel> build(const LayerSpec& spec, const LayerBinding& b, Device& device) {
  return std::visit(
      Overloaded{
          [&](const Conv2DSpec& c) { return make_conv(c, b, device); },
          [&](const MaxPool2DSpec& p) { return make_cpu_max_pool(p, b); },
          [&](const DenseSpec& d) { return make_dense(d, b, device); },
          [&](const ActivationSpec& a) -> std::unique_ptr<LayerKernel> {
            return std::make_unique<EltwiseKernel>(device, eltwise_algorithm(a.kind, false),
                                                   b.in.numel());
          },
          [&](const FlattenSpec&) -> std::unique_ptr<LayerKernel> {
            return std::make_unique<FlattenKernel>(device, b.in);
          },
          [&](const GlobalAvgPoolSpec&) -> std::unique_ptr<LayerKernel> {
            return std::make_unique<GlobalAvgPoolKernel>(device, b.in);
          },
          [&](const BatchNorm2DSpec& n) { return make_cpu_batch_norm(n, b, device); },
          [&](const PadShortcutSpec& p) { return make_cpu_pad_shortcut(p, b); },
          [&](const AddSpec&) -> std::unique_ptr<LayerKernel> {
            throw_error("Add is computed by the model, not a layer kernel");
          },
          [&](const LayerNormSpec& n) { return make_cpu_layer_norm(n, b, device); },
          [&](const CausalSelfAttentionSpec& a) { return make_cpu_attention(a, b, device); },
          [&](const EmbeddingSpec& e) { return make_cpu_embedding(e, b, device); },
          [&](const PositionEmbeddingSpec& p) { return make_cpu_position_embedding(p, b, device); },
          [&](const DropoutSpec& d) { return make_cpu_dropout(d, b); },
      },
      spec);
}

}  // namespace

bool cpu_fuses_activation(const LayerSpec& layer, Activation activation) {
  const bool weighted =
      std::holds_alternative<Conv2DSpec>(layer) || std::holds_alternative<DenseSpec>(layer);
  return (weighted && activation != Activation::kGelu) ||
         (cpu_fuses_relu_backward(layer) && activation == Activation::kRelu);
}

// Batch norm's loops (cpu_norm.cpp) apply a ReLU in forward and its mask in backward.
bool cpu_fuses_relu_backward(const LayerSpec& producer) {
  return std::holds_alternative<BatchNorm2DSpec>(producer);
}

bool cpu_fuses_relu_gradient(const LayerSpec& reader) {
  return std::holds_alternative<MaxPool2DSpec>(reader);
}

std::unique_ptr<LayerKernel> make_cpu_layer(const LayerSpec& spec, const LayerBinding& binding,
                                            Device& device) {
  check_layer_binding(spec, binding);
  SS_CHECK(!binding.activation || cpu_fuses_activation(spec, *binding.activation),
           "{}: the CPU kernel cannot apply a fused activation", describe(spec));
  SS_CHECK(!binding.relu_backward ||
               (binding.activation == Activation::kRelu && cpu_fuses_relu_backward(spec)),
           "{}: the CPU kernel cannot compute a fused ReLU's backward", describe(spec));
  SS_CHECK(!binding.relu_gradient || cpu_fuses_relu_gradient(spec),
           "{}: the CPU kernel cannot compute a fused ReLU's gradient", describe(spec));
  std::unique_ptr<LayerKernel> kernel;
  SS_CHECK_DNNL(kernel = build(spec, binding, device));
  return kernel;
}

}  // namespace scalescope
