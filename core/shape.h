// Tensor shapes. Four-dimensional activations are NHWC (channels last) on every backend:
// oneDNN's and cuDNN's fast kernels take it directly, and Flatten restores PyTorch's C,H,W
// order so that dense weights are laid out as PyTorch's are.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace scalescope {

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) : dims_(dims) {}
  explicit Shape(std::vector<int64_t> dims) : dims_(std::move(dims)) {}

  int rank() const { return static_cast<int>(dims_.size()); }
  int64_t operator[](int i) const { return dims_.at(static_cast<size_t>(i)); }
  int64_t& operator[](int i) { return dims_.at(static_cast<size_t>(i)); }
  const std::vector<int64_t>& dims() const { return dims_; }
  // Product of the dimensions; 1 for rank 0.
  int64_t numel() const;
  // This shape with a leading batch dimension.
  Shape with_batch(int64_t batch) const;
  // The shape without its leading dimension. REQUIRES: rank() >= 1.
  Shape without_batch() const;
  std::string to_string() const;  // e.g. "[64, 32, 32, 3]"

  friend bool operator==(const Shape&, const Shape&) = default;

 private:
  std::vector<int64_t> dims_;
};

}  // namespace scalescope
