// A contiguous range of another dataset, seen as a dataset of its own (a held-out split of
// synthetic data, a quick run on the first N samples).
#pragma once

#include <fmt/format.h>

#include <memory>

#include "core/check.h"
#include "pipelines/dataset.h"

namespace scalescope {

class SubsetDataset final : public Dataset {
 public:
  // Samples [begin, begin + size) of `base` (shared: several views may split one dataset).
  SubsetDataset(std::shared_ptr<const Dataset> base, int64_t begin, int64_t size, std::string name)
      : base_(std::move(base)), begin_(begin), size_(size), name_(std::move(name)) {
    SS_CHECK(begin >= 0 && size > 0 && begin + size <= base_->size(),
             "subset [{}, {}) is not inside {}", begin, begin + size, base_->describe());
  }
  std::string describe() const override {
    return fmt::format("{} ({} samples of {})", name_, size_, base_->describe());
  }
  int64_t size() const override { return size_; }
  Shape sample_shape() const override { return base_->sample_shape(); }
  LabelSpec labels() const override { return base_->labels(); }
  void read(int64_t index, float* input, float* label) const override {
    base_->read(begin_ + index, input, label);
  }

 private:
  std::shared_ptr<const Dataset> base_;
  int64_t begin_;
  int64_t size_;
  std::string name_;
};

}  // namespace scalescope
