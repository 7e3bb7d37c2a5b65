// Conv2D on cuDNN. Activations are NHWC and weights OIHW (PyTorch's layout), as everywhere.
//
// In NHWC (the plan whenever cuDNN allows it) cuDNN reads the activations as they are and an
// OHWI copy of the weights, made by a transpose in the shared workspace by each pass that reads
// it (cuDNN's NHWC kernels want the filter in the activations' layout); the weight gradient is
// transposed back into OIHW. In NCHW (the fallback where
// cuDNN offers no allowed NHWC algorithm for some pass, conv_planning.h) the weights are used
// as they are, and the activations and their gradients are transposed around each call into
// two buffers of this kernel.
//
// Under bf16 and fp16 cuDNN computes on 16-bit tensors (its PSEUDO_BFLOAT16 and PSEUDO_HALF
// configurations: fp32 accumulation): each pass rounds its operands into 16-bit copies in the
// stream's shared workspace (autocast's casts, as the dense layers do) and writes its result
// there in 16 bits, which is widened into the fp32 buffer (output, input gradient, weight
// gradient): rounded to the format, as PyTorch's autocast leaves a convolution's results. The
// layout work (extension, transposes) stays in fp32 around the copies.
//
// Keras's "same" padding puts the odd pixel after (TensorFlow's split), which cuDNN's
// symmetric padding cannot express, and no symmetric padding plus a crop gives the same
// windows at stride 2 (they would start one pixel off). So where the padding is asymmetric,
// the kernel gives cuDNN an input extended by one zero row at the bottom and/or one zero
// column at the right (the `after - before` excess, always 0 or 1), built in a buffer of its
// own every forward, and pads the rest symmetrically: top = before, bottom = 1 + before =
// after. Backward computes the data gradient of the extended input into the same buffer and
// crops it, dropping the gradient of the zeros. Symmetric "same" and "valid" padding go to
// cuDNN directly.
#include <cudnn.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "core/buffer.h"
#include "core/check.h"
#include "core/log.h"
#include "models/cuda/conv_benchmark.h"
#include "models/cuda/conv_planning.h"
#include "models/cuda/cuda_kernels.h"
#include "models/cuda/cuda_layer_util.h"
#include "models/cuda/cuda_libraries.h"
#include "models/cuda/cuda_ops.h"

namespace scalescope {
namespace {

// The memory the workspace limit is taken from, now. REQUIRES: the device current.
ConvMemory memory_now(CudaDevice& device, size_t shared, size_t own) {
  size_t free = 0;
  size_t total = 0;
  SS_CHECK_CUDA(cudaMemGetInfo(&free, &total));
  return {.free = free,
          .limit = device.memory_limit(),
          .in_use = device.memory_in_use(),
          .shared = shared,
          .own = own};
}

struct ConvShape {
  int64_t batch, in_h, in_w, channels, out_h, out_w, filters, kernel;
  int64_t extra_h = 0;  // zero rows appended to the input (asymmetric padding)
  int64_t extra_w = 0;
  int64_t x_h() const { return in_h + extra_h; }
  int64_t x_w() const { return in_w + extra_w; }
  int64_t x_numel() const { return batch * x_h() * x_w() * channels; }
  int64_t out_pixels() const { return out_h * out_w; }
  bool extended() const { return extra_h > 0 || extra_w > 0; }
};

// The cuDNN descriptors of one convolution and the questions planning asks about them.
class ConvDescriptors final : public ConvQueries {
 public:
  ConvDescriptors(const Conv2DSpec& c, const ConvShape& s, const LayerSpec& spec,
                  cudnnDataType_t data, cudnnHandle_t planning)
      : planning_(planning), data_(data) {
    // cuDNN's legacy descriptors index with int: the tensors themselves must stay below 2^31
    // elements, not just their dimensions.
    to_int(s.x_numel(), "the input's size", spec);
    to_int(s.batch * s.out_pixels() * s.filters, "the output's size", spec);
    n_ = to_int(s.batch, "the batch", spec);
    c_ = to_int(s.channels, "channels", spec);
    x_h_ = to_int(s.x_h(), "the height", spec);
    x_w_ = to_int(s.x_w(), "the width", spec);
    f_ = to_int(s.filters, "filters", spec);
    out_h_ = to_int(s.out_h, "the output height", spec);
    out_w_ = to_int(s.out_w, "the output width", spec);
    k_ = to_int(s.kernel, "the kernel", spec);
    stride_ = to_int(c.stride, "the stride", spec);
    pad_h_ = static_cast<int>(conv_padding(c, s.in_h).before);
    pad_w_ = static_cast<int>(conv_padding(c, s.in_w).before);
    for (const ConvPass pass : kConvPasses) {
      SS_CHECK_CUDNN(cudnnSetConvolution2dDescriptor(conv(pass), pad_h_, pad_w_, stride_, stride_,
                                                     1, 1, CUDNN_CROSS_CORRELATION,
                                                     CUDNN_DATA_FLOAT));
    }
    set_layout(CUDNN_TENSOR_NHWC);
    int dims[4] = {};
    SS_CHECK_CUDNN(cudnnGetConvolution2dForwardOutputDim(conv(ConvPass::kForward), x(), w(),
                                                         &dims[0], &dims[1], &dims[2], &dims[3]));
    SS_CHECK(dims[0] == n_ && dims[1] == f_ && dims[2] == out_h_ && dims[3] == out_w_,
             "{}: cuDNN computes an output of [{}, {}, {}, {}] (NCHW) for [{}, {}, {}, {}]",
             describe(spec), dims[0], dims[1], dims[2], dims[3], n_, f_, out_h_, out_w_);
  }

