// The CUDA layer kernels: cuDNN convolution, cuBLAS GEMMs for dense layers, our kernels
// (layer_ops.cu) for bias, activations, pooling and flatten.
//
// Every kernel is planned completely in its constructor: descriptors, cuDNN algorithms and
// their workspace, scratch and internal weight copies. forward() and backward() only bind the
// library handles to the caller's stream and enqueue work: no allocation, no host
// synchronization.
//
// Layouts are the CPU kernels': activations NHWC (4-D) or [N, features], parameters in
// PyTorch's layout (conv OIHW, dense [out, in]). Convolution runs on an NHWC (OHWI) copy of
// the weights, refreshed by a transpose every forward because the optimizer updates the
// weights in place: cuDNN's NHWC kernels (tensor cores included) want the filter in the
// activations' layout. The weight gradient is transposed back into OIHW.
#include <cublas_v2.h>
#include <cudnn.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <memory>
#include <optional>
#include <variant>
#include <vector>

#include "core/buffer.h"
#include "core/check.h"
#include "models/cuda/conv_math.h"
#include "models/cuda/cuda_kernels.h"
#include "models/cuda/cuda_libraries.h"
#include "models/cuda/cuda_ops.h"

namespace scalescope {
namespace {

template <class... Ts>
struct Overloaded : Ts... {
  using Ts::operator()...;
};

// cuDNN's descriptors and cuBLAS's sizes are ints.
int to_int(int64_t value, const char* what, const LayerSpec& spec) {
  SS_CHECK(value >= 0 && value <= INT_MAX,
           "{}: {} is {}, more than cuDNN and cuBLAS take (2^31 - 1)", describe(spec), what, value);
  return static_cast<int>(value);
}

float* floats(const DeviceBuffer& buffer) {
  return static_cast<float*>(buffer.data());
}

DeviceBuffer float_buffer(CudaDevice& device, int64_t count) {
  return DeviceBuffer(device, static_cast<size_t>(count) * sizeof(float));
}

// ---- convolution

// The most workspace one convolution kernel lets a cuDNN algorithm take. Every kernel owns
// its workspace (kernels of one thread may run on different streams, so sharing one would
// race), so the cap bounds a model's total: fast algorithms for these shapes need far less,
// and one that wants more is passed over for the next fastest.
constexpr size_t kMaxConvWorkspace = size_t{256} << 20;

size_t conv_workspace_limit(CudaDevice& device) {
  size_t free = 0;
  size_t total = 0;
  SS_CHECK_CUDA(cudaMemGetInfo(&free, &total));
  // A small share of what is left, so that the workspaces of a deep model fit beside its
  // activations; the device's emulated limit (--memory-limit-mb) counts as what is left.
  size_t limit = std::min(kMaxConvWorkspace, free / 8);
  if (device.memory_limit() > 0) {
    const int64_t left = std::max<int64_t>(device.memory_limit() - device.memory_in_use(), 0);
    limit = std::min(limit, static_cast<size_t>(left) / 8);
  }
  return limit;
}

struct Algorithm {
  int algo = 0;
  size_t workspace = 0;
};

// Picks the first (fastest, by cuDNN's heuristics) of `perf` that is supported, fits `limit`
// and has its math allowed (conv_math.h), which is then set on the pass's own descriptor
// (passes may differ). `workspace_of(algo, &bytes)` asks cuDNN the workspace of one
// algorithm under the descriptor's math, which also rejects a combination it cannot run.
template <class Perf, class WorkspaceOf>
Algorithm choose(const std::vector<Perf>& perf, int returned, cudnnConvolutionDescriptor_t conv,
                 bool tf32, size_t limit, WorkspaceOf workspace_of, const char* pass,
                 const LayerSpec& spec) {
  for (int i = 0; i < returned; ++i) {
    const Perf& p = perf[static_cast<size_t>(i)];
    if (p.status != CUDNN_STATUS_SUCCESS) continue;
    const std::optional<cudnnMathType_t> math = conv_math_for(p.mathType, tf32);
    if (!math) continue;
    if (cudnnSetConvolutionMathType(conv, *math) != CUDNN_STATUS_SUCCESS) continue;
    size_t bytes = 0;
    if (workspace_of(p.algo, &bytes) != CUDNN_STATUS_SUCCESS || bytes > limit) continue;
    return Algorithm{static_cast<int>(p.algo), bytes};
  }
  throw_error(
      fmt::format("{}: cuDNN offers no {} algorithm for this shape within {} bytes of workspace{}",
                  describe(spec), pass, limit, tf32 ? "" : " in strict fp32 (TF32 disallowed)"));
}

// Conv2D. Keras's "same" padding puts the odd pixel after (TensorFlow's split), which cuDNN's
// symmetric padding cannot express, and no symmetric padding plus a crop gives the same
// windows at stride 2 (they would start one pixel off). So where the padding is asymmetric,
// the kernel gives cuDNN an input extended by one zero row at the bottom and/or one zero
// column at the right (the `after - before` excess, always 0 or 1), built in a buffer of its
// own every forward, and pads the rest symmetrically: top = before, bottom = 1 + before =
// after. Backward computes the data gradient of the extended input into the same buffer and
// crops it, dropping the gradient of the zeros. Symmetric "same" and "valid" padding go to
// cuDNN directly.
class ConvKernel final : public LayerKernel {
 public:
  ConvKernel(const Conv2DSpec& c, const LayerSpec& spec, const LayerBinding& b, CudaDevice& device)
      : libraries_(cuda_libraries(device)),
        batch_(b.in[0]),
        in_h_(b.in[1]),
        in_w_(b.in[2]),
        channels_(b.in[3]),
        out_h_(b.out[1]),
        out_w_(b.out[2]),
        filters_(c.filters),
        area_(c.kernel * c.kernel),
        weight_(b.params[0].data),
        bias_(b.params[1].data),
        weight_grad_(b.grads[0].data),
        bias_grad_(b.grads[1].data),
        weight_nhwc_(float_buffer(device, b.params[0].numel())),
        weight_grad_nhwc_(float_buffer(device, b.params[0].numel())),
        bias_scratch_(float_buffer(device, cuda_ops::bias_grad_scratch(rows(), filters_))) {
    Pads pad_h;
    Pads pad_w;
    if (c.padding == Padding::kSame) {
      pad_h = same_padding(in_h_, c.kernel, c.stride);
      pad_w = same_padding(in_w_, c.kernel, c.stride);
    }
    extra_h_ = pad_h.after - pad_h.before;
    extra_w_ = pad_w.after - pad_w.before;
    const int64_t x_h = in_h_ + extra_h_;
    const int64_t x_w = in_w_ + extra_w_;
    if (extended()) extended_ = float_buffer(device, batch_ * x_h * x_w * channels_);

    // cuDNN's legacy descriptors index with int: the tensors themselves must stay below 2^31
    // elements, not just their dimensions.
    to_int(batch_ * x_h * x_w * channels_, "the input's size", spec);
    to_int(b.out.numel(), "the output's size", spec);
    const int n = to_int(batch_, "the batch", spec);
    const int k = to_int(c.kernel, "the kernel", spec);
    SS_CHECK_CUDNN(cudnnSetTensor4dDescriptor(
        x_.get(), CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, n, to_int(channels_, "channels", spec),
        to_int(x_h, "the height", spec), to_int(x_w, "the width", spec)));
    SS_CHECK_CUDNN(cudnnSetTensor4dDescriptor(
        y_.get(), CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, n, to_int(filters_, "filters", spec),
        to_int(out_h_, "the output height", spec), to_int(out_w_, "the output width", spec)));
    SS_CHECK_CUDNN(cudnnSetFilter4dDescriptor(w_.get(), CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC,
                                              static_cast<int>(filters_),
                                              static_cast<int>(channels_), k, k));
    const int stride = to_int(c.stride, "the stride", spec);
    for (const ConvolutionDescriptor* conv : {&conv_forward_, &conv_data_, &conv_filter_}) {
      SS_CHECK_CUDNN(cudnnSetConvolution2dDescriptor(
          conv->get(), static_cast<int>(pad_h.before), static_cast<int>(pad_w.before), stride,
          stride, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    }
    int dims[4] = {};
    SS_CHECK_CUDNN(cudnnGetConvolution2dForwardOutputDim(conv_forward_.get(), x_.get(), w_.get(),
                                                         &dims[0], &dims[1], &dims[2], &dims[3]));
    SS_CHECK(dims[0] == batch_ && dims[1] == filters_ && dims[2] == out_h_ && dims[3] == out_w_,
             "{}: cuDNN computes an output of [{}, {}, {}, {}] (NCHW) for the binding's {}",
             describe(spec), dims[0], dims[1], dims[2], dims[3], b.out.to_string());

    plan_algorithms(spec, conv_workspace_limit(device));
    workspace_ =
        DeviceBuffer(device, std::max({forward_.workspace, data_.workspace, filter_.workspace}));
  }

  void forward(const float* in, float* out, Stream& stream) override {
    const cudaStream_t s = cuda_stream(stream);
    // OIHW [F][C][KH·KW] -> OHWI [F][KH·KW][C].
    cuda_ops::transpose(weight_, floats(weight_nhwc_), filters_, channels_, area_, s);
    const float* x = in;
    if (extended()) {
      cuda_ops::extend_nhwc(in, floats(extended_), batch_, in_h_, in_w_, channels_, extra_h_,
                            extra_w_, s);
      extended_holds_input_ = true;
      x = floats(extended_);
    }
    const float one = 1.0f;
    const float zero = 0.0f;
    SS_CHECK_CUDNN(cudnnConvolutionForward(
        libraries_->cudnn(s), &one, x_.get(), x, w_.get(), floats(weight_nhwc_),
        conv_forward_.get(), static_cast<cudnnConvolutionFwdAlgo_t>(forward_.algo),
        workspace_.data(), forward_.workspace, &zero, y_.get(), out));
    cuda_ops::bias_add(out, bias_, rows(), filters_, s);
  }

  // REQUIRES (beyond LayerKernel's): the weights unchanged since the last forward (the
  // training step runs the optimizer after backward), whose OHWI copy backward reuses.
  void backward(const float* in, const float*, const float* dout, float* din,
                Stream& stream) override {
    const cudaStream_t s = cuda_stream(stream);
    const cudnnHandle_t handle = libraries_->cudnn(s);
    const float one = 1.0f;
    const float zero = 0.0f;
    const float* x = in;
    if (extended()) {
      // The buffer still holds the last forward's extended input unless a backward since
      // then wrote a data gradient over it.
      if (!extended_holds_input_) {
        cuda_ops::extend_nhwc(in, floats(extended_), batch_, in_h_, in_w_, channels_, extra_h_,
                              extra_w_, s);
        extended_holds_input_ = true;
      }
      x = floats(extended_);
    }
    SS_CHECK_CUDNN(cudnnConvolutionBackwardFilter(
        handle, &one, x_.get(), x, y_.get(), dout, conv_filter_.get(),
        static_cast<cudnnConvolutionBwdFilterAlgo_t>(filter_.algo), workspace_.data(),
        filter_.workspace, &zero, w_.get(), floats(weight_grad_nhwc_)));
    // OHWI [F][KH·KW][C] -> OIHW [F][C][KH·KW].
    cuda_ops::transpose(floats(weight_grad_nhwc_), weight_grad_, filters_, area_, channels_, s);
    cuda_ops::bias_grad(dout, bias_grad_, rows(), filters_, floats(bias_scratch_), s);
    if (din == nullptr) return;  // first layer: nobody needs the input's gradient
    float* dx = extended() ? floats(extended_) : din;
    SS_CHECK_CUDNN(cudnnConvolutionBackwardData(
        handle, &one, w_.get(), floats(weight_nhwc_), y_.get(), dout, conv_data_.get(),
        static_cast<cudnnConvolutionBwdDataAlgo_t>(data_.algo), workspace_.data(), data_.workspace,
        &zero, x_.get(), dx));
    if (!extended()) return;
    extended_holds_input_ = false;
    cuda_ops::crop_nhwc(dx, din, batch_, in_h_, in_w_, channels_, extra_h_, extra_w_, s);
  }

 private:
  bool extended() const { return extra_h_ > 0 || extra_w_ > 0; }
  int64_t rows() const { return batch_ * out_h_ * out_w_; }

  // One algorithm per pass, chosen once for this shape by cuDNN's heuristics
  // (cudnnGet*Algorithm_v7) rather than by timing candidates (cudnnFind*): the choice is then
  // the same on every replica and every run, which a scaling measurement needs more than the
  // last few percent, and planning neither synchronizes nor allocates trial buffers.
  void plan_algorithms(const LayerSpec& spec, size_t limit) {
    const bool tf32 = allow_tf32();
    const cudnnMathType_t wanted = conv_requested_math(tf32);
    const cudnnHandle_t handle = libraries_->cudnn_for_planning();
    int max_count = 0;
    int returned = 0;

    SS_CHECK_CUDNN(cudnnSetConvolutionMathType(conv_forward_.get(), wanted));
    SS_CHECK_CUDNN(cudnnGetConvolutionForwardAlgorithmMaxCount(handle, &max_count));
    std::vector<cudnnConvolutionFwdAlgoPerf_t> fwd(static_cast<size_t>(max_count));
    SS_CHECK_CUDNN(cudnnGetConvolutionForwardAlgorithm_v7(handle, x_.get(), w_.get(),
                                                          conv_forward_.get(), y_.get(), max_count,
                                                          &returned, fwd.data()));
    forward_ = choose(
        fwd, returned, conv_forward_.get(), tf32, limit,
        [&](cudnnConvolutionFwdAlgo_t algo, size_t* bytes) {
          return cudnnGetConvolutionForwardWorkspaceSize(
              handle, x_.get(), w_.get(), conv_forward_.get(), y_.get(), algo, bytes);
        },
        "forward", spec);

    SS_CHECK_CUDNN(cudnnSetConvolutionMathType(conv_data_.get(), wanted));
    SS_CHECK_CUDNN(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(handle, &max_count));
    std::vector<cudnnConvolutionBwdDataAlgoPerf_t> data(static_cast<size_t>(max_count));
    SS_CHECK_CUDNN(cudnnGetConvolutionBackwardDataAlgorithm_v7(
        handle, w_.get(), y_.get(), conv_data_.get(), x_.get(), max_count, &returned, data.data()));
    data_ = choose(
        data, returned, conv_data_.get(), tf32, limit,
        [&](cudnnConvolutionBwdDataAlgo_t algo, size_t* bytes) {
          return cudnnGetConvolutionBackwardDataWorkspaceSize(
              handle, w_.get(), y_.get(), conv_data_.get(), x_.get(), algo, bytes);
        },
        "backward-data", spec);

    SS_CHECK_CUDNN(cudnnSetConvolutionMathType(conv_filter_.get(), wanted));
    SS_CHECK_CUDNN(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(handle, &max_count));
    std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> filter(static_cast<size_t>(max_count));
    SS_CHECK_CUDNN(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
        handle, x_.get(), y_.get(), conv_filter_.get(), w_.get(), max_count, &returned,
        filter.data()));
    filter_ = choose(
        filter, returned, conv_filter_.get(), tf32, limit,
        [&](cudnnConvolutionBwdFilterAlgo_t algo, size_t* bytes) {
          return cudnnGetConvolutionBackwardFilterWorkspaceSize(
              handle, x_.get(), y_.get(), conv_filter_.get(), w_.get(), algo, bytes);
        },
        "backward-filter", spec);
  }

  std::shared_ptr<CudaLibraries> libraries_;
  int64_t batch_, in_h_, in_w_, channels_, out_h_, out_w_, filters_, area_;
  int64_t extra_h_ = 0;
  int64_t extra_w_ = 0;
  const float* weight_;
  const float* bias_;
  float* weight_grad_;
  float* bias_grad_;
  DeviceBuffer weight_nhwc_;
  DeviceBuffer weight_grad_nhwc_;
  DeviceBuffer bias_scratch_;
  DeviceBuffer extended_;  // the extended input (asymmetric padding only)
  bool extended_holds_input_ = false;
  DeviceBuffer workspace_;  // shared by the three passes, which never run at once
  TensorDescriptor x_;      // the input as cuDNN sees it (extended where padding is asymmetric)
  TensorDescriptor y_;
  FilterDescriptor w_;
  ConvolutionDescriptor conv_forward_, conv_data_, conv_filter_;
  Algorithm forward_, data_, filter_;
};

// ---- dense

// y = x·Wᵀ + b with x [N, in] and W [out, in] row-major. cuBLAS is column-major, where these
// buffers read as xᵀ [in, N], W as Wᵀ [in, out] and y as yᵀ [out, N]:
//   forward   yᵀ  = W·xᵀ       gemm(T, N), m = out, n = N,  k = in
//   weights   dWᵀ = xᵀ·dy      gemm(N, T), m = in,  n = out, k = N   (dW [out, in] row-major)
//   data      dxᵀ = Wᵀ·dyᵀ     gemm(N, N), m = in,  n = N,  k = out
class DenseKernel final : public LayerKernel {
 public:
  DenseKernel(const DenseSpec& d, const LayerSpec& spec, const LayerBinding& b, CudaDevice& device)
      : libraries_(cuda_libraries(device)),
        batch_(to_int(b.in[0], "the batch", spec)),
        in_(to_int(b.in[1], "the input features", spec)),
        units_(to_int(d.units, "the units", spec)),
        // Chosen per kernel, not on the shared handle: see CublasHandle.
        compute_(allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F),
        weight_(b.params[0].data),
        bias_(b.params[1].data),
        weight_grad_(b.grads[0].data),
        bias_grad_(b.grads[1].data),
        bias_scratch_(float_buffer(device, cuda_ops::bias_grad_scratch(batch_, units_))) {}

