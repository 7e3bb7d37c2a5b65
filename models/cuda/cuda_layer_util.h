// Small helpers the CUDA layer kernels share (cuda_layers.cpp, cuda_conv.cpp, cuda_dense.cpp,
// cuda_attention.cpp).
#pragma once

#include <climits>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "core/buffer.h"
#include "core/check.h"
#include "core/cuda/cuda_device.h"
#include "models/cuda/cuda_ops.h"
#include "models/kernel_math/half_math.h"
#include "models/layer_spec.h"

namespace scalescope {

// cuDNN's descriptors and cuBLAS's sizes are ints.
inline int to_int(int64_t value, const char* what, const LayerSpec& spec) {
  SS_CHECK(value >= 0 && value <= INT_MAX,
           "{}: {} is {}, more than cuDNN and cuBLAS take (2^31 - 1)", describe(spec), what, value);
  return static_cast<int>(value);
}

inline float* floats(const DeviceBuffer& buffer) {
  return static_cast<float*>(buffer.data());
}

inline DeviceBuffer float_buffer(CudaDevice& device, int64_t count) {
  return DeviceBuffer(device, static_cast<size_t>(count) * sizeof(float));
}

// The offset of `region` in a kernel's part of the stream's shared workspace, whose regions
// 0, 1, ... lie in order, region i taking bytes(i), each from a 256-byte boundary (as cuBLAS's
// and cuDNN's fastest kernels want).
template <class Bytes>
size_t workspace_region_offset(int region, Bytes bytes) {
  size_t offset = 0;
  for (int i = 0; i < region; ++i) offset += (static_cast<size_t>(bytes(i)) + 255) / 256 * 256;
  return offset;
}

// What a GEMM or convolution reads for `count` fp32 `values`: the values themselves without a
// 16-bit format; with one, their copy rounded into `to` (compression's cast for one replica,
// whose division by 1 is exact: to nearest even, beyond fp16's range to infinity, as a cast to
// a 16-bit tensor does: what autocast's casts give and loss scaling looks for).
inline const void* sixteen_bit_operand(const float* values, int64_t count, void* to,
                                       std::optional<kernel_math::HalfFormat> half,
                                       cudaStream_t stream) {
  if (!half) return values;
  cuda_ops::compress_gradients(values, static_cast<uint16_t*>(to), count, 1, *half, stream);
  return to;
}

// How the bias gradient reads dy: with a 16-bit format, rounded to it, the values of the copy
// sixteen_bit_operand gives the weights' products.
inline kernel_math::BiasGradRead bias_grad_read(std::optional<kernel_math::HalfFormat> half) {
  return {half.has_value(), half.value_or(kernel_math::HalfFormat::kBf16)};
}

}  // namespace scalescope