  // Sets the three tensors' layout (the filter's follows the activations').
  void set_layout(cudnnTensorFormat_t layout) {
    if (layout == layout_) return;
    SS_CHECK_CUDNN(cudnnSetTensor4dDescriptor(x_.get(), layout, data_, n_, c_, x_h_, x_w_));
    SS_CHECK_CUDNN(cudnnSetTensor4dDescriptor(y_.get(), layout, data_, n_, f_, out_h_, out_w_));
    SS_CHECK_CUDNN(cudnnSetFilter4dDescriptor(w_.get(), data_, layout, f_, c_, k_, k_));
    layout_ = layout;
  }
  // Sets the plan's layout and each pass's math on its own descriptor (passes may differ).
  void apply(const ConvPlan& plan) {
    set_layout(plan.layout);
    for (const ConvPass pass : kConvPasses)
      SS_CHECK_CUDNN(cudnnSetConvolutionMathType(conv(pass), plan[pass].math));
  }

  // Under --conv-search benchmark: what candidates() times the passes with, set while the
  // kernel plans (null: the heuristics' ranking).
  struct Timing {
    int gpu = 0;
    ConvPolicy policy;
    void* x = nullptr;  // device buffers of the tensors' sizes
    void* w = nullptr;
    void* y = nullptr;
    std::function<void*(size_t)> workspace;  // a device buffer of at least that many bytes
  };
  void time_with(const Timing* timing) { timing_ = timing; }

  std::vector<ConvCandidate> candidates(ConvPass pass, cudnnTensorFormat_t layout,
                                        cudnnMathType_t requested) override {
    set_layout(layout);
    SS_CHECK_CUDNN(cudnnSetConvolutionMathType(conv(pass), requested));
    std::vector<ConvCandidate> proposed = heuristics(pass);
    // The heuristics time nothing, and cuDNN's header does not say what they leave in `time`:
    // none of it may reach the report as a measurement.
    for (ConvCandidate& c : proposed) c.time_ms = -1;
    if (timing_ == nullptr) return proposed;
    return timed(pass, layout, requested, proposed);
  }

