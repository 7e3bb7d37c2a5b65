// Element-wise activations: forward from the input x, backward from the output y (as oneDNN's
// *_use_dst_for_bwd algorithms, which the CPU kernels run) except GELU's, which needs x, with the
// CPU kernels' results:
//
// - ReLU is x > 0 ? x : +0, so NaN and -0 give +0: oneDNN's x86 kernels compute max(x, 0) with
//   maxps, which returns its second operand when the first is NaN. Its gradient is dy · (y <= 0 ?
//   0 : 1): a NaN gradient stays NaN, a negative one becomes -0, and a NaN y passes dy.
// - tanh' = (1 - y²) · dy with 1 - y² as one fused multiply-add, as oneDNN's x86 kernels on FMA
//   hardware: rounding y² first would lose most digits of 1 - y² near saturation.
// - sigmoid' = (y · (1 - y)) · dy, in that order.
// - tanh and sigmoid give NaN for NaN, forward and backward.
// - GELU is GPT-2's tanh approximation (PyTorch's F.gelu(x, approximate="tanh")),
//   0.5·x·(1 + tanh(u)) with u = k·(x + 0.044715·x³), k = sqrt(2/pi), computed as the same
//   function x·σ(2u) = x / (1 + exp(−2u)) (1 + tanh(u) = 2·σ(2u)): one vector_exp and one
//   division, which compilers vectorise, and no 1 + tanh(u) cancelling to nothing in the
//   negative tail. Its derivative is σ(2u)·(1 + 2·x·σ(−2u)·u'), σ(−2u) = exp(−2u)·σ(2u).
//   The CPU and CUDA kernels both run these functions: the same bits on both.
//
// Backward of ReLU, tanh and sigmoid is therefore the CPU's bits, and GELU both ways. Forward
// tanh and sigmoid agree with the CPU to a few ulps only: oneDNN evaluates its own
// approximations of tanh and exp, the host and the GPU their math libraries' tanhf and expf.
#pragma once

#include <cmath>
#include <cstdint>

#include "models/kernel_math/exp_math.h"
#include "models/kernel_math/half_math.h"
#include "models/kernel_math/host_device.h"
#include "models/layer_spec.h"

namespace scalescope::kernel_math {

// GELU's constants as PyTorch rounds them to float: sqrt(2)·(2/sqrt(pi))·0.5 and 0.044715.
constexpr float kGeluBeta = 0.7978845608028654f;
constexpr float kGeluKappa = 0.044715f;

// exp(−2u): +inf where x is so negative that σ(2u) is 0 in float.
SS_HOST_DEVICE inline float gelu_exp_minus_2u(float x) {
  const float u = kGeluBeta * (x + kGeluKappa * (x * x * x));
  return vector_exp(-2.0f * u);
}

SS_HOST_DEVICE inline float gelu_forward(float x) {
  return x / (1.0f + gelu_exp_minus_2u(x));
}

SS_HOST_DEVICE inline float gelu_backward(float x, float dy) {
  const float e = gelu_exp_minus_2u(x);
  const float s = 1.0f / (1.0f + e);                  // σ(2u)
  const float s_minus = e < INFINITY ? e * s : 1.0f;  // σ(−2u), not inf · 0
  const float u_derivative = kGeluBeta * (1.0f + 3.0f * kGeluKappa * (x * x));
  return dy * (s * (1.0f + 2.0f * x * s_minus * u_derivative));
}

SS_HOST_DEVICE inline float activation_forward(Activation kind, float x) {
  if (kind == Activation::kRelu) return x > 0.0f ? x : 0.0f;
  if (kind == Activation::kTanh) return tanhf(x);
  if (kind == Activation::kGelu) return gelu_forward(x);
  return 1.0f / (1.0f + expf(-x));  // kSigmoid
}

// The gradient from the forward's input x and output y: GELU reads x, the others y.
SS_HOST_DEVICE inline float activation_backward(Activation kind, float x, float y, float dy) {
  if (kind == Activation::kRelu) return y <= 0.0f ? dy * 0.0f : dy;
  if (kind == Activation::kTanh) return fmaf(-y, y, 1.0f) * dy;
  if (kind == Activation::kGelu) return gelu_backward(x, dy);
  return (y * (1.0f - y)) * dy;  // kSigmoid
}

// A graph's add with the ReLU after it fused in (kernels.h's add_into), and the ReLU's gradient
// through its output y into one of the add's inputs (accumulate_relu_gradient_into): the ReLU
// layer's bits, and its backward's.
SS_HOST_DEVICE inline float add_relu_forward(float a, float b) {
  return activation_forward(Activation::kRelu, a + b);
}
SS_HOST_DEVICE inline float relu_gradient(float y, float dy) {
  return activation_backward(Activation::kRelu, 0.0f, y, dy);
}

// Such a ReLU's output as its backward reads it: fp32 values, or (values null, under bf16 and
// fp16) the model's saved 16-bit copy of them, read as a restore would give them.
struct ReluOutput {
  const float* values = nullptr;
  const uint16_t* saved = nullptr;
  HalfFormat format = HalfFormat::kBf16;
  SS_HOST_DEVICE float operator[](int64_t i) const {
    return values != nullptr ? values[i] : from_half(saved[i], format);
  }
};

}  // namespace scalescope::kernel_math
