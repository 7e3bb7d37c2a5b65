// Launchers of the layer normalization kernels (layer_norm_ops.cu), called by
// cuda_layer_norm.cpp. cuda_ops.h's rules hold: each enqueues its work on `stream` and checks the
// launch, none synchronizes the host or allocates, pointers are device memory of the current
// device, and zero rows launch nothing.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "models/kernel_math/half_math.h"

namespace scalescope::cuda_ops {

// Layer normalization over the last dimension of x [rows, d], with kernel_math/layer_norm_math.h's
// math and order of additions: no atomics, so every result is the same run after run, and the
// CPU kernel's to the bit.
struct LayerNormTensors {
  const float* weight;  // [d] each
  const float* bias;
  float* mean;  // [rows] each: the last forward's, which backward reads
  float* rstd;
  float* scratch;  // layer_norm_scratch(rows, d) floats
};
// How many floats of scratch the parameter gradients of this shape need (0: none).
int64_t layer_norm_scratch(int64_t rows, int64_t d);
// y, and each row's mean and rstd.
void layer_norm_forward(const float* x, float* y, int64_t rows, int64_t d, float eps,
                        const LayerNormTensors& t, cudaStream_t stream);
// The same with y written as the model's saved copy in `format` under bf16 and fp16: each value
// of layer_norm_forward rounded (to_half), no fp32 y.
void layer_norm_forward_half(const float* x, uint16_t* y, kernel_math::HalfFormat format,
                             int64_t rows, int64_t d, float eps, const LayerNormTensors& t,
                             cudaStream_t stream);
// Overwrites dw and db and, unless dx is null, writes dx (with `add_dx`, adds it to what dx
// holds: kernel_math::layer_norm_store_dx), from the mean and rstd of the last forward.
void layer_norm_backward(const float* x, const float* dy, float* dx, float* dw, float* db,
                         int64_t rows, int64_t d, const LayerNormTensors& t, bool add_dx,
                         cudaStream_t stream);

}  // namespace scalescope::cuda_ops