  cudnnStatus_t workspace(ConvPass pass, cudnnTensorFormat_t layout, int algo, cudnnMathType_t math,
                          size_t* bytes) override {
    set_layout(layout);
    const cudnnStatus_t set = cudnnSetConvolutionMathType(conv(pass), math);
    if (set != CUDNN_STATUS_SUCCESS) return set;
    switch (pass) {
      case ConvPass::kForward:
        return cudnnGetConvolutionForwardWorkspaceSize(planning_, x(), w(), conv(pass), y(),
                                                       static_cast<cudnnConvolutionFwdAlgo_t>(algo),
                                                       bytes);
      case ConvPass::kBackwardData:
        return cudnnGetConvolutionBackwardDataWorkspaceSize(
            planning_, w(), y(), conv(pass), x(), static_cast<cudnnConvolutionBwdDataAlgo_t>(algo),
            bytes);
      case ConvPass::kBackwardFilter:
        return cudnnGetConvolutionBackwardFilterWorkspaceSize(
            planning_, x(), y(), conv(pass), w(),
            static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo), bytes);
    }
    return CUDNN_STATUS_BAD_PARAM;
  }

  cudnnTensorDescriptor_t x() const { return x_.get(); }
  cudnnTensorDescriptor_t y() const { return y_.get(); }
  cudnnFilterDescriptor_t w() const { return w_.get(); }
  cudnnConvolutionDescriptor_t conv(ConvPass pass) const {
    return convs_[static_cast<size_t>(pass)].get();
  }

 private:
  // The heuristics' proposals of one pass, for the descriptors as they are set.
  std::vector<ConvCandidate> heuristics(ConvPass pass) {
    switch (pass) {
      case ConvPass::kForward:
        return conv_candidates_from<cudnnConvolutionFwdAlgoPerf_t>(
            planning_, cudnnGetConvolutionForwardAlgorithmMaxCount,
            [&](int n, int* got, auto* perf) {
              return cudnnGetConvolutionForwardAlgorithm_v7(planning_, x(), w(), conv(pass), y(), n,
                                                            got, perf);
            });
      case ConvPass::kBackwardData:
        return conv_candidates_from<cudnnConvolutionBwdDataAlgoPerf_t>(
            planning_, cudnnGetConvolutionBackwardDataAlgorithmMaxCount,
            [&](int n, int* got, auto* perf) {
              return cudnnGetConvolutionBackwardDataAlgorithm_v7(planning_, w(), y(), conv(pass),
                                                                 x(), n, got, perf);
            });
      case ConvPass::kBackwardFilter:
        return conv_candidates_from<cudnnConvolutionBwdFilterAlgoPerf_t>(
            planning_, cudnnGetConvolutionBackwardFilterAlgorithmMaxCount,
            [&](int n, int* got, auto* perf) {
              return cudnnGetConvolutionBackwardFilterAlgorithm_v7(planning_, x(), y(), conv(pass),
                                                                   w(), n, got, perf);
            });
    }
    return {};
  }

  // The pass's algorithms as cuDNN times them (cached per shape: conv_benchmark.h) with the
  // workspace conv_timing_workspace offers.
  std::vector<ConvCandidate> timed(ConvPass pass, cudnnTensorFormat_t layout,
                                   cudnnMathType_t requested,
                                   const std::vector<ConvCandidate>& proposed) {
    const size_t offered = conv_timing_workspace(*this, pass, layout, proposed, timing_->policy);
    SS_CHECK_CUDNN(cudnnSetConvolutionMathType(conv(pass), requested));  // workspace() set others
    const std::string key = fmt::format(
        "gpu {} {} {} math {} data {} n {} c {} in {}x{} f {} k {} out {}x{} stride {} pad {},{} "
        "workspace {}",
        timing_->gpu, to_string(pass), tensor_format_name(layout), math_type_name(requested),
        static_cast<int>(data_), n_, c_, x_h_, x_w_, f_, k_, out_h_, out_w_, stride_, pad_h_,
        pad_w_, offered);
    return cached_conv_timing(key, [&] {
      const ConvFindArgs args{planning_,  x(),        w(),
                              conv(pass), y(),        timing_->x,
                              timing_->w, timing_->y, timing_->workspace(offered),
                              offered};
      return find_conv_algorithms(pass, args);
    });
  }

