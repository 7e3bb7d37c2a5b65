// Launchers of our own CUDA kernels (layer_ops.cu, norm_ops.cu, loss_ops.cu, optimizer_ops.cu),
// called by the kernel classes in cuda_layers.cpp, cuda_conv.cpp, cuda_norm.cpp, cuda_losses.cpp
// and cuda_optimizers.cpp.
//
// Each launcher enqueues its work on `stream` and checks the launch (check_launch); none
// synchronizes the host or allocates. Pointers are device memory of the current device. A
// count of zero launches nothing. Layouts are those of the CPU kernels: images NHWC, 2-D
// activations [rows, features] (features fastest).
//
// The math of each kernel is in models/kernel_math/, whose rules (NaN, ties, order of
// additions) these launchers inherit; the kernels map threads to elements, rows and windows.
//
// This header and those are the only ones the .cu files include of ours besides layer_spec.h:
// nvcc cannot compile fmt's compile-time format strings, so the .cu files reach check_launch (in
// cuda_libraries.cpp, compiled by the C++ compiler) instead of the SS_CHECK_* macros.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <source_location>

#include "models/kernel_math/activation_math.h"
#include "models/kernel_math/bias_math.h"
#include "models/kernel_math/half_math.h"
#include "models/kernel_math/optimizer_math.h"
#include "models/kernel_math/pool_math.h"
#include "models/kernel_math/shortcut_math.h"
#include "models/layer_spec.h"