  void forward(const float* in, float* out, Stream& stream) override {
    const cudaStream_t s = cuda_stream(stream);
    gemm(s, CUBLAS_OP_T, CUBLAS_OP_N, units_, batch_, in_, weight_, in_, in, in_, out, units_);
    cuda_ops::bias_add(out, bias_, batch_, units_, s);
  }

  void backward(const float* in, const float*, const float* dout, float* din,
                Stream& stream) override {
    const cudaStream_t s = cuda_stream(stream);
    gemm(s, CUBLAS_OP_N, CUBLAS_OP_T, in_, units_, batch_, in, in_, dout, units_, weight_grad_,
         in_);
    cuda_ops::bias_grad(dout, bias_grad_, batch_, units_, floats(bias_scratch_), s);
    if (din == nullptr) return;  // first layer: nobody needs the input's gradient
    gemm(s, CUBLAS_OP_N, CUBLAS_OP_N, in_, batch_, units_, weight_, in_, dout, units_, din, in_);
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
  int batch_, in_, units_;
  cublasComputeType_t compute_;
  const float* weight_;
  const float* bias_;
  float* weight_grad_;
  float* bias_grad_;
  DeviceBuffer bias_scratch_;
};

// ---- layers without parameters: our kernels

// Element-wise activations, in our kernels rather than cuDNN's so that the functions are the
// CPU's exactly (relu passing NaN, derivatives taken from the output).
class ActivationKernel final : public LayerKernel {
 public:
  ActivationKernel(Activation kind, int64_t count) : kind_(kind), count_(count) {}