  cudnnHandle_t planning_;
  cudnnDataType_t data_;  // the tensors' (the convolution computes in float)
  int n_ = 0, c_ = 0, x_h_ = 0, x_w_ = 0, f_ = 0, out_h_ = 0, out_w_ = 0, k_ = 0;
  int stride_ = 1, pad_h_ = 0, pad_w_ = 0;
  const Timing* timing_ = nullptr;
  std::optional<cudnnTensorFormat_t> layout_;
  TensorDescriptor x_;  // the input as cuDNN sees it (extended where padding is asymmetric)
  TensorDescriptor y_;
  FilterDescriptor w_;
  ConvolutionDescriptor convs_[3];  // in kConvPasses order
};

ConvShape conv_shape(const Conv2DSpec& c, const LayerBinding& b) {
  ConvShape s{b.in[0], b.in[1], b.in[2], b.in[3], b.out[1], b.out[2], c.filters, c.kernel};
  const Pads pad_h = conv_padding(c, s.in_h);
  const Pads pad_w = conv_padding(c, s.in_w);
  s.extra_h = pad_h.after - pad_h.before;
  s.extra_w = pad_w.after - pad_w.before;
  return s;
}

class ConvKernel final : public LayerKernel {
 public:
  ConvKernel(const Conv2DSpec& c, const LayerSpec& spec, const LayerBinding& b, CudaDevice& device)
      : libraries_(cuda_libraries(device)),
        shape_(conv_shape(c, b)),
        descriptors_(c, shape_, spec, conv_data_type(precision_), libraries_->cudnn_for_planning()),
        weight_(b.params[0].data),
        // Bias-free convolutions (ResNets') are bound to the weight alone.
        bias_(c.bias ? b.params[1].data : nullptr),
        weight_grad_(b.grads[0].data),
        bias_grad_(c.bias ? b.grads[1].data : nullptr) {
    // The regions after cuDNN's: the 16-bit copies and the weight gradient.
    const size_t copies = region_offset(kRegions) - region_offset(kX16);
    limit_ = conv_workspace_limit(memory_now(device, libraries_->workspace_bytes(), copies));
    const ConvPolicy policy{precision_, determinism(), limit_.bytes, b.input_gradient};
    plan_ = plan_passes(policy, describe(spec), device);
    descriptors_.apply(plan_);
    if (nchw())
      SS_LOG_DEBUG("{}: planned in NCHW, NHWC refused: {}", describe(spec), plan_.nhwc_refusals);
    if (nchw()) {
      x_nchw_ = float_buffer(device, shape_.x_numel());
      y_nchw_ = float_buffer(device, b.out.numel());
    }
    if (bias_ != nullptr)
      bias_scratch_ = float_buffer(device, cuda_ops::bias_grad_scratch(rows(), shape_.filters));
    if (shape_.extended()) extended_ = float_buffer(device, shape_.x_numel());
    for (const ConvChoice& choice : plan_.passes)
      cudnn_workspace_ = std::max(cudnn_workspace_, choice.workspace);
    libraries_->reserve_workspace(region_offset(kRegions));
  }

  void forward(const float* in, float* out, Stream& stream) override {
    const cudaStream_t s = cuda_stream(stream);
    const float* x = shape_.extended() ? extend(in, s) : in;
    if (nchw()) x = to_nchw(x, floats(x_nchw_), shape_.x_h() * shape_.x_w(), shape_.channels, s);
    forward_from(operand(x, kX16, s), out, s);
  }

