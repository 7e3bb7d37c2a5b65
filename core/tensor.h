// Tensors: a shape and f32 data on one device.
//
// Tensor owns its memory. TensorView is the non-owning (pointer, shape) pair that kernels
// take: parameters and gradients are views into one flat buffer per model.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/buffer.h"
#include "core/shape.h"

namespace scalescope {

struct TensorView {
  float* data = nullptr;
  Shape shape;

  int64_t numel() const { return shape.numel(); }
  size_t bytes() const { return static_cast<size_t>(numel()) * sizeof(float); }
  bool empty() const { return data == nullptr; }
};

class Tensor {
 public:
  Tensor() = default;
  // Uninitialised memory on `device`.
  Tensor(Device& device, Shape shape);

  Tensor(Tensor&&) noexcept = default;
  Tensor& operator=(Tensor&&) noexcept = default;

  const Shape& shape() const { return shape_; }
  int64_t numel() const { return shape_.numel(); }
  size_t bytes() const { return buffer_.bytes(); }
  float* data() const { return static_cast<float*>(buffer_.data()); }
  Device* device() const { return buffer_.device(); }
  TensorView view() const { return TensorView{data(), shape_}; }

  // Synchronous host transfers on the device's default stream (tests, checkpoints, setup;
  // never inside a step).
  void copy_from_host(std::span<const float> host);
  std::vector<float> to_host() const;

 private:
  Shape shape_;
  DeviceBuffer buffer_;
};

}  // namespace scalescope
