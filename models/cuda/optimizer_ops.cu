// The fused optimizer updates, gradient accumulation, the casts around a compressed
// all-reduce and the gradients' squared norm: one launch over all parameters,
// reading each parameter, gradient and state value once and writing each once.
//
// The per-element arithmetic is kernel_math/optimizer_math.h, cpu_optimizers.cpp's operation by
// operation and rounded as written (no FMA contraction, see kernel_math/host_device.h), so both
// backends produce the same weights. The update is memory-bound, so the lost FMAs cost nothing
// measurable.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "models/cuda/cuda_ops.h"
#include "models/cuda/launch_shape.cuh"
#include "models/kernel_math/half_math.h"
#include "models/kernel_math/optimizer_math.h"

namespace scalescope::cuda_ops {
namespace {

namespace km = kernel_math;

// Grid-stride loops: `__restrict__` because parameters, gradients and state never alias.
// A step the loss scaler skips: every thread reads the flag and leaves.
__device__ inline bool skipped(const float* skip) {
  return skip != nullptr && *skip != 0.0f;
}

__global__ void sgd_kernel(float* __restrict__ w, const float* __restrict__ g, int64_t n, float lr,
                           float wd, const float* skip) {
  if (skipped(skip)) return;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    w[i] = km::sgd_step(w[i], g[i], lr, wd);
  }
}

__global__ void sgd_momentum_kernel(float* __restrict__ w, const float* __restrict__ g,
                                    float* __restrict__ v, int64_t n, float lr, float wd,
                                    float momentum, const float* skip) {
  if (skipped(skip)) return;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const km::SgdMomentumStep next = km::sgd_momentum_step(w[i], g[i], v[i], lr, wd, momentum);
    v[i] = next.v;
    w[i] = next.w;
  }
}

__global__ void adam_kernel(float* __restrict__ w, const float* __restrict__ g,
                            float* __restrict__ m, float* __restrict__ v, int64_t n, AdamScalars s,
                            const float* skip) {
  if (skipped(skip)) return;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const km::AdamStep next = km::adam_step(w[i], g[i], m[i], v[i], s);
    m[i] = next.m;
    v[i] = next.v;
    w[i] = next.w;
  }
}

__global__ void accumulate_kernel(float* __restrict__ acc, const float* __restrict__ grads,
                                  int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    acc[i] += grads[i];
  }
}

__global__ void compress_kernel(const float* __restrict__ grads, uint16_t* __restrict__ half,
                                int64_t n, int replicas, km::HalfFormat format) {
  for_each_element(
      n, [&](int64_t i) { return grads[i]; },
      [&](int64_t i, float g) { half[i] = km::compress_gradient(g, replicas, format); });
}

__global__ void decompress_kernel(const uint16_t* __restrict__ half, float* __restrict__ grads,
                                  int64_t n, km::HalfFormat format) {
  for_each_element(
      n, [&](int64_t i) { return half[i]; },
      [&](int64_t i, uint16_t h) { grads[i] = km::from_half(h, format); });
}

// found_inf was zeroed before the launch; any thread that sees an overflow sets it (all write
// the same 1, so the race is benign).
__global__ void unscale_kernel(float* __restrict__ g, int64_t n, float inv_scale,
                               float* __restrict__ found_inf) {
  bool overflowed = false;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float v = g[i] * inv_scale;
    g[i] = v;
    overflowed = overflowed || !isfinite(v);
  }
  if (overflowed) *found_inf = 1.0f;
}

// Each block adds up its grid-stride share in double precision, reduces the threads' sums in
// shared memory and adds its total to `out` with one atomic. The blocks' order varies from run
// to run, so the last bits may too: a norm for the noise scale, not a value training uses.
__global__ void squared_norm_kernel(const float* __restrict__ x, int64_t n,
                                    double* __restrict__ out) {
  __shared__ double partial[kThreads];
  double sum = 0.0;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const double v = x[i];
    sum += v * v;
  }
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(out, partial[0]);
}

}  // namespace

void sgd_update(float* w, const float* g, float* v, int64_t n, float lr, float weight_decay,
                float momentum, const float* skip, cudaStream_t stream) {
  if (n == 0) return;
  if (v != nullptr) {
    sgd_momentum_kernel<<<grid_for(n), kThreads, 0, stream>>>(w, g, v, n, lr, weight_decay,
                                                              momentum, skip);
    check_launch("sgd_momentum_kernel");
    return;
  }
  sgd_kernel<<<grid_for(n), kThreads, 0, stream>>>(w, g, n, lr, weight_decay, skip);
  check_launch("sgd_kernel");
}

void adam_update(float* w, const float* g, float* m, float* v, int64_t n, const AdamScalars& s,
                 const float* skip, cudaStream_t stream) {
  if (n == 0) return;
  adam_kernel<<<grid_for(n), kThreads, 0, stream>>>(w, g, m, v, n, s, skip);
  check_launch("adam_kernel");
}

void accumulate(float* acc, const float* grads, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  accumulate_kernel<<<grid_for(n), kThreads, 0, stream>>>(acc, grads, n);
  check_launch("accumulate_kernel");
}

void compress_gradients(const float* grads, uint16_t* half, int64_t n, int replicas,
                        km::HalfFormat format, cudaStream_t stream) {
  if (n == 0) return;
  compress_kernel<<<grid_for_elements(n), kThreads, 0, stream>>>(grads, half, n, replicas, format);
  check_launch("compress_kernel");
}

void decompress_gradients(const uint16_t* half, float* grads, int64_t n, km::HalfFormat format,
                          cudaStream_t stream) {
  if (n == 0) return;
  decompress_kernel<<<grid_for_elements(n), kThreads, 0, stream>>>(half, grads, n, format);
  check_launch("decompress_kernel");
}

void add_squared_norm(const float* x, int64_t n, double* out, cudaStream_t stream) {
  if (n == 0) return;
  squared_norm_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, n, out);
  check_launch("squared_norm_kernel");
}

void unscale_gradients(float* grads, int64_t n, float inv_scale, float* found_inf,
                       cudaStream_t stream) {
  if (n == 0) return;
  unscale_kernel<<<grid_for(n), kThreads, 0, stream>>>(grads, n, inv_scale, found_inf);
  check_launch("unscale_kernel");
}

}  // namespace scalescope::cuda_ops