  // In 16 bits an NHWC plan of an input cuDNN reads as it is (no extension) reads the model's
  // saved 16-bit copy of its input, in both passes: the same values operand() would round into
  // a copy of its own (the model rounds them as operand() does), without the copy, nor in
  // backward the restore of the input from that copy.
  bool forwards_from_saved(kernel_math::HalfFormat format) const override {
    return reads_saved(format);
  }
  void forward_saved(const uint16_t* in, float* out, Stream& stream) override {
    forward_from(in, out, cuda_stream(stream));
  }
  bool reads_saved(kernel_math::HalfFormat format) const override {
    return half_ == format && !nchw() && !shape_.extended();
  }
  // Such a plan without a bias (ResNets' convolutions) also writes cuDNN's 16-bit result
  // straight into the model's saved copy of its output where every reader reads only that (a
  // batch norm's): the bits widening it and the model's rounding would give, without the fp32
  // output or either pass.
  SavedOutput forwards_into_saved(kernel_math::HalfFormat format) const override {
    return reads_saved(format) && bias_ == nullptr ? SavedOutput::kFromSavedInput
                                                   : SavedOutput::kNo;
  }
  void forward_into_saved(const float*, const uint16_t* saved_in, uint16_t* out,
                          kernel_math::HalfFormat, Stream& stream) override {
    forward_from(saved_in, nullptr, cuda_stream(stream), out);
  }
  void backward_saved(const uint16_t* in, const uint16_t*, const float* dout, float* din,
                      Stream& stream) override {
    const cudaStream_t s = cuda_stream(stream);
    backward_passes(in, operand(dout, kY16, s), dout, din, s);
  }
  // Such a plan without a bias (whose gradient sums dy in fp32) reads its output's gradient as
  // the 16-bit copy its reader's backward wrote (a batch norm's), which both passes read: no
  // fp32 gradient, nor the pass rounding it into the workspace.
  bool reads_half_gradient(kernel_math::HalfFormat format) const override {
    return reads_saved(format) && bias_ == nullptr;
  }
  void backward_from_half_gradient(const uint16_t* in, const uint16_t*, const uint16_t* dout,
                                   float* din, Stream& stream) override {
    backward_passes(in, dout, nullptr, din, cuda_stream(stream));
  }

  void backward(const float* in, const float*, const float* dout, float* din,
                Stream& stream) override {
    const cudaStream_t s = cuda_stream(stream);
    // The extension buffer still holds the last forward's input unless a data gradient was
    // written over it since.
    const float* x = in;
    if (shape_.extended()) x = extended_holds_input_ ? floats(extended_) : extend(in, s);
    const float* dy = dout;
    if (nchw()) {
      // Backward reads the input again: the NCHW buffer may hold an earlier data gradient.
      x = to_nchw(x, floats(x_nchw_), shape_.x_h() * shape_.x_w(), shape_.channels, s);
      dy = to_nchw(dout, floats(y_nchw_), shape_.out_pixels(), shape_.filters, s);
    }
    backward_passes(operand(x, kX16, s), operand(dy, kY16, s), dout, din, s);
  }

  // The plan of the three passes: by cuDNN's heuristics, or under --conv-search benchmark from
  // cuDNN's timings on buffers of this layer's sizes, held only while it plans.
  ConvPlan plan_passes(const ConvPolicy& policy, const std::string& layer, CudaDevice& device) {
    if (conv_search() != ConvSearch::kBenchmark)
      return plan_convolution(descriptors_, policy, layer);
    const size_t element = half_ ? 2 : sizeof(float);
    const auto filled = [&](int64_t count) {
      // Finite values, not zeros, which some kernels run faster on than on real data: bytes
      // 0x3c read as 0.0115 in fp32 and bf16, 1.06 in fp16. Each timing writes its pass's
      // result into one of the three (y, x or w), which the later timings read as it is.
      DeviceBuffer buffer(device, static_cast<size_t>(count) * element);
      SS_CHECK_CUDA(cudaMemset(buffer.data(), 0x3c, buffer.bytes()));
      return buffer;
    };
    const DeviceBuffer x = filled(shape_.x_numel());
    const DeviceBuffer w = filled(shape_.filters * shape_.channels * area());
    const DeviceBuffer y = filled(rows() * shape_.filters);
    // cudaMemset runs on the legacy stream, which the planning handle's (non-blocking) stream
    // does not wait for: the fills finish before the first timing starts.
    SS_CHECK_CUDA(cudaDeviceSynchronize());
    DeviceBuffer workspace;
    const auto workspace_of = [&](size_t bytes) -> void* {
      if (workspace.bytes() < bytes) {
        SS_CHECK_CUDA(cudaDeviceSynchronize());  // an earlier timing may still be using it
        workspace = DeviceBuffer(device, bytes);
      }
      return bytes > 0 ? workspace.data() : nullptr;
    };
    const ConvDescriptors::Timing timing{.gpu = device.id().index,
                                         .policy = policy,
                                         .x = x.data(),
                                         .w = w.data(),
                                         .y = y.data(),
                                         .workspace = workspace_of};
    // The timing runs on the planning handle's stream: done before its buffers are freed,
    // also when planning throws.
    struct Untimed {
      ConvDescriptors& descriptors;
      ~Untimed() {
        descriptors.time_with(nullptr);
        (void)cudaDeviceSynchronize();
      }
    } untimed{descriptors_};
    descriptors_.time_with(&timing);
    ConvPlan plan = plan_convolution(descriptors_, policy, layer);
    SS_CHECK_CUDA(cudaDeviceSynchronize());
    return plan;
  }

