#include "pipelines/synthetic.h"

#include <cmath>

#include "core/check.h"

namespace scalescope {

SyntheticSource::SyntheticSource(Shape sample_shape, LabelSpec labels, uint64_t seed, float noise)
    : sample_shape_(std::move(sample_shape)), labels_(labels), noise_(noise), rng_(seed, 1) {
  SS_CHECK(sample_shape_.numel() > 0, "synthetic data needs a non-empty sample shape, not {}",
           sample_shape_.to_string());
  SS_CHECK(labels_.classes >= 2, "synthetic data needs at least 2 classes, not {}",
           labels_.classes);
  SS_CHECK(labels_.format != LabelFormat::kBinary || labels_.classes == 2,
           "binary labels have 2 classes, not {}", labels_.classes);
  SS_CHECK(noise >= 0.0f && std::isfinite(noise), "synthetic noise {} must be >= 0", noise);
  Rng template_rng(seed, 0);
  templates_.resize(static_cast<size_t>(labels_.classes));
  for (auto& t : templates_) {
    t.resize(static_cast<size_t>(sample_shape_.numel()));
    for (float& v : t) v = template_rng.normal();
  }
}

void SyntheticSource::next(int64_t size, HostBatch& batch) {
  SS_CHECK(size > 0, "batch size {} must be positive", size);
  const int64_t features = sample_shape_.numel();
  const int64_t width = labels_.width();
  batch.size = size;
  batch.sample_shape = sample_shape_;
  batch.inputs.resize(static_cast<size_t>(size * features));
  batch.labels.assign(static_cast<size_t>(size * width), 0.0f);
  // Uniform noise on [-a, a] has standard deviation a/sqrt(3); far cheaper than normals.
  const float amplitude = noise_ * std::sqrt(3.0f);
  for (int64_t i = 0; i < size; ++i) {
    const auto label = static_cast<int64_t>(rng_.below(static_cast<uint64_t>(labels_.classes)));
    const std::vector<float>& t = templates_[static_cast<size_t>(label)];
    float* x = batch.inputs.data() + i * features;
    for (int64_t j = 0; j < features; ++j) {
      x[j] = t[static_cast<size_t>(j)] + rng_.uniform(-amplitude, amplitude);
    }
    float* y = batch.labels.data() + i * width;
    if (labels_.format == LabelFormat::kOneHot) {
      y[label] = 1.0f;
    } else {
      y[0] = static_cast<float>(label);
    }
  }
}

}  // namespace scalescope