  void forward(const float* in, float* out, Stream& stream) override {
    cuda_ops::activation_forward(kind_, in, out, count_, cuda_stream(stream));
  }
  void backward(const float*, const float* out, const float* dout, float* din,
                Stream& stream) override {
    if (din == nullptr) return;  // no parameters: nothing to do without the input's gradient
    cuda_ops::activation_backward(kind_, out, dout, din, count_, cuda_stream(stream));
  }

 private:
  Activation kind_;
  int64_t count_;
};

// Max pooling in our kernels rather than cuDNN's: cuDNN's backward may split the gradient of
// tied inputs differently, where ours sends it to the same input as the CPU kernel (the first
// maximum of the window); NaN wins as there. No workspace: backward finds each window's
// maximum again from `in` and `out`.
class MaxPoolKernel final : public LayerKernel {
 public:
  MaxPoolKernel(const MaxPool2DSpec& p, const Shape& in, const Shape& out)
      : shape_{in[0], in[1], in[2], in[3], out[1], out[2], p.pool, p.stride} {}

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
  // Planning queries the device (free memory, cuDNN heuristics) and creates handles on it.
  ScopedCudaDevice scope(device.id().index);
  return std::visit(Overloaded{
                        [&](const Conv2DSpec& c) -> std::unique_ptr<LayerKernel> {
                          return std::make_unique<ConvKernel>(c, spec, b, device);
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
                    },
                    spec);
}

}  // namespace scalescope
