// Convolutions and dense layers on CPU: oneDNN primitives with weights, planned once per shape
// (the backend's choice of kernel per layer is in cpu_layers.cpp).
//
// Every kernel is planned completely in its constructor: primitive descriptors, primitives,
// memory objects, internal weight copies and one scratchpad shared by the kernel's
// primitives. forward() and backward() only point memory objects at the caller's buffers
// and execute, so a training step allocates no tensor memory.
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
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "core/buffer.h"
#include "core/check.h"
#include "models/cpu/cpu_kernels.h"
#include "models/cpu/dnnl_kernel.h"
#include "models/cpu/padded_weight_gradient.h"

namespace scalescope {
namespace {

using cpu_dnnl::Call;
using cpu_dnnl::DnnlKernel;
using cpu_dnnl::eltwise_algorithm;
using cpu_dnnl::emulates_fp16;
using cpu_dnnl::f32_desc;
using cpu_dnnl::image_dims;
using cpu_dnnl::set_handle;
using dnnl::memory;
using Tag = memory::format_tag;

// The data type convolutions and dense layers multiply in (models/kernels.h set_precision):
// bf16 under Precision::kBf16, fp32 under every other (TF32 is a GPU format).
memory::data_type compute_type() {
  return precision() == Precision::kBf16 ? memory::data_type::bf16 : memory::data_type::f32;
}

// A dense layer's backward as matmuls, where oneDNN 2.6's inner product with PyTorch's [out, in]
// weights runs gemm:jit. Under bf16 all three: gpt:preset=mini's backward passes took 1.5-1.9 ms
// there for each of the MLP's projections at 2048 rows against 0.6-0.9 ms as matmuls on AMX
// (brg:avx512_core_amx_bf16, 2 threads). Under fp32 the weight gradient alone, and only where
// fp32_weight_gradient_by_matmul says so. dx = dy·W, reading the forward's copy of W as
// [out, in]; dW = dyᵀ·x, dy read as [out, rows] through strides, written in PyTorch's layout;
// db by bias_grad_cpu, summed in fp32.
struct MatmulBackward {
  std::optional<dnnl::matmul::desc> data;  // none: the inner product's backward data
  dnnl::matmul::desc weights;
  memory::desc weights_rows;  // the forward's copy of W as [out, in]
  memory::desc dy_columns;    // dy as [out, rows]
};

// Whether an fp32 dense layer computes its weight gradient as a matmul (brg:avx512_core) rather
// than the inner product's gemm:jit: where the rows are many and the weights few. Measured with
// oneDNN 2.6 on 2 threads of this project's Xeon (AVX-512), dW alone, ms: 2048 rows, 256 → 1024
// (gpt:preset=mini's MLP) 3.69-3.93 against 4.64-5.13, 256 → 768 2.73 against 3.04; 4096 rows,
// 256 → 1024 6.5-6.7 against 8.5-9.6; but 32 rows, 8000 → 4000 (mlp-41m) 21-25 against 8.7-9.8,
// and 512 rows at 8000 → 4000 130 against 96. The backward data stays gemm:jit's, which the
// matmul beat by 4% at most at these shapes and lost to by up to 2.4× (32 rows, 4000 → 2000).
bool fp32_weight_gradient_by_matmul(int64_t rows, int64_t features, int64_t units) {
  return rows >= 1024 && features * units <= (int64_t{1} << 20);
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
  // on mlp-41m's 8000->4000 (batch 64 and 32, 2 threads); its fp32 backward passes are as fast
  // as matmul's (its bf16 ones are not: matmul_backward).
  std::optional<dnnl::matmul::desc> matmul;
  memory::desc matmul_weights;
  memory::desc matmul_bias;
  // Under bf16, the same matmul writing bf16: into the model's saved copy of the output
  // (forward_into_saved).
  std::optional<dnnl::matmul::desc> matmul_to_bf16;
  // The dense layers' backward passes that run as matmuls (MatmulBackward).
  std::optional<MatmulBackward> matmul_backward;
  // Convolutions under bf16: `fwd` writing bf16, the same way (the forward's own rounding of its
  // fp32 sums, which the model's save of the fp32 output would make).
  std::optional<typename Fwd::desc> fwd_to_bf16;
};

// Convolution and dense layers: y = W·x + b, with the weights in whatever layout (and type)
// the primitive descriptors ask for, reordered from and to PyTorch's fp32 when it differs.
template <class Fwd, class BwdData, class BwdWeights>
class WeightedKernel final : public DnnlKernel {
 public:
  using Descs = WeightedDescs<Fwd, BwdData, BwdWeights>;

