#include "pipelines/transforms.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "core/check.h"
#include "core/clock.h"
#include "core/random.h"

namespace scalescope {
namespace {

// A decode cost above this is almost surely a unit mistake (milliseconds or nanoseconds
// given as microseconds): one second per sample would make any run meaningless.
constexpr int64_t kMaxDecodeCostUs = 1'000'000;

// Burns `us` microseconds of CPU on the calling thread. A spin on the steady clock, not a
// sleep: emulated decoding must occupy a core the way real decoding does, or more workers
// would look free.
void spin_for(int64_t us) {
  const auto until = SteadyClock::now() + std::chrono::microseconds(us);
  while (SteadyClock::now() < until) {
  }
}

// The generator of one sample's random choices. Seeding by (seed, epoch) and then by the
// index as a stream gives every (seed, epoch, index) its own independent sequence, whichever
// worker processes the sample.
Rng sample_rng(uint64_t seed, int64_t epoch, int64_t index) {
  Rng per_epoch(seed, static_cast<uint64_t>(epoch));
  return Rng(per_epoch.next(), static_cast<uint64_t>(index));
}

// out(h, w) = in(h + dy, w' + dx) with w' = W-1-w when flipping, else w; zero where that
// falls outside the input. `in` and `out` must not overlap.
void shift_and_flip(const float* in, float* out, int64_t height, int64_t width, int64_t channels,
                    int64_t dy, int64_t dx, bool flip) {
  const int64_t row = width * channels;
  // The output columns whose source column lies inside the image (derived from
  // 0 <= w' + dx < W for both directions of w').
  const int64_t w_begin = std::clamp<int64_t>(flip ? dx : -dx, 0, width);
  const int64_t w_end = std::clamp<int64_t>(flip ? width + dx : width - dx, 0, width);
  for (int64_t h = 0; h < height; ++h) {
    float* dst = out + h * row;
    const int64_t sh = h + dy;
    if (sh < 0 || sh >= height || w_begin >= w_end) {
      std::fill_n(dst, row, 0.0f);
      continue;
    }
    const float* src = in + sh * row;
    std::fill_n(dst, w_begin * channels, 0.0f);
    if (flip) {
      for (int64_t w = w_begin; w < w_end; ++w) {
        // A plain loop: a memcpy call per pixel of 1 to 4 channels costs more than the copy.
        const float* from = src + (width - 1 - w + dx) * channels;
        float* to = dst + w * channels;
        for (int64_t c = 0; c < channels; ++c) to[c] = from[c];
      }
    } else {
      std::memcpy(dst + w_begin * channels, src + (w_begin + dx) * channels,
                  static_cast<size_t>((w_end - w_begin) * channels) * sizeof(float));
    }
    std::fill_n(dst + w_end * channels, (width - w_end) * channels, 0.0f);
  }
}

void flip_in_place(float* image, int64_t height, int64_t width, int64_t channels) {
  for (int64_t h = 0; h < height; ++h) {
    float* row = image + h * width * channels;
    for (int64_t w = 0; w < width / 2; ++w) {
      std::swap_ranges(row + w * channels, row + (w + 1) * channels,
                       row + (width - 1 - w) * channels);
    }
  }
}

}  // namespace

void validate(const TransformConfig& config, const Shape& sample_shape) {
  const int rank = sample_shape.rank();
  if (!config.mean.empty() || !config.stddev.empty()) {
    SS_CHECK(config.mean.size() == config.stddev.size(),
             "normalisation has {} means but {} standard deviations", config.mean.size(),
             config.stddev.size());
    SS_CHECK(rank >= 1, "normalisation needs samples with a channel dimension, not shape {}",
             sample_shape.to_string());
    // An image's channels are its last dimension. Any other sample is one channel (as
    // Dataset::channel_stats sees it), or, per feature, one statistic per value of its last
    // dimension.
    const auto stats = static_cast<int64_t>(config.mean.size());
    const int64_t last = sample_shape[rank - 1];
    if (rank == 3) {
      SS_CHECK(stats == last,
               "normalisation has {} per-channel statistics, but images of shape {} have {} "
               "channels (the last dimension)",
               stats, sample_shape.to_string(), last);
    } else {
      SS_CHECK(stats == 1 || stats == last,
               "normalisation has {} statistics, but samples of shape {} take 1 (one channel) "
               "or {} (one per value of the last dimension)",
               stats, sample_shape.to_string(), last);
    }
    for (size_t c = 0; c < config.mean.size(); ++c) {
      SS_CHECK(std::isfinite(config.mean[c]), "normalisation mean[{}] = {} is not finite", c,
               config.mean[c]);
      SS_CHECK(std::isfinite(config.stddev[c]) && config.stddev[c] > 0.0f,
               "normalisation stddev[{}] = {} must be positive and finite", c, config.stddev[c]);
    }
  }
  SS_CHECK_INPUT(config.crop_padding >= 0, "crop padding {} must not be negative",
                 config.crop_padding);
  if (config.crop_padding > 0) {
    SS_CHECK_INPUT(rank == 3,
                   "a random crop (padding {}) needs images [H, W, C], not samples of shape {}",
                   config.crop_padding, sample_shape.to_string());
    // With padding >= H (or W) a crop can miss the image entirely and come out all zeros.
    SS_CHECK_INPUT(config.crop_padding < sample_shape[0] && config.crop_padding < sample_shape[1],
                   "crop padding {} must be smaller than the image's height and width (shape {})",
                   config.crop_padding, sample_shape.to_string());
  }
  SS_CHECK_INPUT(!config.flip || rank == 3,
                 "a random flip needs images [H, W, C], not samples of shape {}",
                 sample_shape.to_string());
  SS_CHECK_INPUT(config.decode_cost_us >= 0, "decode cost {} us must not be negative",
                 config.decode_cost_us);
  SS_CHECK_INPUT(config.decode_cost_us <= kMaxDecodeCostUs,
                 "decode cost {} us per sample is more than a second (at most {} us is accepted; "
                 "the value is in microseconds)",
                 config.decode_cost_us, kMaxDecodeCostUs);
}

void apply_transforms(const TransformConfig& config, const Shape& sample_shape, uint64_t seed,
                      int64_t epoch, int64_t index, float* sample, float* scratch) {
  if (config.decode_cost_us > 0) spin_for(config.decode_cost_us);

  if (config.crop_padding > 0 || config.flip) {
    const int64_t height = sample_shape[0];
    const int64_t width = sample_shape[1];
    const int64_t channels = sample_shape[2];
    // The draws happen in a fixed order (crop offsets, then the flip), so the choices
    // depend on (config, seed, epoch, index) only.
    Rng rng = sample_rng(seed, epoch, index);
    int64_t dy = 0;
    int64_t dx = 0;
    if (config.crop_padding > 0) {
      // Offsets of the crop window in the zero-padded image, uniform in [0, 2p]; relative to
      // the unpadded image they are shifts in [-p, p].
      const int64_t p = config.crop_padding;
      const auto span = static_cast<uint64_t>(2 * p + 1);
      dy = static_cast<int64_t>(rng.below(span)) - p;
      dx = static_cast<int64_t>(rng.below(span)) - p;
    }
    const bool flip = config.flip && rng.below(2) == 1;
    if (dy != 0 || dx != 0) {
      const size_t numel = static_cast<size_t>(sample_shape.numel());
      std::memcpy(scratch, sample, numel * sizeof(float));
      shift_and_flip(scratch, sample, height, width, channels, dy, dx, flip);
    } else if (flip) {
      flip_in_place(sample, height, width, channels);
    }
  }

  if (!config.mean.empty()) {
    const size_t channels = config.mean.size();
    const size_t pixels = static_cast<size_t>(sample_shape.numel()) / channels;
    const float* mean = config.mean.data();
    const float* stddev = config.stddev.data();
    for (size_t i = 0; i < pixels; ++i) {
      float* x = sample + i * channels;
      for (size_t c = 0; c < channels; ++c) x[c] = (x[c] - mean[c]) / stddev[c];
    }
  }
}

}  // namespace scalescope
