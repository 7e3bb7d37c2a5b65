// Our loss and accuracy kernels. Their per-sample math is kernel_math/loss_math.h, which is
// cpu_losses.cpp's formula by formula (per-sample arithmetic in double, gradients rounded to float
// once at the end); the batch sum is in double. Only the order of the additions differs from the
// CPU (a warp's tree instead of a serial loop), far below float precision.
//
// The batch sum is one block adding the per-sample values in a fixed order, not atomics: the
// loss of a step is then the same bits on every run, as on the CPU.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "models/cuda/cuda_ops.h"
#include "models/cuda/launch_shape.cuh"
#include "models/kernel_math/loss_math.h"

namespace scalescope::cuda_ops {
namespace {

namespace km = kernel_math;

// Softmax cross-entropy, one warp per sample (classes spread over the lanes), warps striding
// over the batch. A warp's lanes always work on the same sample, so the shuffles see all 32.
__global__ void softmax_ce_kernel(const float* z, const float* labels, bool one_hot, double scale,
                                  int64_t batch, int64_t k, double* per_sample, float* dout) {
  for (int64_t i = first_warp(); i < batch; i += warp_stride()) {
    const double loss = km::softmax_ce_row(z + i * k, labels + (one_hot ? i * k : i), one_hot, k,
                                           scale, dout == nullptr ? nullptr : dout + i * k,
                                           km::RowShare{lane(), kWarp}, WarpReduce{});
    if (lane() == 0) per_sample[i] = loss;
  }
}

// Binary cross-entropy, one thread per sample.
__global__ void bce_kernel(const float* probabilities, const float* labels, double scale,
                           int64_t batch, double* per_sample, float* dout) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < batch;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    per_sample[i] = km::bce_loss(probabilities[i], labels[i]);
    if (dout != nullptr) dout[i] = km::bce_gradient(probabilities[i], labels[i], scale);
  }
}

// One thread per sample: a serial argmax keeps the CPU's tie rule exactly, and accuracy is
// evaluated once per batch, not in the training step.
__global__ void correct_kernel(LossKind kind, const float* output, const float* labels,
                               int64_t batch, int64_t k, double* per_sample) {
  const int64_t label_size = kind == LossKind::kSoftmaxCrossEntropyOneHot ? k : 1;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < batch;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    per_sample[i] =
        km::prediction_correct(kind, output + i * k, labels + i * label_size, k) ? 1.0 : 0.0;
  }
}

// One block: each thread adds a strided slice in order, then a tree of fixed shape.
__global__ void sum_kernel(const double* values, int64_t count, double scale, float* result) {
  __shared__ double partial[kThreads];
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < count; i += kThreads) sum += values[i];
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int width = kThreads / 2; width > 0; width /= 2) {
    if (static_cast<int>(threadIdx.x) < width) partial[threadIdx.x] += partial[threadIdx.x + width];
    __syncthreads();
  }
  if (threadIdx.x == 0) result[0] = static_cast<float>(scale * partial[0]);
}

}  // namespace

void loss_per_sample(LossKind kind, const float* output, const float* labels, double scale,
                     int64_t batch, int64_t classes, double* per_sample, float* dout,
                     cudaStream_t stream) {
  if (batch == 0) return;
  if (kind == LossKind::kBinaryCrossEntropy) {
    bce_kernel<<<grid_for(batch), kThreads, 0, stream>>>(output, labels, scale, batch, per_sample,
                                                         dout);
    check_launch("bce_kernel");
    return;
  }
  softmax_ce_kernel<<<grid_for(batch * kWarp), kThreads, 0, stream>>>(
      output, labels, kind == LossKind::kSoftmaxCrossEntropyOneHot, scale, batch, classes,
      per_sample, dout);
  check_launch("softmax_ce_kernel");
}

void correct_per_sample(LossKind kind, const float* output, const float* labels, int64_t batch,
                        int64_t classes, double* per_sample, cudaStream_t stream) {
  if (batch == 0) return;
  correct_kernel<<<grid_for(batch), kThreads, 0, stream>>>(kind, output, labels, batch, classes,
                                                           per_sample);
  check_launch("correct_kernel");
}

void sum_to_float(const double* values, int64_t count, double scale, float* result,
                  cudaStream_t stream) {
  sum_kernel<<<1, kThreads, 0, stream>>>(values, count, scale, result);
  check_launch("sum_kernel");
}

}  // namespace scalescope::cuda_ops
