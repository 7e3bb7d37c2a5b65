// Element-wise activations: forward from the input x, backward from the output y (as oneDNN's
// *_use_dst_for_bwd algorithms, which the CPU kernels run), with the CPU kernels' results:
//
// - ReLU is x > 0 ? x : +0, so NaN and -0 give +0: oneDNN's x86 kernels compute max(x, 0) with
//   maxps, which returns its second operand when the first is NaN. Its gradient is dy · (y <= 0 ?
//   0 : 1): a NaN gradient stays NaN, a negative one becomes -0, and a NaN y passes dy.
// - tanh' = (1 - y²) · dy with 1 - y² as one fused multiply-add, as oneDNN's x86 kernels on FMA
//   hardware: rounding y² first would lose most digits of 1 - y² near saturation.
// - sigmoid' = (y · (1 - y)) · dy, in that order.
// - tanh and sigmoid give NaN for NaN, forward and backward.
//
// Backward is therefore the CPU's bits. Forward tanh and sigmoid agree with the CPU to a few ulps
// only: oneDNN evaluates its own approximations of tanh and exp, the host and the GPU their math
// libraries' tanhf and expf.
#pragma once

#include <cmath>

#include "models/kernel_math/host_device.h"
#include "models/layer_spec.h"

namespace scalescope::kernel_math {

SS_HOST_DEVICE inline float activation_forward(Activation kind, float x) {
  if (kind == Activation::kRelu) return x > 0.0f ? x : 0.0f;
  if (kind == Activation::kTanh) return tanhf(x);
  return 1.0f / (1.0f + expf(-x));  // kSigmoid
}

SS_HOST_DEVICE inline float activation_backward(Activation kind, float y, float dy) {
  if (kind == Activation::kRelu) return y <= 0.0f ? dy * 0.0f : dy;
  if (kind == Activation::kTanh) return fmaf(-y, y, 1.0f) * dy;
  return (y * (1.0f - y)) * dy;  // kSigmoid
}

}  // namespace scalescope::kernel_math
