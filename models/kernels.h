// The kernel interface each backend implements (models/cpu: oneDNN; models/cuda: cuDNN,
// cuBLAS and our kernels), found at run time through kernel_backend(kind).
//
// A kernel is built for one shape (batch included) on one device and then only runs: all
// planning (primitive descriptors, algorithm choice, workspace) happens at construction, so
// a training step allocates nothing.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/buffer.h"
#include "core/device.h"
#include "core/precision.h"
#include "core/tensor.h"
#include "models/kernel_math/activation_math.h"
#include "models/kernel_math/half_math.h"
#include "models/layer_spec.h"

namespace scalescope {

// Memory that layer kernels need only within one of their passes (the 16-bit copies of their
// operands), one buffer for all the kernels of a model's plan: they run one at a time, in
// stream order, so the largest need is the pool's size. Kernels reserve() while they are
// made; the model allocates once all are, before any pass runs; a pass finds it at data().
class TransientPool {
 public:
  void reserve(size_t bytes) { reserved_ = std::max(reserved_, bytes); }
  // REQUIRES: called once, after the last reserve().
  void allocate(Device& device) {
    if (reserved_ > 0) buffer_ = DeviceBuffer(device, reserved_);
  }
  void* data() const { return buffer_.data(); }

 private:
  size_t reserved_ = 0;
  DeviceBuffer buffer_;
};

// A replica's place among those whose batch statistics are synchronized (--sync-batchnorm).
struct SyncGroup {
  int replicas = 1;
  int rank = 0;
  bool valid() const { return replicas >= 1 && rank >= 0 && rank < replicas; }
};

// What a layer instance is bound to. Shapes include the batch dimension; images are NHWC.
struct LayerBinding {
  Shape in;
  Shape out;
  // Device memory inside the model's flat buffers, in param_specs() order (weight, bias),
  // in PyTorch's layout (conv OIHW, dense [out, in]).
  std::vector<TensorView> params;
  std::vector<TensorView> grads;
  // Device memory in buffer_specs() order (batch norm's running statistics): updated by
  // forward in training, read by forward_eval.
  std::vector<TensorView> buffers;
  // Fusions the model planned (models/fusion.h), set only where KernelBackend's
  // fuses_activation, fuses_relu_gradient and fuses_relu_backward said this backend's
  // kernel takes them:
  // - `activation`: forward (and forward_eval) writes activation(layer(in)), the output of
  //   the activation layer that follows, which the model then skips in forward; backward's
  //   `dout` is still the gradient of layer(in), and its `out` is the activation's output.
  // - `relu_backward` (with a ReLU `activation`): backward's `dout` is instead the gradient of
  //   the ReLU's output, which the kernel zeroes where `out` is not positive before its own
  //   backward, so the model skips the ReLU's backward too.
  // - `relu_gradient`: `in` is a ReLU's output and backward writes the gradient with
  //   respect to that ReLU's input (zero where `in` is not positive), so the model skips the
  //   ReLU's backward.
  std::optional<Activation> activation;
  bool relu_gradient = false;
  // Where the kernel's pass-local memory goes (shared with the other kernels of its model);
  // null: the kernel owns it. Kernels hold it: their launches may outlive the model.
  std::shared_ptr<TransientPool> transient;
  bool relu_backward = false;  // the fusion above (last, for the tests' aggregate initializers)
  // False where the layer reads the model's input (reads_model_input): backward is then always
  // called with `din` null, so a kernel need not prepare that part of its backward (cuDNN's
  // backward-data plan and its workspace, oneDNN's backward-data primitive).
  bool input_gradient = true;
  // The replicas whose batch statistics this layer's staged passes synchronize (Model::set_sync;
  // one replica, rank 0, without): what sync_values holds depends on them.
  SyncGroup sync = {};
};

// How a kernel computes one pass where a library chose among implementations (cuDNN's
// convolution algorithms, oneDNN's implementations): reported with a run, so that two runs
// that differ in speed can be told apart by what actually ran.
struct KernelChoice {
  std::string pass;           // "forward", "backward-data", "backward-filter"
  std::string algorithm;      // the library's own name for what runs
  std::string math;           // the arithmetic: cuDNN's math type, cuBLAS's compute type, "fp32"
  std::string layout;         // of the activations as the library sees them: "NHWC", "NCHW", "NC"
  bool deterministic = true;  // bit-identical results run after run
  int64_t workspace_bytes = 0;
  // Where the library chose within a workspace limit (cuDNN's convolutions): the limit, and
  // how it was reached with the numbers of that moment ("17500000000 = max(shared 0, 140000000000
  // free / 8)"); 0 and "" elsewhere.
  int64_t workspace_limit_bytes = 0;
  std::string workspace_limit_rule{};
  // Why this pass is not deterministic although deterministic algorithms were preferred (none
  // fitted the workspace limit); "" when it is, or when determinism was not asked for.
  std::string fallback{};
  // Where the library timed its candidates (cuDNN's convolutions under --conv-search
  // benchmark): what this pass's algorithm took when timed, ms; -1 elsewhere.
  double measured_ms = -1;
};

class LayerKernel {
 public:
  virtual ~LayerKernel() = default;
  // out = layer(in). `in` and `out` hold in.numel() and out.numel() floats.
  // REQUIRES: the device current; runs on `stream` and does not synchronize the host.
  virtual void forward(const float* in, float* out, Stream& stream) = 0;
  // The forward of evaluation (PyTorch's eval mode): the same as forward except for layers
  // that behave differently in training (batch norm normalizes with its running statistics
  // and leaves them as they are). backward() never follows it.
  virtual void forward_eval(const float* in, float* out, Stream& stream) {
    forward(in, out, stream);
  }
  // Given dout (gradient of the loss with respect to out), overwrites the parameter
  // gradients of the binding and, unless `din` is null, writes the gradient with respect to
  // `in`. `in` and `out` are the values of the last forward, and the parameters are
  // unchanged since then (kernels may reuse what forward derived from them, such as
  // reordered weights).
  virtual void backward(const float* in, const float* out, const float* dout, float* din,
                        Stream& stream) = 0;
  // A kernel whose backward can add the input's gradient to what `din` holds (each value the
  // old one + its own, as accumulate_into adds) says so: for a layer whose input a later layer
  // reads too (a residual stream's layer norm), whose backward ran first and wrote that
  // gradient, the model then calls backward_adding instead of backward into scratch and a pass
  // that adds the scratch. `din` is not `dout` there. Only in the fp32 calls (backward, or
  // backward after a restore) and in backward_saved_adding below: the other 16-bit calls write
  // their `din`.
  virtual bool adds_input_gradient() const { return false; }
  virtual void backward_adding(const float* /*in*/, const float* /*out*/, const float* /*dout*/,
                               float* /*din*/, Stream& /*stream*/) {
    throw_error("this kernel's backward does not add to its input's gradient");
  }
  // Under bf16 and fp16 the model saves the outputs a backward reads in 16 bits (autocast's
  // saved tensors) and restores them into fp32 before each backward that reads them. A kernel
  // that can compute its backward from the saved copies in `format` as they are (no restore,
  // no copy) says so: the model then calls backward_saved, `in` and `out` the saved copies of
  // the last forward's input and output in their layouts, each null where backward reads none
  // (backward_reads; the output too where the kernel runs a fused ReLU's backward). Where the
  // model's input is read, which has no saved copy, the model calls backward.
  virtual bool reads_saved(kernel_math::HalfFormat /*format*/) const { return false; }
  virtual void backward_saved(const uint16_t* /*in*/, const uint16_t* /*out*/,
                              const float* /*dout*/, float* /*din*/, Stream& /*stream*/) {
    throw_error("this kernel reads no saved 16-bit values");
  }
  // And both: a kernel whose backward_saved can also add its input's gradient (as
  // backward_adding does) says so; the model then calls backward_saved_adding there.
  virtual bool adds_input_gradient_from_saved(kernel_math::HalfFormat /*format*/) const {
    return false;
  }
  virtual void backward_saved_adding(const uint16_t* /*in*/, const uint16_t* /*out*/,
                                     const float* /*dout*/, float* /*din*/, Stream& /*stream*/) {
    throw_error(
        "this kernel's backward from saved 16-bit values does not add to its input's "
        "gradient");
  }
  // The same in a training forward: a kernel that computes from a 16-bit copy of its input in
  // `format` may read the model's saved copy of it (written by the layer before, as backward
  // will read it) instead of making its own: the model then calls forward_saved.
  virtual bool forwards_from_saved(kernel_math::HalfFormat /*format*/) const { return false; }
  virtual void forward_saved(const uint16_t* /*in*/, float* /*out*/, Stream& /*stream*/) {
    throw_error("this kernel reads no saved 16-bit input");
  }
  // And a kernel that can write its training forward's output straight into the model's saved
  // copy of it in `format` says which input it then reads: the fp32 input, or the saved copy of
  // it. Where every reader of the output reads only that copy in forward, the model writes no
  // fp32 output (backward restores it where a kernel reads fp32) and calls forward_into_saved,
  // `in` and `saved_in` the input as the kernel said it reads it, the other null.
  enum class SavedOutput { kNo, kFromInput, kFromSavedInput };
  virtual SavedOutput forwards_into_saved(kernel_math::HalfFormat /*format*/) const {
    return SavedOutput::kNo;
  }
  virtual void forward_into_saved(const float* /*in*/, const uint16_t* /*saved_in*/,
                                  uint16_t* /*out*/, kernel_math::HalfFormat /*format*/,
                                  Stream& /*stream*/) {
    throw_error("this kernel writes no saved 16-bit output");
  }
  // And the gradients: a 16-bit backward (a convolution's) reads its output's gradient only as
  // a 16-bit copy that it rounds first, as autocast's gradient of a 16-bit output is 16-bit.
  // A kernel whose backward_saved can read `dout` as that copy in `format` says so
  // (reads_half_gradient), and one whose backward_saved can write `din` as it, rounded to
  // nearest even as the copy would be, says so (writes_half_gradient). Where a layer's output
  // has one reader and both say so, the model keeps that gradient only as its 16-bit copy and
  // calls backward_from_half_gradient on the layer and backward_into_half_gradient on the reader.
  virtual bool reads_half_gradient(kernel_math::HalfFormat /*format*/) const { return false; }
  virtual void backward_from_half_gradient(const uint16_t* /*in*/, const uint16_t* /*out*/,
                                           const uint16_t* /*dout*/, float* /*din*/,
                                           Stream& /*stream*/) {
    throw_error("this kernel reads no 16-bit output gradient");
  }
  virtual bool writes_half_gradient(kernel_math::HalfFormat /*format*/) const { return false; }
  virtual void backward_into_half_gradient(const uint16_t* /*in*/, const uint16_t* /*out*/,
                                           const float* /*dout*/, uint16_t* /*din*/,
                                           Stream& /*stream*/) {
    throw_error("this kernel writes no 16-bit input gradient");
  }
  // Statistics over every replica's batch (batch norm under --sync-batchnorm, PyTorch's
  // SyncBatchNorm). A layer that needs them runs its training passes in stages: stage s of
  // a pass writes what this replica contributes into sync_values(pass), the model sums them
  // over the replicas (an all-reduce in stream order), and stage s + 1 reads the sums; the last
  // stage writes the pass's outputs. The replicas and this one's rank are the binding's `sync`.
  // Parameter gradients stay this replica's own (the gradient all-reduce averages them, as DDP
  // does). Layers without such statistics have no sync points.
  enum class Pass { kForward, kBackward };
  virtual int sync_points(Pass) const { return 0; }
  // Device memory of the floats each sync point sums (the same for every point of a pass).
  virtual TensorView sync_values(Pass) const { return {}; }
  virtual void forward_stage(int /*stage*/, const float* in, float* out, Stream& stream) {
    forward(in, out, stream);
  }
  virtual void backward_stage(int /*stage*/, const float* in, const float* out, const float* dout,
                              float* din, Stream& stream) {
    backward(in, out, dout, din, stream);
  }
  // What the library chose for each pass when the kernel was planned; empty for kernels of
  // our own, which have one implementation.
  virtual std::vector<KernelChoice> choices() const { return {}; }
};

// The sync points of a batch norm's training pass under --sync-batchnorm (every backend's
// kernel): its moments gathered in forward, [Σdy, Σdy·x̂] summed in backward.
constexpr int batch_norm_sync_points(LayerKernel::Pass /*pass*/) {
  return 1;
}

class LossKernel {
 public:
  virtual ~LossKernel() = default;
  // loss[0] = sum over the batch of the per-sample loss, times `scale`; dout = its gradient
  // with respect to the model output (so scale = 1/batch gives the batch mean). `loss` and
  // `dout` are device memory; nothing is read back to the host.
  virtual void forward_backward(const float* output, const float* labels, float scale, float* loss,
                                float* dout, Stream& stream) = 0;
  // Loss only (evaluation): loss[0] = scale × the sum.
  virtual void forward(const float* output, const float* labels, float scale, float* loss,
                       Stream& stream) = 0;
  // Labels are checked by the input pipeline; a kernel may check them again where that is
  // cheap (the CPU kernels throw Error naming the sample), but need not (GPU kernels).
  // correct[0] = number of samples whose prediction matches the label.
  virtual void count_correct(const float* output, const float* labels, float* correct,
                             Stream& stream) = 0;
};

enum class OptimizerKind { kSgd, kAdam };
const char* to_string(OptimizerKind kind);

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::kAdam;
  float lr = 1e-3f;
  float weight_decay = 0.0f;  // L2 added to the gradient (PyTorch semantics)
  // SGD: v = momentum·v + g; w -= lr·v (PyTorch semantics; no dampening).
  float momentum = 0.0f;
  // Adam (Kingma & Ba, Algorithm 1, as PyTorch): Keras's default values.
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float epsilon = 1e-7f;
};