namespace scalescope {

// Throws Error (library "CUDA", expression `kernel`, the launch site as its location) when
// the last launch on this thread failed. Called after every kernel launch.
void check_launch(const char* kernel, std::source_location where = std::source_location::current());

namespace cuda_ops {

// ---- layers (layer_ops.cu)

// y[r, c] += bias[c] over a [rows, channels] tensor (NHWC images are [N·H·W, C]).
void bias_add(float* y, const float* bias, int64_t rows, int64_t channels, cudaStream_t stream);
// The same sums rounded into `out` (to_half), the model's saved 16-bit copy of y + bias under
// bf16 and fp16, with y left as it is: the bits of bias_add then that copy's rounding.
void bias_add_to_half(const float* y, const float* bias, uint16_t* out, int64_t rows,
                      int64_t channels, kernel_math::HalfFormat format, cudaStream_t stream);

// How many floats of scratch bias_grad needs for this shape (0: none). The sum over rows is
// split into parts whose partial sums are added in a fixed order (kernel_math/bias_math.h), so
// the result does not vary from run to run as atomics would make it.
int64_t bias_grad_scratch(int64_t rows, int64_t channels);
// db[c] = sum over r of read(dy[r, c]) (under 16 bits dy's rounding: kernel_math::BiasGradRead).
// `scratch` holds bias_grad_scratch(rows, channels) floats.
void bias_grad(const float* dy, float* db, int64_t rows, int64_t channels, float* scratch,
               kernel_math::BiasGradRead read, cudaStream_t stream);

// Element-wise activation; backward takes the forward's input x and output y, and reads y (as the
// CPU kernels' *_use_dst_for_bwd) except for GELU, which reads x. The CPU kernels' rules
// (kernel_math/activation_math.h): ReLU maps NaN and -0 to +0.
void activation_forward(Activation kind, const float* x, float* y, int64_t count,
                        cudaStream_t stream);
void activation_backward(Activation kind, const float* x, const float* y, const float* dy,
                         float* dx, int64_t count, cudaStream_t stream);
// GELU on the model's saved 16-bit copies under bf16 and fp16 (LayerKernel::forward_into_saved
// and backward_saved): y = to_half(gelu(from_half(x))), the fp32 forward of the widened input
// rounded as the model's save rounds it, and dx from the widened input: no fp32 x or y.
void gelu_forward_half(const uint16_t* x, uint16_t* y, int64_t count,
                       kernel_math::HalfFormat format, cudaStream_t stream);
void gelu_backward_half(const uint16_t* x, const float* dy, float* dx, int64_t count,
                        kernel_math::HalfFormat format, cudaStream_t stream);

// y = kernel_math::dropout_apply(x, dropout_keep(seed, pass, i, rate), scale) element-wise.
void dropout(const float* x, float* y, int64_t count, float rate, float scale, uint64_t seed,
             uint64_t pass, cudaStream_t stream);

// out[b, c, r] = in[b, r, c] for b < batches: NHWC -> NCHW is (N, H·W, C), NCHW -> NHWC is
// (N, C, H·W), OIHW -> OHWI is (O, I, KH·KW), OHWI -> OIHW is (O, KH·KW, I).
void transpose(const float* in, float* out, int64_t batches, int64_t rows, int64_t cols,
               cudaStream_t stream);

// NHWC [n, h, w, c] into the top-left corner of [n, h + extra_h, w + extra_w, c], zeros in the
// extra rows and columns; crop is the inverse (copies the corner back out).
void extend_nhwc(const float* in, float* out, int64_t n, int64_t h, int64_t w, int64_t c,
                 int64_t extra_h, int64_t extra_w, cudaStream_t stream);
void crop_nhwc(const float* extended, float* out, int64_t n, int64_t h, int64_t w, int64_t c,
               int64_t extra_h, int64_t extra_w, cudaStream_t stream);

// `rows` rows of `width` values from `from` (rows `from_pitch` apart) to `to` (`to_pitch`
// apart), zeros in the columns of `to` past `width`: kernel_math::pitched_row_source's copy,
// one pass through memory (cudaMemcpy2DAsync took 1.97 ms for GPT-2 small's 1.65 GB head chunk
// copies on an H200, where PyTorch's copy kernel took 1.20).
void copy_pitched_rows(const float* from, int64_t from_pitch, float* to, int64_t to_pitch,
                       int64_t width, int64_t rows, cudaStream_t stream);

using PoolShape = kernel_math::PoolShape;
// Max pooling with PyTorch's implicit -inf padding (s.pad, 0 for none), NaN winning as in the
// CPU kernel. Backward gives each window's gradient to the first input (row-major within the
// window) equal to the window's output, adding the contributions of overlapping windows in the
// CPU kernel's order, and writes every element of dx. Forward records each window's choice
// into `choices` (one per output; null: none, as evaluation needs), which backward reads.
void max_pool_forward(const PoolShape& s, const float* x, float* y, uint16_t* choices,
                      cudaStream_t stream);
void max_pool_backward(const PoolShape& s, const uint16_t* choices, const float* dy, float* dx,
                       cudaStream_t stream);

// Mean over the `pixels` = H·W positions of NHWC [n, pixels, c] into [n, c], and its gradient.
void global_avg_pool_forward(const float* x, float* y, int64_t n, int64_t pixels, int64_t c,
                             cudaStream_t stream);
void global_avg_pool_backward(const float* dy, float* dx, int64_t n, int64_t pixels, int64_t c,
                              cudaStream_t stream);

// out = a + b, and with `relu` the ReLU of it (kernel_math::add_relu_forward); acc = g (first)
// or acc += g with g the ReLU's backward of grads through relu_output
// (kernel_math::relu_gradient): a graph's add with the ReLU after it fused in. Where `saved` is
// set, out is also written rounded into it.
void add(float* out, const float* a, const float* b, int64_t n, bool relu,
         const kernel_math::HalfRow& saved, cudaStream_t stream);
void accumulate_relu_gradient(float* acc, const float* grads,
                              const kernel_math::ReluOutput& relu_output, int64_t n, bool first,
                              cudaStream_t stream);

// ---- batch normalization and the option-A shortcut (norm_ops.cu)

// Batch normalization over x [rows, channels] (NHWC images are [N·H·W, C]) with
// kernel_math/norm_math.h's math and order of additions: no atomics, so every result is the
// same run after run.
struct BatchNormTensors {
  const float* gamma;  // [channels] each
  const float* beta;
  float* running_mean;
  float* running_var;
  float* num_batches_tracked;  // one float
  float* mean;                 // the last training forward's, which backward reads
  float* invstd;
  float* scratch;  // batch_norm_scratch(rows, channels) floats
  float* sync;     // what the synchronized stages all-reduce (norm_math.h's *_sync_floats)
};
// How many floats of scratch the per-channel sums and the backward's per-channel factors of this
// shape need (the allocation's alignment: the factors are read 16 bytes at a time).
int64_t batch_norm_scratch(int64_t rows, int64_t channels);
// With a ReLU fused after the batch norm (norm_math.h), forward passes write the ReLU's output
// (`relu`) and backward passes start from the ReLU's backward of dy, reading its output relu_y
// (null: no ReLU fused).
// Training: normalizes with the batch's statistics, saves its mean and invstd, and updates the
// running statistics and num_batches_tracked. REQUIRES: rows >= 2.
void batch_norm_forward_train(const float* x, float* y, int64_t rows, int64_t channels, float eps,
                              float momentum, bool relu, const BatchNormTensors& t,
                              cudaStream_t stream);
// Under bf16 and fp16, from the model's saved 16-bit copy of x (the values its restore would
// give), into y or, y null, only into its saved copy y_saved in x's format (the fp32 output
// rounded as the model's save rounds it).
void batch_norm_forward_train(const kernel_math::HalfValues& x, float* y, uint16_t* y_saved,
                              int64_t rows, int64_t channels, float eps, float momentum, bool relu,
                              const BatchNormTensors& t, cudaStream_t stream);
// Evaluation: normalizes with the running statistics and writes nothing else.
void batch_norm_forward_eval(const float* x, float* y, int64_t rows, int64_t channels, float eps,
                             bool relu, const BatchNormTensors& t, cudaStream_t stream);
// Overwrites dgamma and dbeta and, unless dx is null, writes dx, from the mean and invstd of the
// last training forward.
void batch_norm_backward(const float* x, const float* dy, const float* relu_y, float* dx,
                         float* dgamma, float* dbeta, int64_t rows, int64_t channels,
                         const BatchNormTensors& t, cudaStream_t stream);
// The same from the saved 16-bit copies of x and of the fused ReLU's output (none: no values),
// dx written as fp32 or, given `dx_half`, only rounded into it in x's format.
void batch_norm_backward(const kernel_math::HalfValues& x, const float* dy,
                         const kernel_math::HalfValues& relu_y, float* dx, uint16_t* dx_half,
                         float* dgamma, float* dbeta, int64_t rows, int64_t channels,
                         const BatchNormTensors& t, cudaStream_t stream);
// The training passes with statistics over `replicas` batches of `rows` rows each
// (--sync-batchnorm), this one being batch `rank`, in LayerKernel's stages; between two stages
// the caller sums t.sync over the replicas (norm_math.h). Forward: stage 0 gathers this batch's
// moments into its slot of t.sync (norm_forward_sync_floats); stage 1 merges every batch's in
// rank order, saves the mean and invstd, updates the running statistics (the unbiased variance
// divides by rows·replicas - 1) and writes y. Backward: stage 0 overwrites dgamma and dbeta with
// this batch's (Σdy·x̂ and Σdy) and writes them into t.sync [Σdy, Σdy·x̂]; stage 1 writes dx,
// unless null, from the sums of every batch.
// REQUIRES: rows·replicas >= 2.
void batch_norm_forward_stage(int stage, int rank, int replicas, const float* x, float* y,
                              int64_t rows, int64_t channels, float eps, float momentum, bool relu,
                              const BatchNormTensors& t, cudaStream_t stream);
void batch_norm_backward_stage(int stage, int replicas, const float* x, const float* dy,
                               const float* relu_y, float* dx, float* dgamma, float* dbeta,
                               int64_t rows, int64_t channels, const BatchNormTensors& t,
                               cudaStream_t stream);

// out[i] = in[shortcut_source(i)] (0 where none) over `batch` images of shape s, and its
// transpose: din[i] = dout[shortcut_reader(i)] (0 where none).
void pad_shortcut_forward(const kernel_math::ShortcutShape& s, int64_t batch, const float* in,
                          float* out, cudaStream_t stream);
void pad_shortcut_backward(const kernel_math::ShortcutShape& s, int64_t batch, const float* dout,
                           float* din, cudaStream_t stream);

// ---- losses (loss_ops.cu). Per-sample values in double, as the CPU losses compute them.

// per_sample[i] = loss of sample i (unscaled) and, unless dout is null, dout = scale × its
// gradient, for model output [batch, classes]. Labels are not validated (LossKernel allows
// that), but a sparse label that is not a class index yields NaN instead of reading another
// sample's logits.
void loss_per_sample(LossKind kind, const float* output, const float* labels, double scale,
                     int64_t batch, int64_t classes, double* per_sample, float* dout,
                     cudaStream_t stream);
// per_sample[i] = 1 when sample i is classified correctly, else 0 (the CPU kernel's rules:
// argmax with ties to the lowest index; BCE thresholds both sides at 0.5). A sparse label that
// is not a class index is never correct.
void correct_per_sample(LossKind kind, const float* output, const float* labels, int64_t batch,
                        int64_t classes, double* per_sample, cudaStream_t stream);
// result[0] = float(scale × sum of values), summed by one block in a fixed order.
void sum_to_float(const double* values, int64_t count, double scale, float* result,
                  cudaStream_t stream);

// ---- optimizers (optimizer_ops.cu): one launch over all n parameters each.

// Each reads `skip` (device memory, or nullptr) when it runs and changes nothing where it is
// not 0 (OptimizerKernel::skip_when).
// SGD: d = g + wd·w; with momentum (v non-null) v = momentum·v + d, w -= lr·v; else w -= lr·d.
void sgd_update(float* w, const float* g, float* v, int64_t n, float lr, float weight_decay,
                float momentum, const float* skip, cudaStream_t stream);

using AdamScalars = kernel_math::AdamScalars;
void adam_update(float* w, const float* g, float* m, float* v, int64_t n, const AdamScalars& s,
                 const float* skip, cudaStream_t stream);

// grads[i] *= inv_scale; found_inf[0] = 1 where any result is infinite or NaN (the caller
// zeroes it first).
void unscale_gradients(float* grads, int64_t n, float inv_scale, float* found_inf,
                       cudaStream_t stream);

// acc += grads.
void accumulate(float* acc, const float* grads, int64_t n, cudaStream_t stream);

// half[i] = compress_gradient(grads[i], replicas, format); grads is only read.
// decompress_gradients: grads[i] = from_half(half[i]).
void compress_gradients(const float* grads, uint16_t* half, int64_t n, int replicas,
                        kernel_math::HalfFormat format, cudaStream_t stream);
void decompress_gradients(const uint16_t* half, float* grads, int64_t n,
                          kernel_math::HalfFormat format, cudaStream_t stream);

// out[0] += Σ x[i]² (double precision; atomics between blocks).
void add_squared_norm(const float* x, int64_t n, double* out, cudaStream_t stream);

}  // namespace cuda_ops
}  // namespace scalescope
