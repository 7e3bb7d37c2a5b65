// Which math a cuDNN convolution may run under: plain functions of cuDNN's enums, so that the
// rule is tested wherever cudnn.h is (it needs no GPU).
//
// fp32 data is never converted to fp16: CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION would let
// cuDNN do that, where gradients scaled by 1/batch become subnormal or zero, and the time
// would be of fp16 kernels reported as TF32. With TF32 allowed the descriptors ask for
// CUDNN_DEFAULT_MATH (fp32 on tensor cores as TF32, as PyTorch does), in strict fp32 for
// CUDNN_FMA_MATH.
#pragma once

#include <cudnn.h>

#include <optional>

namespace scalescope {

// The math the descriptors ask cuDNN's heuristics under.
cudnnMathType_t conv_requested_math(bool tf32);

// The math to run an algorithm under, given the math cuDNN proposes with it; nullopt when
// the algorithm is refused: one that converts to fp16 always, one that needs tensor cores in
// strict fp32.
std::optional<cudnnMathType_t> conv_math_for(cudnnMathType_t proposed, bool tf32);

}  // namespace scalescope