// Names of the optimizer's per-parameter state tensors, each as large as the parameters:
// PyTorch's "momentum_buffer" for SGD with momentum (none without), "exp_avg" and
// "exp_avg_sq" for Adam.
std::vector<std::string> optimizer_state_names(const OptimizerConfig& config);

class OptimizerKernel {
 public:
  virtual ~OptimizerKernel() = default;
  // One fused update over all n parameters: params -= f(grads, state). `step` counts from 1
  // (Adam's bias correction).
  virtual void update(float* params, const float* grads, float lr, int64_t step,
                      Stream& stream) = 0;
  // The state tensors, in optimizer_state_names() order, each of n floats on the device.
  virtual std::vector<TensorView> state() const = 0;
  // From now on each update reads one float of device memory at `flag` when it runs and,
  // where it is not 0, changes nothing (a step whose gradients overflowed, unscale_gradients):
  // the decision stays on the device, so the host need not wait for it. nullptr: never skip.
  virtual void skip_when(const float* flag) { skip_flag_ = flag; }

 protected:
  // What a kernel whose update runs on the host (CPU memory) asks first.
  bool skips() const { return skip_flag_ != nullptr && *skip_flag_ != 0.0f; }
  const float* skip_flag_ = nullptr;
};

// The kernels of one device kind. Dispatchers only: the kernels they make own every handle.
class KernelBackend {
 public:
  virtual ~KernelBackend() = default;
  virtual DeviceKind kind() const = 0;
  // The libraries the kernels run on (CPU: oneDNN; CUDA: cuDNN, cuBLAS). Never throws.
  virtual std::vector<LibraryVersion> library_versions() const = 0;
  // The precisions (set_precision) these kernels compute in, the default first (the one a run
  // gets when it names none).
  virtual std::vector<Precision> precisions() const = 0;
  // What a user should know about computing in `precision` on this machine ("" nothing): a
  // CPU without bf16 instructions, where bf16 runs slower than fp32.
  virtual std::string precision_note(Precision /*precision*/) const { return ""; }
  // Why these kernels do not compute in `precision`, one of those precisions() leaves out, for
  // the error that refuses it ("" where there is nothing more to say).
  virtual std::string precision_refusal(Precision /*precision*/) const { return ""; }
  // Whether these kernels may compute fp32 products in TF32 when allowed: only then does a
  // run's report say whether they could.
  bool has_tf32() const;
  // Whether these kernels may run non-deterministic algorithms when allowed
  // (set_determinism): only then does a run's report say whether they were.
  virtual bool has_nondeterministic() const { return false; }
  // Which fusions this backend's kernels take (LayerBinding says what each one means):
  // whether the kernel of `layer` applies `activation` to its output, whether the kernel of
  // `producer` that applies a ReLU also computes its backward, and whether the kernel of
  // `reader` computes the backward of the ReLU whose output it reads.
  virtual bool fuses_activation(const LayerSpec& /*layer*/, Activation /*activation*/) const {
    return false;
  }
  virtual bool fuses_relu_backward(const LayerSpec& /*producer*/) const { return false; }
  virtual bool fuses_relu_gradient(const LayerSpec& /*reader*/) const { return false; }

