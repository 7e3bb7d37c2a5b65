// The fused optimizer updates and gradient accumulation: one launch over all parameters,
// reading each parameter, gradient and state value once and writing each once.
//
// The arithmetic is cpu_optimizers.cpp's operation by operation, and written with the
// round-to-nearest intrinsics (__fmul_rn, __fadd_rn, ...) so that nvcc does not contract a
// multiply and an add into one FMA: the CPU build cannot contract (it targets baseline x86-64,
// which has no FMA instruction), so both backends round every step alike and produce the same
// weights. Division and
// sqrt are IEEE-rounded on both (nvcc's defaults without --use_fast_math). The update is
// memory-bound, so the lost FMAs cost nothing measurable.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "models/cuda/cuda_ops.h"

namespace scalescope::cuda_ops {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 8192;

unsigned grid_for(int64_t count) {
  return static_cast<unsigned>(std::min<int64_t>((count + kThreads - 1) / kThreads, kMaxBlocks));
}

// Grid-stride loops: `__restrict__` because parameters, gradients and state never alias.
__global__ void sgd_kernel(float* __restrict__ w, const float* __restrict__ g, int64_t n, float lr,
                           float wd) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float wi = w[i];
    const float d = __fadd_rn(g[i], __fmul_rn(wd, wi));
    w[i] = __fsub_rn(wi, __fmul_rn(lr, d));
  }
}

// PyTorch's SGD with momentum, no dampening: v starts at zero, so the first step gives v = d.
__global__ void sgd_momentum_kernel(float* __restrict__ w, const float* __restrict__ g,
                                    float* __restrict__ v, int64_t n, float lr, float wd,
                                    float momentum) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float wi = w[i];
    const float d = __fadd_rn(g[i], __fmul_rn(wd, wi));
    const float vi = __fadd_rn(__fmul_rn(momentum, v[i]), d);
    v[i] = vi;
    w[i] = __fsub_rn(wi, __fmul_rn(lr, vi));
  }
}

// Adam as PyTorch's single-tensor implementation evaluates it:
// w -= step_size · m / (sqrt(v) / sqrt(1 - beta2^t) + eps), step_size = lr / (1 - beta1^t).
__global__ void adam_kernel(float* __restrict__ w, const float* __restrict__ g,
                            float* __restrict__ m, float* __restrict__ v, int64_t n,
                            AdamScalars s) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float wi = w[i];
    const float d = __fadd_rn(g[i], __fmul_rn(s.weight_decay, wi));
    const float mi = __fadd_rn(__fmul_rn(s.beta1, m[i]), __fmul_rn(s.one_minus_beta1, d));
    const float vi =
        __fadd_rn(__fmul_rn(s.beta2, v[i]), __fmul_rn(__fmul_rn(s.one_minus_beta2, d), d));
    m[i] = mi;
    v[i] = vi;
    const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), s.bias_correction2_sqrt), s.eps);
    w[i] = __fsub_rn(wi, __fmul_rn(s.step_size, __fdiv_rn(mi, denom)));
  }
}

__global__ void accumulate_kernel(float* __restrict__ acc, const float* __restrict__ grads,
                                  int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    acc[i] += grads[i];
  }
}

}  // namespace

void sgd_update(float* w, const float* g, float* v, int64_t n, float lr, float weight_decay,
                float momentum, cudaStream_t stream) {
  if (n == 0) return;
  if (v != nullptr) {
    sgd_momentum_kernel<<<grid_for(n), kThreads, 0, stream>>>(w, g, v, n, lr, weight_decay,
                                                              momentum);
    check_launch("sgd_momentum_kernel");
    return;
  }
  sgd_kernel<<<grid_for(n), kThreads, 0, stream>>>(w, g, n, lr, weight_decay);
  check_launch("sgd_kernel");
}

void adam_update(float* w, const float* g, float* m, float* v, int64_t n, const AdamScalars& s,
                 cudaStream_t stream) {
  if (n == 0) return;
  adam_kernel<<<grid_for(n), kThreads, 0, stream>>>(w, g, m, v, n, s);
  check_launch("adam_kernel");
}

void accumulate(float* acc, const float* grads, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  accumulate_kernel<<<grid_for(n), kThreads, 0, stream>>>(acc, grads, n);
  check_launch("accumulate_kernel");
}

}  // namespace scalescope::cuda_ops