  std::vector<KernelChoice> choices() const override {
    std::vector<KernelChoice> out;
    for (const ConvPass pass : kConvPasses) {
      const ConvChoice& c = plan_[pass];
      if (!c.planned) continue;  // the report lists the passes the layer runs
      // 16-bit math named as the CPU kernels name it, with cuDNN's math type after.
      const std::string math =
          half_ ? fmt::format("{} {}", to_string(precision_), math_type_name(c.math))
                : math_type_name(c.math);
      out.push_back({.pass = to_string(pass),
                     .algorithm = conv_algorithm_name(pass, c.algo),
                     .math = math,
                     .layout = tensor_format_name(plan_.layout),
                     .deterministic = c.deterministic,
                     .workspace_bytes = static_cast<int64_t>(c.workspace),
                     .workspace_limit_bytes = static_cast<int64_t>(limit_.bytes),
                     .workspace_limit_rule = limit_.rule,
                     .fallback = c.fallback,
                     .measured_ms = c.time_ms});
    }
    return out;
  }

 private:
  // The forward pass from x as cuDNN reads it (operand()'s, or the saved copy), into `out` or,
  // given `out16` (forwards_into_saved's plans), cuDNN's 16-bit result into that alone.
  void forward_from(const void* x, float* out, cudaStream_t s, uint16_t* out16 = nullptr) {
    const float* w = weight_;
    float* y = out;
    if (nchw()) {
      y = floats(y_nchw_);
    } else {
      w = ohwi_weights(s);
    }
    const float one = 1.0f;
    const float zero = 0.0f;
    void* y_result = out16 != nullptr ? out16 : result(y, kY16, s);
    SS_CHECK_CUDNN(cudnnConvolutionForward(
        libraries_->cudnn(s), &one, descriptors_.x(), x, descriptors_.w(), operand(w, kW16, s),
        descriptors_.conv(ConvPass::kForward),
        static_cast<cudnnConvolutionFwdAlgo_t>(plan_[ConvPass::kForward].algo), cudnn_workspace(s),
        plan_[ConvPass::kForward].workspace, &zero, descriptors_.y(), y_result));
    if (out16 != nullptr) return;
    widen(y_result, y, kY16, s);
    if (nchw()) cuda_ops::transpose(y, out, shape_.batch, shape_.filters, shape_.out_pixels(), s);
    if (bias_ != nullptr) cuda_ops::bias_add(out, bias_, rows(), shape_.filters, s);
  }