  virtual std::unique_ptr<LayerKernel> make_layer(const LayerSpec& spec,
                                                  const LayerBinding& binding, Device& device) = 0;
  // `output` includes the batch dimension.
  virtual std::unique_ptr<LossKernel> make_loss(LossKind kind, const Shape& output,
                                                Device& device) = 0;
  // State zero-initialised.
  virtual std::unique_ptr<OptimizerKernel> make_optimizer(const OptimizerConfig& config, int64_t n,
                                                          Device& device) = 0;
  // accumulate_into() (below) on memory of a device of this kind. REQUIRES: count >= 0.
  virtual void accumulate(float* acc, const float* grads, int64_t count, bool first,
                          Stream& stream) = 0;
  // add_into() and accumulate_relu_gradient_into() (below) on memory of a device of this kind.
  // REQUIRES: count >= 0.
  virtual void add(float* out, const float* a, const float* b, int64_t count, bool relu,
                   const kernel_math::HalfRow& saved, Stream& stream) = 0;
  virtual void accumulate_relu_gradient(float* acc, const float* grads,
                                        const kernel_math::ReluOutput& relu_output, int64_t count,
                                        bool first, Stream& stream) = 0;
  // compress_gradients() and decompress_gradients() (below) on memory of a device of this
  // kind. REQUIRES: count >= 0, replicas >= 1.
  virtual void compress(const float* grads, uint16_t* half, int64_t count, int replicas,
                        kernel_math::HalfFormat format, Stream& stream) = 0;
  virtual void decompress(const uint16_t* half, float* grads, int64_t count,
                          kernel_math::HalfFormat format, Stream& stream) = 0;
  // squared_norm() (below) on memory of a device of this kind. REQUIRES: count >= 0.
  virtual void squared_norm(const float* values, int64_t count, double* out, Stream& stream) = 0;
  // unscale_gradients() (below) on memory of a device of this kind. REQUIRES: count >= 0.
  virtual void unscale(float* grads, int64_t count, float inv_scale, float* found_inf,
                       Stream& stream) = 0;
};

