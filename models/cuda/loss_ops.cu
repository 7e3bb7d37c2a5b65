// Our loss and accuracy kernels. They follow cpu_losses.cpp formula by formula: per-sample
// arithmetic in double (exp, log, the log-sum-exp), gradients rounded to float once at the
// end, the batch sum in double. Only the order of the additions differs (a warp's tree instead
// of a serial loop), far below float precision.
//
// The batch sum is one block adding the per-sample values in a fixed order, not atomics: the
// loss of a step is then the same bits on every run, as on the CPU.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "models/cuda/cuda_ops.h"

namespace scalescope::cuda_ops {
namespace {

constexpr int kThreads = 256;
constexpr int kWarp = 32;
constexpr int64_t kMaxBlocks = 8192;
constexpr unsigned kFullMask = 0xffffffffu;
// Keras's epsilon for BCE's clip, as the CPU loss.
constexpr double kBceEpsilon = 1e-7;

unsigned grid_for(int64_t threads_needed) {
  return static_cast<unsigned>(
      std::min<int64_t>((threads_needed + kThreads - 1) / kThreads, kMaxBlocks));
}

__device__ float warp_max(float v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    v = fmaxf(v, __shfl_xor_sync(kFullMask, v, offset));
  }
  return v;
}

__device__ double warp_sum(double v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

// Softmax cross-entropy, one warp per sample (classes spread over the lanes), warps striding
// over the batch. A warp's lanes always work on the same sample, so the shuffles see all 32.
// Sparse labels: loss = lse(z) - z_y, d/dz_j = softmax_j - [j == y]. One-hot (or soft)
// targets: loss = sum_j t_j (lse - z_j), d/dz_j = (sum t) softmax_j - t_j.
__global__ void softmax_ce_kernel(const float* z_all, const float* labels, bool one_hot,
                                  double scale, int64_t batch, int64_t k, double* per_sample,
                                  float* dout) {
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / kWarp);
  for (int64_t i = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp; i < batch;
       i += warps) {
    const float* z = z_all + i * k;
    float m = -INFINITY;
    for (int64_t j = lane; j < k; j += kWarp) m = fmaxf(m, z[j]);
    const double max_z = warp_max(m);
    double s = 0.0;
    for (int64_t j = lane; j < k; j += kWarp) s += exp(static_cast<double>(z[j]) - max_z);
    const double lse = max_z + log(warp_sum(s));

    double loss = 0.0;
    double t_sum = 0.0;
    int64_t y = -1;
    const float* t = one_hot ? labels + i * k : nullptr;  // the sample's targets
    if (one_hot) {
      double part = 0.0;
      double part_t = 0.0;
      for (int64_t j = lane; j < k; j += kWarp) {
        part += static_cast<double>(t[j]) * (lse - static_cast<double>(z[j]));
        part_t += t[j];
      }
      loss = warp_sum(part);
      t_sum = warp_sum(part_t);
    } else {
      // Not a class index: NaN rather than another sample's logits (labels are the input
      // pipeline's to check; this only keeps a bad one from reading out of bounds).
      const float label = labels[i];
      const bool valid = label >= 0.0f && label < static_cast<float>(k) && floorf(label) == label;
      y = valid ? static_cast<int64_t>(label) : -1;
      loss = valid ? lse - static_cast<double>(z[y]) : NAN;
    }
    if (lane == 0) per_sample[i] = loss;
    if (dout == nullptr) continue;
    float* g = dout + i * k;
    for (int64_t j = lane; j < k; j += kWarp) {
      const double p = exp(static_cast<double>(z[j]) - lse);
      double d = 0.0;
      if (one_hot) {
        d = t_sum * p - static_cast<double>(t[j]);
      } else {
        d = y < 0 ? NAN : p - (j == y ? 1.0 : 0.0);
      }
      g[j] = static_cast<float>(scale * d);
    }
  }
}

// Binary cross-entropy on probabilities clipped to [eps, 1 - eps], with the CPU loss's
// gradient (p - y) / (p (1 - p)) at the clipped p (cpu_losses.cpp says why). One thread per
// sample.
__global__ void bce_kernel(const float* probabilities, const float* labels, double scale,
                           int64_t batch, double* per_sample, float* dout) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < batch;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const double y = labels[i];
    // std::clamp's comparisons, so that a NaN probability stays NaN as on the CPU.
    const double q = probabilities[i];
    const double p =
        q < kBceEpsilon ? kBceEpsilon : (1.0 - kBceEpsilon < q ? 1.0 - kBceEpsilon : q);
    per_sample[i] = -(y * log(p) + (1.0 - y) * log1p(-p));
    if (dout != nullptr) dout[i] = static_cast<float>(scale * (p - y) / (p * (1.0 - p)));
  }
}

// The CPU's argmax: the first index whose value beats every earlier best (ties to the lowest
// index; a NaN never beats anything). A serial scan per sample keeps exactly that rule;
// accuracy is evaluated once per batch, not in the training step.
__device__ int64_t argmax(const float* v, int64_t n) {
  int64_t best = 0;
  for (int64_t j = 1; j < n; ++j) {
    if (v[j] > v[best]) best = j;
  }
  return best;
}

__global__ void correct_kernel(int kind, const float* output, const float* labels, int64_t batch,
                               int64_t k, double* per_sample) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < batch;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float* z = output + i * k;
    bool hit = false;
    switch (static_cast<LossKind>(kind)) {
      case LossKind::kSoftmaxCrossEntropy: {
        // The CPU truncates the label to an index (after checking it); an index that is out of
        // range (or NaN) is never a hit here rather than undefined.
        const float label = labels[i];
        hit = label >= 0.0f && label < static_cast<float>(k) &&
              static_cast<int64_t>(label) == argmax(z, k);
        break;
      }
      case LossKind::kSoftmaxCrossEntropyOneHot:
        hit = argmax(z, k) == argmax(labels + i * k, k);
        break;
      case LossKind::kBinaryCrossEntropy:
        hit = (z[0] >= 0.5f) == (labels[i] >= 0.5f);
        break;
    }
    per_sample[i] = hit ? 1.0 : 0.0;
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
  correct_kernel<<<grid_for(batch), kThreads, 0, stream>>>(static_cast<int>(kind), output, labels,
                                                           batch, classes, per_sample);
  check_launch("correct_kernel");
}

void sum_to_float(const double* values, int64_t count, double scale, float* result,
                  cudaStream_t stream) {
  sum_kernel<<<1, kThreads, 0, stream>>>(values, count, scale, result);
  check_launch("sum_kernel");
}

}  // namespace scalescope::cuda_ops
