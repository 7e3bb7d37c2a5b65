#include "core/random.h"
#include "pipelines/dataset.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <mutex>

#include "core/check.h"
#include "core/random.h"
#include "pipelines/dataset.h"

namespace scalescope {

namespace {

// The templates are classes × features floats held in memory; refuse sizes that could only
// be a mistake rather than attempt the allocation (2^28 floats = 1 GiB).
constexpr int64_t kMaxTemplateValues = int64_t{1} << 28;

// Synthetic data with learnable labels: every class has a fixed random template (standard
// normal values), and a sample is its class's template plus uniform noise. A model can learn
// it, so the loss of a synthetic run falls, yet it costs no disk and any shape can be made.
// Random access: sample `index` is a function of (seed, index) alone, so any worker reading
// it in any order gets the same one.
class SyntheticDataset final : public Dataset {
 public:
  SyntheticDataset(Shape sample_shape, LabelSpec labels, int64_t size, uint64_t seed, float noise)
      : sample_shape_(std::move(sample_shape)),
        labels_(labels),
        size_(size),
        seed_(seed),
        noise_(noise) {
    Rng template_rng(seed, 0);
    templates_.resize(static_cast<size_t>(labels_.classes * sample_shape_.numel()));
    for (float& v : templates_) v = template_rng.normal();
  }

  std::string describe() const override {
    return fmt::format("synthetic ({} samples, {}, {} classes, seed {}, noise {})", size_,
                       fmt::join(sample_shape_.dims(), "x"), labels_.classes, seed_, noise_);
  }
  int64_t size() const override { return size_; }
  Shape sample_shape() const override { return sample_shape_; }
  LabelSpec labels() const override { return labels_; }

  void read(int64_t index, float* input, float* label) const override {
    SS_CHECK(index >= 0 && index < size_, "{}: sample index {} out of range [0, {})", describe(),
             index, size_);
    // Stream 0 made the templates; sample i draws from stream i + 1.
    Rng rng(seed_, static_cast<uint64_t>(index) + 1);
    const auto cls = static_cast<int64_t>(rng.below(static_cast<uint64_t>(labels_.classes)));
    const int64_t features = sample_shape_.numel();
    const float* t = templates_.data() + cls * features;
    // Uniform noise on [-a, a] has standard deviation a/sqrt(3); far cheaper than normals.
    const float amplitude = noise_ * std::sqrt(3.0f);
    for (int64_t j = 0; j < features; ++j) input[j] = t[j] + rng.uniform(-amplitude, amplitude);
    if (labels_.format == LabelFormat::kOneHot) {
      std::fill(label, label + labels_.classes, 0.0f);
      label[cls] = 1.0f;
    } else {
      label[0] = static_cast<float>(cls);
    }
  }

 private:
  Shape sample_shape_;
  LabelSpec labels_;
  int64_t size_;
  uint64_t seed_;
  float noise_;
  std::vector<float> templates_;  // classes × features, class-major
};

}  // namespace

std::unique_ptr<Dataset> make_synthetic_dataset(Shape sample_shape, LabelSpec labels, int64_t size,
                                                uint64_t seed, float noise) {
  // The product is built with a cap, not with numel(), which a huge shape would overflow.
  bool dims_positive = sample_shape.rank() >= 1;
  int64_t features = 1;
  for (const int64_t d : sample_shape.dims()) {
    dims_positive = dims_positive && d > 0;
    if (d > 0) features = d > kMaxTemplateValues ? kMaxTemplateValues + 1 : features * d;
    features = std::min(features, kMaxTemplateValues + 1);
  }
  SS_CHECK(dims_positive, "synthetic data needs a sample shape of positive dimensions, not {}",
           sample_shape.to_string());
  SS_CHECK(labels.classes >= 2, "synthetic data needs at least 2 classes, not {}", labels.classes);
  SS_CHECK(labels.format != LabelFormat::kBinary || labels.classes == 2,
           "binary labels have 2 classes, not {}", labels.classes);
  SS_CHECK(size > 0, "synthetic data needs a positive number of samples, not {}", size);
  SS_CHECK(noise >= 0.0f && std::isfinite(noise), "synthetic noise {} must be finite and >= 0",
           noise);
  SS_CHECK(features <= kMaxTemplateValues && labels.classes <= kMaxTemplateValues / features,
           "synthetic data of {} classes × {} values per sample needs more than {} template "
           "values",
           labels.classes, sample_shape.to_string(), kMaxTemplateValues);
  return std::make_unique<SyntheticDataset>(std::move(sample_shape), labels, size, seed, noise);
}

}  // namespace scalescope
