#include "pipelines/dataset.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/check.h"
#include "core/enum_names.h"

namespace scalescope {
namespace {

// Channels as normalisation sees them: the last dimension of a channels-last image
// ([H, W, C]); any other shape (a feature vector) is one channel.
int64_t channel_count(const Shape& shape) {
  return shape.rank() == 3 ? shape[2] : 1;
}

}  // namespace

const char* to_string(Split split) {
  static constexpr auto kNames = enum_names<Split>("train", "eval");
  return kNames(split).data();
}

void Dataset::channel_stats(std::vector<float>& mean, std::vector<float>& stddev) const {
  std::call_once(stats_once_, [this] { compute_channel_stats(); });
  mean = mean_;
  stddev = stddev_;
}

void Dataset::compute_channel_stats() const {
  std::vector<float>& mean = mean_;
  std::vector<float>& stddev = stddev_;
  const Shape shape = sample_shape();
  const int64_t n = size();
  const int64_t features = shape.numel();
  const int64_t channels = channel_count(shape);
  SS_CHECK(n > 0 && features > 0 && channels > 0 && features % channels == 0,
           "channel statistics of {}: no samples or a bad sample shape {}", describe(),
           shape.to_string());
  const auto c_count = static_cast<size_t>(channels);
  const double per_sample = static_cast<double>(features / channels);

  // Chan et al.'s pairwise combination of (count, mean, sum of squared deviations): each
  // sample's moments are exact in double, and merging them never subtracts two large sums,
  // so the result stays accurate over tens of millions of values whatever their offset.
  std::vector<double> run_mean(c_count, 0.0), run_m2(c_count, 0.0);
  std::vector<double> s_sum(c_count), s_m2(c_count);
  double count = 0.0;
  std::vector<float> input(static_cast<size_t>(features));
  std::vector<float> label(static_cast<size_t>(labels().width()));
  for (int64_t i = 0; i < n; ++i) {
    read(i, input.data(), label.data());
    std::fill(s_sum.begin(), s_sum.end(), 0.0);
    std::fill(s_m2.begin(), s_m2.end(), 0.0);
    for (size_t j = 0; j < input.size(); j += c_count) {
      for (size_t c = 0; c < c_count; ++c) s_sum[c] += input[j + c];
    }
    for (size_t c = 0; c < c_count; ++c) s_sum[c] /= per_sample;  // now the sample's mean
    for (size_t j = 0; j < input.size(); j += c_count) {
      for (size_t c = 0; c < c_count; ++c) {
        const double d = input[j + c] - s_sum[c];
        s_m2[c] += d * d;
      }
    }
    const double total = count + per_sample;
    for (size_t c = 0; c < c_count; ++c) {
      const double delta = s_sum[c] - run_mean[c];
      run_mean[c] += delta * per_sample / total;
      run_m2[c] += s_m2[c] + delta * delta * count * per_sample / total;
    }
    count = total;
  }
  mean.resize(c_count);
  stddev.resize(c_count);
  for (size_t c = 0; c < c_count; ++c) {
    mean[c] = static_cast<float>(run_mean[c]);
    // Population standard deviation: the split is the whole population we normalise.
    stddev[c] = static_cast<float>(std::sqrt(run_m2[c] / count));
  }
}

}  // namespace scalescope
