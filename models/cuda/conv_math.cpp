#include "models/cuda/conv_math.h"

namespace scalescope {

cudnnMathType_t conv_requested_math(bool tf32) {
  return tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
}

std::optional<cudnnMathType_t> conv_math_for(cudnnMathType_t proposed, bool tf32) {
  switch (proposed) {
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION:
      return std::nullopt;
    case CUDNN_TENSOR_OP_MATH:
      if (!tf32) return std::nullopt;
      return proposed;
    case CUDNN_DEFAULT_MATH:
    case CUDNN_FMA_MATH:
      return tf32 ? proposed : CUDNN_FMA_MATH;
  }
  return std::nullopt;  // a math type this code does not know: not trusted
}

}  // namespace scalescope