// The kernel backends built into this binary, CPU first.
const std::vector<KernelBackend*>& kernel_backends();
// The kernels for devices of `kind`; throws Error with missing_backend_message(kind) when this
// build has none.
KernelBackend& kernel_backend(DeviceKind kind);

// The precision kernels compute in (core/precision.h), process-wide: read when a kernel is
// constructed, so kernels built earlier keep theirs; set it before building models.
// Thread-safe. kTf32 by default (PyTorch's cuDNN default and TensorFlow's), which CPU kernels
// compute as fp32.
// - GPU kernels: kTf32 lets fp32 matrix products use TF32 on tensor cores (cuBLAS's
//   CUBLAS_COMPUTE_32F_FAST_TF32, cuDNN's CUDNN_DEFAULT_MATH); kFp32 is strict fp32
//   (CUBLAS_COMPUTE_32F, CUDNN_FMA_MATH). kBf16 and kFp16 run dense layers, convolutions and
//   attention's products on 16-bit copies of their operands with fp32 accumulation (a
//   convolution's results rounded to the 16-bit type cuDNN writes them in), the rest in fp32.
// - CPU kernels: kBf16 runs convolutions and dense layers on bf16 copies of their inputs,
//   weights and output gradients with fp32 accumulation and fp32 outputs (oneDNN picks AMX or
//   AVX-512 BF16 where the CPU has them); everything else computes in fp32.
// KernelBackend::precisions() says which a backend runs; the trainer refuses the others.
void set_precision(Precision precision);
Precision precision();
// precision() == Precision::kTf32: what GPU kernels ask when they pick their math.
bool allow_tf32();
// The 16-bit format of `precision`: what its 16-bit operands and the activations a model saves
// for backward are stored in; none for fp32 and tf32.
std::optional<kernel_math::HalfFormat> half_format(Precision precision);
// Sets precision() for a scope and restores the one before, also when the scope throws.
class ScopedPrecision {
 public:
  explicit ScopedPrecision(Precision p) : saved_(precision()) { set_precision(p); }
  ~ScopedPrecision() { set_precision(saved_); }
  ScopedPrecision(const ScopedPrecision&) = delete;
  ScopedPrecision& operator=(const ScopedPrecision&) = delete;