  // The backward passes from x and dy as cuDNN reads them (operand()'s, or the model's 16-bit
  // copies) in the plan's layout; dout is dy in NHWC, for the bias.
  void backward_passes(const void* x, const void* dy_operand, const float* dout, float* din,
                       cudaStream_t s) {
    // In 16 bits both passes read one copy of dy; the filter pass the only copy of x, whose
    // place the data pass then writes its result in.
    backward_filter(x, dy_operand, s);
    if (bias_grad_ != nullptr)
      cuda_ops::bias_grad(dout, bias_grad_, rows(), shape_.filters, floats(bias_scratch_),
                          bias_grad_read(half_), s);
    if (din == nullptr) return;  // first layer: nobody needs the input's gradient
    SS_CHECK(plan_[ConvPass::kBackwardData].planned,
             "convolution on the model's input asked for its input's gradient");
    backward_data(dy_operand, din, s);
  }

  bool nchw() const { return plan_.layout == CUDNN_TENSOR_NCHW; }
  int64_t rows() const { return shape_.batch * shape_.out_pixels(); }
  int64_t area() const { return shape_.kernel * shape_.kernel; }

  // The stream's shared workspace, in this order: cuDNN's, then in 16 bits the copies of x (or
  // dx), of w (or dw) and of y (or dy), and in fp32 an NHWC plan's OHWI weights (forward and
  // backward-data each transpose them there) or weight gradient (the filter pass, up to its
  // transposition into the model's): memory of one pass, like the others.
  enum Region { kCudnn, kX16, kW16, kY16, kOhwi, kRegions };
  int64_t region_count(Region r) const {
    // Asked before the plan too (the workspace limit): then as an NHWC plan's.
    if (r == kOhwi) return shape_.filters * shape_.channels * area();
    if (!half_) return 0;
    switch (r) {
      case kX16:
        return shape_.x_numel();
      case kW16:
        return shape_.filters * shape_.channels * area();
      case kY16:
        return rows() * shape_.filters;
      case kCudnn:
      case kOhwi:
      case kRegions:
        break;
    }
    return 0;
  }
  size_t region_bytes(Region r) const {
    if (r == kCudnn) return cudnn_workspace_;
    return static_cast<size_t>(region_count(r)) * (r == kOhwi ? sizeof(float) : sizeof(uint16_t));
  }
  size_t region_offset(Region r) const {
    return workspace_region_offset(r, [this](int i) { return region_bytes(Region(i)); });
  }
  void* region(Region r, cudaStream_t s) const {
    return static_cast<char*>(libraries_->workspace(s)) + region_offset(r);
  }
  void* cudnn_workspace(cudaStream_t s) const { return region(kCudnn, s); }
  // The weights OIHW [F][C][KH·KW] -> OHWI [F][KH·KW][C] in region kOhwi, for an NHWC pass.
  const float* ohwi_weights(cudaStream_t s) const {
    auto* to = static_cast<float*>(region(kOhwi, s));
    cuda_ops::transpose(weight_, to, shape_.filters, shape_.channels, area(), s);
    return to;
  }

  // What cuDNN reads for `values`: the values themselves, or in 16 bits their copy in region `r`.
  const void* operand(const float* values, Region r, cudaStream_t s) const {
    return sixteen_bit_operand(values, region_count(r), region(r, s), half_, s);
  }
  // Where cuDNN writes a result meant for `to`: `to` itself, or in 16 bits region `r`, which
  // widen() then copies into `to`.
  void* result(float* to, Region r, cudaStream_t s) const { return half_ ? region(r, s) : to; }
  void widen(const void* result, float* to, Region r, cudaStream_t s) const {
    if (!half_) return;
    cuda_ops::decompress_gradients(static_cast<const uint16_t*>(result), to, region_count(r),
                                   *half_, s);
  }

  // [N][pixels][channels] -> [N][channels][pixels] into `to`; returns `to`.
  const float* to_nchw(const float* from, float* to, int64_t pixels, int64_t channels,
                       cudaStream_t s) const {
    cuda_ops::transpose(from, to, shape_.batch, pixels, channels, s);
    return to;
  }

  // `in` extended by zero rows and columns into the extension buffer; returns the buffer.
  const float* extend(const float* in, cudaStream_t s) {
    cuda_ops::extend_nhwc(in, floats(extended_), shape_.batch, shape_.in_h, shape_.in_w,
                          shape_.channels, shape_.extra_h, shape_.extra_w, s);
    extended_holds_input_ = true;
    return floats(extended_);
  }