  WeightedKernel(Device& device, const LayerBinding& binding, const Descs& d) : DnnlKernel(device) {
    const typename Fwd::primitive_desc fwd_pd(d.fwd, forward_attr(binding.activation), engine_);
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
    if (d.matmul_backward) {
      if (!d.matmul_backward->data && binding.input_gradient) {
        plan_backward_data(fwd_pd, d, weights, fwd_weights);
      }
      plan_matmul_backward(*d.matmul_backward, d.layout, binding, fwd_weights);
    } else {
      // A layer on the model's input never computes its input's gradient: no primitive for
      // it, nor its copy of the weights or its scratchpad.
      if (binding.input_gradient) plan_backward_data(fwd_pd, d, weights, fwd_weights);
      plan_weight_gradient(bwd_weights_pd, d, binding);
    }
    allocate_scratchpad();
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

  // Under bf16 a dense layer's forward may also write its output as the bf16 copy the model
  // saves (the fp32 result rounded, as the save rounds it) instead of fp32.
  SavedOutput forwards_into_saved(kernel_math::HalfFormat format) const override {
    return forward_to_bf16_ && reads_saved(format) ? SavedOutput::kFromSavedInput
                                                   : SavedOutput::kNo;
  }
  void forward_into_saved(const float*, const uint16_t* saved_in, uint16_t* out,
                          kernel_math::HalfFormat, Stream&) override {
    bind_pass_local();
    src_compute_.set_data_handle(const_cast<uint16_t*>(saved_in));
    dst_bf16_.set_data_handle(out);
    if (weights_to_fwd_) weights_to_fwd_.run(stream_);
    forward_to_bf16_.run(stream_);
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
  // And the output's gradient as the plain bf16 copy the primitives read, rounded by its writer.
  bool reads_half_gradient(kernel_math::HalfFormat format) const override {
    return reads_saved(format);
  }
  void backward_from_half_gradient(const uint16_t* in, const uint16_t*, const uint16_t* dout,
                                   float* din, Stream&) override {
    bind_pass_local();
    src_compute_.set_data_handle(const_cast<uint16_t*>(in));
    diff_dst_compute_.set_data_handle(const_cast<uint16_t*>(dout));
    backward_from_copies(nullptr, din);
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
  // Backward once src_compute_ holds the input as the primitives read it; `dout` null:
  // diff_dst_compute_ holds its copy.
  void backward_from_copies(const float* dout, float* din) {
    if (dout != nullptr) {
      set_handle(diff_dst_, dout);
      if (diff_dst_to_compute_) diff_dst_to_compute_.run(stream_);
    }
    backward_weights_.run(stream_);
    if (diff_weights_back_) diff_weights_back_.run(stream_);
    if (diff_bias_back_) diff_bias_back_.run(stream_);
    if (din == nullptr) return;  // first layer: nobody needs the input's gradient
    SS_CHECK(static_cast<bool>(backward_data_),
             "a layer on the model's input asked for its input's gradient");
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
      forward_ = plan<dnnl::matmul>(pd, args);
      choices_.push_back(choice("forward", pd, d.layout));
      if (d.matmul_to_bf16 && !activation) {
        const dnnl::matmul::primitive_desc to_bf16(*d.matmul_to_bf16, attr_, engine_);
        dst_bf16_ = unbound(to_bf16.dst_desc());
        args[1] = {DNNL_ARG_DST, dst_bf16_};
        forward_to_bf16_ = plan<dnnl::matmul>(to_bf16, std::move(args));
      }
      return read;
    }
    const memory fwd_weights = adopt_operand(weights, fwd_pd.weights_desc(), weights_to_fwd_);
    args.emplace_back(DNNL_ARG_WEIGHTS, fwd_weights);
    if (bias != nullptr) {
      args.emplace_back(DNNL_ARG_BIAS,
                        adopt(over(d.bias, bias), fwd_pd.bias_desc(), true, bias_to_fwd_));
    }
    forward_ = plan<Fwd>(fwd_pd, args);
    choices_.push_back(choice("forward", fwd_pd, d.layout));
    if (d.fwd_to_bf16 && !activation) plan_forward_to_bf16(fwd_pd, *d.fwd_to_bf16, std::move(args));
    return fwd_weights;
  }

  // Plans forward_to_bf16_ where the bf16-writing primitive reads the weights' copy the forward
  // reads and runs the same implementation (so that it sums the same products in the same
  // order, and only the final rounding differs from the fp32 forward's).
  void plan_forward_to_bf16(const typename Fwd::primitive_desc& fwd_pd,
                            const typename Fwd::desc& to_bf16_desc,
                            std::vector<std::pair<int, memory>> args) {
    const typename Fwd::primitive_desc to_bf16(to_bf16_desc, forward_attr(std::nullopt), engine_);
    if (to_bf16.weights_desc() != fwd_pd.weights_desc() ||
        std::string(to_bf16.impl_info_str()) != fwd_pd.impl_info_str()) {
      return;
    }
    dst_bf16_ = unbound(to_bf16.dst_desc());
    args[1] = {DNNL_ARG_DST, dst_bf16_};
    forward_to_bf16_ = plan<Fwd>(to_bf16, std::move(args));
  }

  // Plans backward_data_. Backward data reads the weights of the last forward; when it wants the
  // layout the forward already produced, it shares that copy and backward reorders nothing.
  void plan_backward_data(const typename Fwd::primitive_desc& fwd_pd, const Descs& d,
                          const memory& weights, const memory& fwd_weights) {
    const typename BwdData::primitive_desc pd(d.bwd_data, attr_, engine_, fwd_pd);
    const memory::desc wanted = pd.weights_desc();
    const memory data_weights = wanted == fwd_weights.get_desc()
                                    ? fwd_weights
                                    : adopt_operand(weights, wanted, weights_to_bwd_);
    backward_data_ = plan<BwdData>(pd, {{DNNL_ARG_DIFF_DST, diff_dst_compute_},
                                        {DNNL_ARG_WEIGHTS, data_weights},
                                        {DNNL_ARG_DIFF_SRC, diff_src_}});
    choices_.push_back(choice("backward-data", pd, d.layout));
  }

  // Plans backward_weights_ as the primitive `pd`, or for an fp32 dense layer as
  // PaddedWeightGradient where that is wanted for the implementation oneDNN chose.
  void plan_weight_gradient(const typename BwdWeights::primitive_desc& pd, const Descs& d,
                            const LayerBinding& binding) {
    if constexpr (std::is_same_v<BwdWeights, dnnl::inner_product_backward_weights>) {
      const PaddedWeightGradient padded{d.src.dims()[0], d.src.dims()[1], d.dst.dims()[1]};
      if (d.src_compute == d.src && padded.wanted(pd.impl_info_str()))
        return plan_padded_weight_gradient(padded, d.layout, binding);
    }
    plan_backward_weights(pd, d, binding);
    choices_.push_back(choice("backward-weights", pd, d.layout));
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

  // Plans backward_weights_ (dW, then db) and, where it has one, backward_data_ as
  // MatmulBackward's matmuls.
  void plan_matmul_backward(const MatmulBackward& m, const char* layout,
                            const LayerBinding& binding, const memory& fwd_weights) {
    const dnnl::matmul::primitive_desc weights_pd(m.weights, attr_, engine_);
    const memory::dims columns = m.dy_columns.dims();  // [out, rows]
    const bool bf16 = m.dy_columns.data_type() == memory::data_type::bf16;
    const PaddedWeightGradient padded{columns[1], m.weights_rows.dims()[1], columns[0]};
    if (!bf16 && padded.wanted(weights_pd.impl_info_str())) {
      plan_padded_weight_gradient(padded, layout, binding);
    } else {
      plan_matmul_weight_gradient(weights_pd, m.dy_columns, binding);
      choices_.push_back(choice("backward-weights", weights_pd, layout));
    }
    if (binding.input_gradient && m.data) {
      const dnnl::matmul::primitive_desc data_pd(*m.data, attr_, engine_);
      backward_data_ = plan<dnnl::matmul>(
          data_pd,
          {{DNNL_ARG_SRC, diff_dst_compute_},
           {DNNL_ARG_WEIGHTS, memory(m.weights_rows, engine_, fwd_weights.get_data_handle())},
           {DNNL_ARG_DST, diff_src_}});
      choices_.push_back(choice("backward-data", data_pd, layout));
    }
  }

  // backward_weights_ as the matmul dW = dyᵀ·x, then db.
  void plan_matmul_weight_gradient(const dnnl::matmul::primitive_desc& pd,
                                   const memory::desc& dy_columns, const LayerBinding& binding) {
    dy_columns_ = unbound(dy_columns);
    Call weights =
        plan<dnnl::matmul>(pd, {{DNNL_ARG_SRC, dy_columns_},
                                {DNNL_ARG_WEIGHTS, src_compute_},
                                {DNNL_ARG_DST, over(pd.dst_desc(), binding.grads[0].data)}});
    float* db = binding.grads.size() > 1 ? binding.grads[1].data : nullptr;
    const memory::dims columns = dy_columns.dims();  // [out, rows]
    const bool bf16 = dy_columns.data_type() == memory::data_type::bf16;
    backward_weights_ = Call([this, weights, db, columns, bf16](const dnnl::stream& stream) {
      void* dy = diff_dst_compute_.get_data_handle();
      dy_columns_.set_data_handle(dy);
      weights.run(stream);
      if (db == nullptr) return;
      bias_grad_cpu(bf16 ? nullptr : static_cast<const float*>(dy),
                    bf16 ? static_cast<const uint16_t*>(dy) : nullptr, columns[1], columns[0], db);
    });
  }

  // backward_weights_ as PaddedWeightGradient (fp32), then db.
  void plan_padded_weight_gradient(const PaddedWeightGradient& padded, const char* layout,
                                   const LayerBinding& binding) {
    const memory scratch =
        pass_local(memory::desc({padded.scratch_bytes()}, memory::data_type::u8, Tag::a));
    float* dw = binding.grads[0].data;
    float* db = binding.grads.size() > 1 ? binding.grads[1].data : nullptr;
    backward_weights_ = Call([this, padded, scratch, dw, db](const dnnl::stream&) {
      const auto* dy = static_cast<const float*>(diff_dst_compute_.get_data_handle());
      padded.run(dy, static_cast<const float*>(src_compute_.get_data_handle()), dw,
                 static_cast<float*>(scratch.get_data_handle()));
      if (db != nullptr) bias_grad_cpu(dy, nullptr, padded.rows, padded.units, db);
    });
    choices_.push_back({"backward-weights", PaddedWeightGradient::implementation_name(), math_,
                        layout, true, padded.scratch_bytes()});
  }

  std::vector<KernelChoice> choices_;
  std::string math_;  // "fp32", "bf16" or "fp16-emulated", as reported
  memory src_, dst_, diff_src_, diff_dst_;
  // What the primitives read: src_ and diff_dst_ themselves, or their 16-bit copies.
  memory src_compute_, diff_dst_compute_;
  Call src_to_compute_, diff_dst_to_compute_;
  Call weights_to_fwd_, bias_to_fwd_, weights_to_bwd_, diff_weights_back_, diff_bias_back_;
  Call forward_, backward_data_, backward_weights_;
  memory dst_bf16_;  // the saved bf16 copy forward_to_bf16_ writes
  Call forward_to_bf16_;
  memory dy_columns_;  // MatmulBackward's view of diff_dst_compute_
};

using ConvKernel = WeightedKernel<dnnl::convolution_forward, dnnl::convolution_backward_data,
                                  dnnl::convolution_backward_weights>;
using DenseKernel = WeightedKernel<dnnl::inner_product_forward, dnnl::inner_product_backward_data,
                                   dnnl::inner_product_backward_weights>;

}  // namespace

std::unique_ptr<LayerKernel> make_cpu_conv(const Conv2DSpec& c, const LayerBinding& b,
                                           Device& device) {
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
  ConvKernel::Descs descs{
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
      std::nullopt,
      std::nullopt,
      std::nullopt,
  };
  if (t == memory::data_type::bf16) {
    descs.fwd_to_bf16 = dnnl::convolution_forward::desc(
        dnnl::prop_kind::forward_training, direct, src_t, any_weights_t, bias,
        memory::desc(dst_dims, t, Tag::nhwc), strides, pad_before, pad_after);
  }
  return std::make_unique<ConvKernel>(device, b, descs);
}

// Over the last dimension: a sequence's positions are rows like the samples, so [N, S, D] is
// one [N·S, D] matrix.
std::unique_ptr<LayerKernel> make_cpu_dense(const DenseSpec& d, const LayerBinding& b,
                                            Device& device) {
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
  // The matmul reads the [out, in] weights as [in, out] through strides.
  const memory::desc weights_read({features, d.units}, t, memory::dims{1, features});
  const memory::desc matmul_bias = d.bias ? f32_desc({1, d.units}, Tag::ab) : memory::desc();
  DenseKernel::Descs descs{
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
      dnnl::matmul::desc(src_t, weights_read, matmul_bias, dst),
      plain_weights_t,
      f32_desc({1, d.units}, Tag::ab),
      std::nullopt,
      std::nullopt,
      std::nullopt,
  };
  const bool bf16 = t == memory::data_type::bf16;
  if (bf16) {
    descs.matmul_to_bf16 = dnnl::matmul::desc(src_t, weights_read, matmul_bias,
                                              memory::desc({rows, d.units}, t, Tag::ab));
  }
  if (bf16 || fp32_weight_gradient_by_matmul(rows, features, d.units)) {
    const memory::desc dy_columns({d.units, rows}, t, Tag::ba);
    descs.matmul_backward = MatmulBackward{
        bf16 ? std::optional(dnnl::matmul::desc(diff_dst_t, plain_weights_t, src)) : std::nullopt,
        dnnl::matmul::desc(dy_columns, src_t, plain_weights), plain_weights_t, dy_columns};
  }
  return std::make_unique<DenseKernel>(device, b, descs);
}

}  // namespace scalescope