 private:
  Precision saved_;
};

// How strictly GPU kernels are deterministic (bit-identical results run after run on one
// device, as CPU kernels always are); cuDNN's algorithms that accumulate with atomics are not.
enum class Determinism {
  // Deterministic algorithms wherever one fits the workspace limit; a pass with none runs the
  // fastest allowed one that fits, and its kernel says why (KernelChoice::fallback). The
  // default: a large layer on a small device runs instead of failing.
  kPreferred,
  // Deterministic algorithms only: a layer without one that fits is an error.
  kRequired,
  // Any algorithm: the fastest allowed one that fits.
  kOff,
};
std::string to_string(Determinism determinism);  // "preferred", "required", "off"

// Process-wide, kPreferred by default; read when a kernel is constructed, like precision().
// Thread-safe.
void set_determinism(Determinism determinism);
Determinism determinism();

// How GPU kernels choose among a library's algorithms for a layer: by the library's heuristics
// (cuDNN's cudnnGetConvolution*Algorithm_v7 ranking, the default), or by timing each candidate
// once on buffers of the layer's shapes when the layer is planned (cudnnFind*AlgorithmEx,
// PyTorch's torch.backends.cudnn.benchmark), the fastest measured first. Either way the
// precision's math, the determinism policy and the workspace limit decide which candidates are
// allowed. Timings vary from run to run, so under kBenchmark two runs may choose differently.
enum class ConvSearch { kHeuristic, kBenchmark };
std::string to_string(ConvSearch search);               // "heuristic", "benchmark"
ConvSearch parse_conv_search(const std::string& name);  // throws Error naming the choices
std::vector<std::string> conv_search_names();
// Process-wide, kHeuristic by default; read when a kernel is constructed. Thread-safe.
void set_conv_search(ConvSearch search);
ConvSearch conv_search();

