// The math rule of cuDNN convolutions (models/cuda/conv_math.h): fp32 data is never converted
// to fp16, strict fp32 never runs on tensor cores. Runs in every CUDA build, GPU or not.
#include <gtest/gtest.h>

#include "models/cuda/conv_math.h"

namespace scalescope {
namespace {

TEST(ConvMath, TheDescriptorsAskForDefaultMathWithTf32AndFmaWithout) {
  EXPECT_EQ(conv_requested_math(true), CUDNN_DEFAULT_MATH);
  EXPECT_EQ(conv_requested_math(false), CUDNN_FMA_MATH);
}

TEST(ConvMath, ConversionToFp16IsRefusedWithOrWithoutTf32) {
  EXPECT_FALSE(conv_math_for(CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION, true).has_value());
  EXPECT_FALSE(conv_math_for(CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION, false).has_value());
}

TEST(ConvMath, Tf32RunsWhatCudnnProposes) {
  EXPECT_EQ(conv_math_for(CUDNN_TENSOR_OP_MATH, true), CUDNN_TENSOR_OP_MATH);
  EXPECT_EQ(conv_math_for(CUDNN_DEFAULT_MATH, true), CUDNN_DEFAULT_MATH);
  EXPECT_EQ(conv_math_for(CUDNN_FMA_MATH, true), CUDNN_FMA_MATH);
}

TEST(ConvMath, StrictFp32RefusesTensorCoresAndRunsTheRestUnderFma) {
  EXPECT_FALSE(conv_math_for(CUDNN_TENSOR_OP_MATH, false).has_value());
  EXPECT_EQ(conv_math_for(CUDNN_DEFAULT_MATH, false), CUDNN_FMA_MATH);
  EXPECT_EQ(conv_math_for(CUDNN_FMA_MATH, false), CUDNN_FMA_MATH);
}

TEST(ConvMath, AnUnknownMathTypeIsRefused) {
  EXPECT_FALSE(conv_math_for(static_cast<cudnnMathType_t>(99), true).has_value());
}

}  // namespace
}  // namespace scalescope