  // x and dy as operand() gives them.
  void backward_filter(const void* x, const void* dy, cudaStream_t s) {
    const float one = 1.0f;
    const float zero = 0.0f;
    float* dw = nchw() ? weight_grad_ : static_cast<float*>(region(kOhwi, s));
    void* dw_result = result(dw, kW16, s);
    SS_CHECK_CUDNN(cudnnConvolutionBackwardFilter(
        libraries_->cudnn(s), &one, descriptors_.x(), x, descriptors_.y(), dy,
        descriptors_.conv(ConvPass::kBackwardFilter),
        static_cast<cudnnConvolutionBwdFilterAlgo_t>(plan_[ConvPass::kBackwardFilter].algo),
        cudnn_workspace(s), plan_[ConvPass::kBackwardFilter].workspace, &zero, descriptors_.w(),
        dw_result));
    widen(dw_result, dw, kW16, s);
    // OHWI [F][KH·KW][C] -> OIHW [F][C][KH·KW].
    if (!nchw()) cuda_ops::transpose(dw, weight_grad_, shape_.filters, area(), shape_.channels, s);
  }

  // The input's gradient into `din` (dy as operand() gives it), through the NCHW buffer (after
  // the filter pass has read the input from it) and the extension buffer where the kernel uses
  // them.
  void backward_data(const void* dy, float* din, cudaStream_t s) {
    const float one = 1.0f;
    const float zero = 0.0f;
    float* nhwc = shape_.extended() ? floats(extended_) : din;
    float* dx = nchw() ? floats(x_nchw_) : nhwc;
    const float* w = nchw() ? weight_ : ohwi_weights(s);
    void* dx_result = result(dx, kX16, s);
    SS_CHECK_CUDNN(cudnnConvolutionBackwardData(
        libraries_->cudnn(s), &one, descriptors_.w(), operand(w, kW16, s), descriptors_.y(), dy,
        descriptors_.conv(ConvPass::kBackwardData),
        static_cast<cudnnConvolutionBwdDataAlgo_t>(plan_[ConvPass::kBackwardData].algo),
        cudnn_workspace(s), plan_[ConvPass::kBackwardData].workspace, &zero, descriptors_.x(),
        dx_result));
    widen(dx_result, dx, kX16, s);
    if (nchw())
      cuda_ops::transpose(dx, nhwc, shape_.batch, shape_.channels, shape_.x_h() * shape_.x_w(), s);
    if (!shape_.extended()) return;
    extended_holds_input_ = false;
    cuda_ops::crop_nhwc(nhwc, din, shape_.batch, shape_.in_h, shape_.in_w, shape_.channels,
                        shape_.extra_h, shape_.extra_w, s);
  }

  std::shared_ptr<CudaLibraries> libraries_;
  Precision precision_ = precision();
  std::optional<kernel_math::HalfFormat> half_ = half_format(precision_);  // 16-bit tensors
  ConvShape shape_;
  ConvDescriptors descriptors_;
  ConvWorkspaceLimit limit_;  // what the plan was chosen within
  ConvPlan plan_;
  size_t cudnn_workspace_ = 0;  // the most any pass of the plan takes
  const float* weight_;
  const float* bias_;  // null without a bias
  float* weight_grad_;
  float* bias_grad_;     // null without a bias
  DeviceBuffer x_nchw_;  // NCHW plans: the input, then its gradient
  DeviceBuffer y_nchw_;  // and the output, then its gradient
  DeviceBuffer bias_scratch_;
  DeviceBuffer extended_;  // the extended input (asymmetric padding only)
  bool extended_holds_input_ = false;
};

}  // namespace

std::unique_ptr<LayerKernel> make_cuda_conv(const Conv2DSpec& conv, const LayerSpec& spec,
                                            const LayerBinding& binding, CudaDevice& device) {
  return std::make_unique<ConvKernel>(conv, spec, binding, device);
}

}  // namespace scalescope