// Gradient accumulation over micro-batches: acc = grads when `first`, else acc += grads, over
// `count` floats of device memory of stream.device(). Element-wise, so the result does not
// depend on the thread count or launch shape.
// REQUIRES: the device current; runs on `stream` and does not synchronize the host.
void accumulate_into(float* acc, const float* grads, int64_t count, bool first, Stream& stream);

// A graph's add (a ResNet block's end): out = a + b over `count` floats of device memory of
// stream.device(), and with `relu` the ReLU after it fused in, with the ReLU layer's bits
// (kernel_math::activation_forward). Element-wise, as accumulate_into. Where `saved` is set,
// out is also written rounded into it (the model's saved copy of out) in the same pass.
void add_into(float* out, const float* a, const float* b, int64_t count, bool relu, Stream& stream,
              const kernel_math::HalfRow& saved = {});
// The gradient through such a fused ReLU into one of the add's inputs: g = grads masked where
// the ReLU's output (fp32, or its saved 16-bit copy as a restore reads it) is <= 0, as the
// ReLU's backward masks it (kernel_math::activation_backward's bits), then acc = g when
// `first`, else acc += g, as accumulate_into adds the ReLU's gradient.
void accumulate_relu_gradient_into(float* acc, const float* grads,
                                   const kernel_math::ReluOutput& relu_output, int64_t count,
                                   bool first, Stream& stream);

// Gradient compression around a 16-bit all-reduce (what DDP's fp16 and bf16 hooks do):
// compress_gradients writes half[i] = kernel_math::compress_gradient(grads[i], replicas,
// format), the gradient divided by the replica count and rounded to the format, so that the
// all-reduce's sum is the mean; decompress_gradients writes grads[i] = from_half(half[i]).
// Element-wise over `count` elements of device memory of stream.device(), so the result does
// not depend on the thread count or launch shape.
// REQUIRES: the device current; runs on `stream` and does not synchronize the host.
void compress_gradients(const float* grads, uint16_t* half, int64_t count, int replicas,
                        kernel_math::HalfFormat format, Stream& stream);
void decompress_gradients(const uint16_t* half, float* grads, int64_t count,
                          kernel_math::HalfFormat format, Stream& stream);

// out[0] = Σ values[i]², summed in double precision, over `count` floats of device memory of
// stream.device(); `out` is device memory too (the gradient noise scale reads it after the
// step, with the step's other results). The order of the additions depends on the backend and
// the thread count, so the last bits may differ between them.
// REQUIRES: the device current; runs on `stream` and does not synchronize the host.
void squared_norm(const float* values, int64_t count, double* out, Stream& stream);

// The loss scaler's pass over the all-reduced gradients (fp16 training; PyTorch's
// _amp_foreach_non_finite_check_and_unscale_): grads[i] *= inv_scale over `count` floats of
// device memory of stream.device(), and found_inf[0] (device memory) = 1 where any gradient is
// infinite or NaN, else 0. Identical gradients give every replica the same verdict.
// REQUIRES: the device current; runs on `stream` and does not synchronize the host.
void unscale_gradients(float* grads, int64_t count, float inv_scale, float* found_inf,
                       Stream& stream);

// Throws Error unless `binding` is what `spec` needs (positive batch, output shape, parameter and
// gradient shapes), so that no kernel reads or writes out of bounds. Every backend calls it
// before planning a layer.
void check_layer_binding(const LayerSpec& spec, const LayerBinding& binding);

}  // namespace scalescope
