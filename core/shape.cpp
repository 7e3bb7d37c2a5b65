#include "core/shape.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/check.h"

namespace scalescope {

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int64_t d : dims_) n *= d;
  return n;
}

Shape Shape::with_batch(int64_t batch) const {
  std::vector<int64_t> dims;
  dims.reserve(dims_.size() + 1);
  dims.push_back(batch);
  dims.insert(dims.end(), dims_.begin(), dims_.end());
  return Shape(std::move(dims));
}

Shape Shape::without_batch() const {
  SS_CHECK(!dims_.empty(), "shape {} has no batch dimension", to_string());
  return Shape(std::vector<int64_t>(dims_.begin() + 1, dims_.end()));
}

std::string Shape::to_string() const {
  return fmt::format("[{}]", fmt::join(dims_, ", "));
}

}  // namespace scalescope
