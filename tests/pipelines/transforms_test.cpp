#include "pipelines/transforms.h"

#include <gtest/gtest.h>
#include <time.h>

#include <chrono>
#include <limits>
#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "tests/test_util.h"

namespace scalescope {
namespace {

using testing_util::error_of;

// An image [H, W, C] whose values are all distinct and nonzero, so that a shifted copy is
// recognisable and zeros can only come from the padding.
std::vector<float> make_image(const Shape& shape) {
  std::vector<float> image(static_cast<size_t>(shape.numel()));
  for (size_t i = 0; i < image.size(); ++i) image[i] = 1.0f + static_cast<float>(i);
  return image;
}

float at(const std::vector<float>& image, const Shape& shape, int64_t h, int64_t w, int64_t c) {
  return image[static_cast<size_t>((h * shape[1] + w) * shape[2] + c)];
}

// The definition, written independently of the implementation: crop the zero-padded image at
// offset (oy, ox) in [0, 2p], then mirror the columns when `flip`.
std::vector<float> crop_then_flip(const std::vector<float>& in, const Shape& shape, int64_t p,
                                  int64_t oy, int64_t ox, bool flip) {
  const int64_t height = shape[0];
  const int64_t width = shape[1];
  const int64_t channels = shape[2];
  const auto padded = [&](int64_t y, int64_t x, int64_t c) {
    y -= p;
    x -= p;
    return y >= 0 && y < height && x >= 0 && x < width ? at(in, shape, y, x, c) : 0.0f;
  };
  std::vector<float> out(in.size());
  for (int64_t h = 0; h < height; ++h) {
    for (int64_t w = 0; w < width; ++w) {
      const int64_t cw = flip ? width - 1 - w : w;
      for (int64_t c = 0; c < channels; ++c) {
        out[static_cast<size_t>((h * width + w) * channels + c)] = padded(h + oy, cw + ox, c);
      }
    }
  }
  return out;
}

std::vector<float> transformed(const TransformConfig& config, const Shape& shape,
                               std::vector<float> sample, uint64_t seed, int64_t epoch,
                               int64_t index) {
  std::vector<float> scratch(sample.size());
  apply_transforms(config, shape, seed, epoch, index, sample.data(), scratch.data());
  return sample;
}

// Every (oy, ox, flip) for which the reference gives `out`.
std::vector<std::tuple<int64_t, int64_t, bool>> matches(const std::vector<float>& in,
                                                        const std::vector<float>& out,
                                                        const Shape& shape, int64_t p,
                                                        bool try_flip) {
  std::vector<std::tuple<int64_t, int64_t, bool>> found;
  for (int64_t oy = 0; oy <= 2 * p; ++oy) {
    for (int64_t ox = 0; ox <= 2 * p; ++ox) {
      for (bool flip : {false, true}) {
        if (flip && !try_flip) continue;
        if (crop_then_flip(in, shape, p, oy, ox, flip) == out) found.emplace_back(oy, ox, flip);
      }
    }
  }
  return found;
}

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

TEST(Transforms, NothingConfiguredChangesNothing) {
  const TransformConfig config;
  EXPECT_FALSE(config.any());
  const Shape shape{3, 4, 2};
  const std::vector<float> image = make_image(shape);
  EXPECT_EQ(transformed(config, shape, image, 1, 0, 0), image);
}

TEST(Transforms, NormalisationIsExact) {
  const Shape shape{2, 3, 3};
  TransformConfig config;
  config.mean = {0.5f, -1.0f, 2.0f};
  config.stddev = {0.25f, 3.0f, 0.7f};
  EXPECT_TRUE(config.any());
  ASSERT_NO_THROW(validate(config, shape));
  std::vector<float> image(18);
  for (size_t i = 0; i < image.size(); ++i) image[i] = 0.1f * static_cast<float>(i) - 0.4f;
  const std::vector<float> out = transformed(config, shape, image, 1, 0, 0);
  for (size_t i = 0; i < image.size(); ++i) {
    const size_t c = i % 3;
    EXPECT_EQ(out[i], (image[i] - config.mean[c]) / config.stddev[c]) << "value " << i;
  }

  // A flat sample: one statistic per feature (its last and only dimension).
  const Shape flat{4};
  TransformConfig per_feature;
  per_feature.mean = {1.0f, 2.0f, 3.0f, 4.0f};
  per_feature.stddev = {1.0f, 2.0f, 4.0f, 8.0f};
  ASSERT_NO_THROW(validate(per_feature, flat));
  EXPECT_EQ(transformed(per_feature, flat, {1.0f, 1.0f, 1.0f, 1.0f}, 1, 0, 0),
            (std::vector<float>{0.0f, -0.5f, -0.5f, -0.375f}));
  // Or one channel: the same statistic for every value (what Dataset::channel_stats gives
  // for a sample that is not an image [H, W, C]).
  TransformConfig one_channel;
  one_channel.mean = {1.0f};
  one_channel.stddev = {4.0f};
  ASSERT_NO_THROW(validate(one_channel, flat));
  ASSERT_NO_THROW(validate(one_channel, Shape{2, 2}));
  EXPECT_EQ(transformed(one_channel, Shape{2, 2}, {1.0f, 3.0f, -1.0f, 9.0f}, 1, 0, 0),
            (std::vector<float>{0.0f, 0.5f, -0.5f, 2.0f}));
}

TEST(Transforms, FlipMirrorsAboutHalfTheSamples) {
  const Shape shape{3, 5, 2};
  TransformConfig config;
  config.flip = true;
  ASSERT_NO_THROW(validate(config, shape));
  const std::vector<float> image = make_image(shape);
  std::vector<float> mirrored(image.size());
  for (int64_t h = 0; h < 3; ++h) {
    for (int64_t w = 0; w < 5; ++w) {
      for (int64_t c = 0; c < 2; ++c) {
        mirrored[static_cast<size_t>((h * 5 + w) * 2 + c)] = at(image, shape, h, 4 - w, c);
      }
    }
  }
  int flipped = 0;
  const int samples = 1000;
  for (int64_t index = 0; index < samples; ++index) {
    const std::vector<float> out = transformed(config, shape, image, 7, 0, index);
    if (out == mirrored) {
      ++flipped;
    } else {
      EXPECT_EQ(out, image) << "index " << index << " is neither the image nor its mirror";
    }
  }
  EXPECT_GT(flipped, samples * 2 / 5);
  EXPECT_LT(flipped, samples * 3 / 5);
}

TEST(Transforms, CropIsAShiftedCopyWithZerosFromTheBorder) {
  const Shape shape{6, 5, 3};
  const int64_t p = 2;
  TransformConfig config;
  config.crop_padding = static_cast<int>(p);
  ASSERT_NO_THROW(validate(config, shape));
  const std::vector<float> image = make_image(shape);
  std::map<std::pair<int64_t, int64_t>, int64_t> index_of_offset;
  for (int64_t index = 0; index < 500; ++index) {
    const std::vector<float> out = transformed(config, shape, image, 3, 1, index);
    ASSERT_EQ(out.size(), image.size());
    const auto found = matches(image, out, shape, p, /*try_flip=*/false);
    ASSERT_EQ(found.size(), 1u) << "index " << index << " is not a crop of the padded image";
    index_of_offset.emplace(std::pair{std::get<0>(found[0]), std::get<1>(found[0])}, index);
  }
  // Every offset in [0, 2p]^2 is drawn.
  EXPECT_EQ(index_of_offset.size(), static_cast<size_t>((2 * p + 1) * (2 * p + 1)));

  // Known cases, spelled out. Offset (0, 0): the window starts in the padding's corner, so the
  // image moves down and right by p and zeros fill the top rows and left columns.
  ASSERT_TRUE(index_of_offset.count({0, 0}));
  const std::vector<float> corner =
      transformed(config, shape, image, 3, 1, index_of_offset[{0, 0}]);
  for (int64_t h = 0; h < 6; ++h) {
    for (int64_t w = 0; w < 5; ++w) {
      for (int64_t c = 0; c < 3; ++c) {
        const float expected = h >= p && w >= p ? at(image, shape, h - p, w - p, c) : 0.0f;
        EXPECT_EQ(at(corner, shape, h, w, c), expected) << h << "," << w << "," << c;
      }
    }
  }
  // Offset (p, p) is the image itself.
  ASSERT_TRUE(index_of_offset.count({p, p}));
  EXPECT_EQ(transformed(config, shape, image, 3, 1, index_of_offset[{p, p}]), image);
  // Offset (2p, 1): the content moves up by p rows and right by p - 1 = 1 column.
  ASSERT_TRUE(index_of_offset.count({2 * p, 1}));
  const std::vector<float> other =
      transformed(config, shape, image, 3, 1, index_of_offset[{2 * p, 1}]);
  for (int64_t h = 0; h < 6; ++h) {
    for (int64_t w = 0; w < 5; ++w) {
      const int64_t sh = h + p;
      const int64_t sw = w - 1;
      const bool inside = sh < 6 && sw >= 0;
      EXPECT_EQ(at(other, shape, h, w, 1), inside ? at(image, shape, sh, sw, 1) : 0.0f);
    }
  }
}

TEST(Transforms, CropThenFlip) {
  const Shape shape{4, 7, 2};
  const int64_t p = 1;
  TransformConfig config;
  config.crop_padding = static_cast<int>(p);
  config.flip = true;
  ASSERT_NO_THROW(validate(config, shape));
  const std::vector<float> image = make_image(shape);
  std::set<std::tuple<int64_t, int64_t, bool>> seen;
  for (int64_t index = 0; index < 400; ++index) {
    const std::vector<float> out = transformed(config, shape, image, 5, 2, index);
    const auto found = matches(image, out, shape, p, /*try_flip=*/true);
    ASSERT_EQ(found.size(), 1u) << "index " << index;
    seen.insert(found[0]);
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(2 * (2 * p + 1) * (2 * p + 1)));
}

TEST(Transforms, AllStagesInOrder) {
  // Crop, then flip, then normalisation: the normalised result of the reference crop/flip.
  const Shape shape{3, 3, 2};
  TransformConfig config;
  config.crop_padding = 1;
  config.flip = true;
  config.mean = {1.0f, 2.0f};
  config.stddev = {2.0f, 0.5f};
  const std::vector<float> image = make_image(shape);
  TransformConfig geometric = config;
  geometric.mean.clear();
  geometric.stddev.clear();
  for (int64_t index = 0; index < 50; ++index) {
    std::vector<float> expected = transformed(geometric, shape, image, 9, 0, index);
    for (size_t i = 0; i < expected.size(); ++i) {
      expected[i] = (expected[i] - config.mean[i % 2]) / config.stddev[i % 2];
    }
    EXPECT_EQ(transformed(config, shape, image, 9, 0, index), expected) << "index " << index;
  }
}

TEST(Transforms, ChoicesDependOnSeedEpochAndIndexOnly) {
  const Shape shape{8, 8, 1};
  TransformConfig config;
  config.crop_padding = 3;
  config.flip = true;
  const std::vector<float> image = make_image(shape);
  // Same (seed, epoch, index): same result, whatever else ran in between.
  const std::vector<float> first = transformed(config, shape, image, 11, 4, 17);
  (void)transformed(config, shape, image, 11, 4, 18);
  EXPECT_EQ(transformed(config, shape, image, 11, 4, 17), first);

  std::set<std::vector<float>> over_epochs;
  std::set<std::vector<float>> over_seeds;
  std::set<std::vector<float>> over_indices;
  for (int64_t k = 0; k < 20; ++k) {
    over_epochs.insert(transformed(config, shape, image, 11, k, 17));
    over_seeds.insert(transformed(config, shape, image, static_cast<uint64_t>(100 + k), 4, 17));
    over_indices.insert(transformed(config, shape, image, 11, 4, k));
  }
  // 98 equally likely outcomes: 20 draws give well over a handful of distinct ones.
  EXPECT_GE(over_epochs.size(), 8u);
  EXPECT_GE(over_seeds.size(), 8u);
  EXPECT_GE(over_indices.size(), 8u);
}

TEST(Transforms, DecodeCostTakesAtLeastTheAskedTimeOnTheCpu) {
  const Shape shape{4};
  TransformConfig config;
  config.decode_cost_us = 20'000;
  EXPECT_TRUE(config.any());
  ASSERT_NO_THROW(validate(config, shape));
  std::vector<float> sample{1.0f, 2.0f, 3.0f, 4.0f};
  std::vector<float> scratch(4);
  const double cpu_start = thread_cpu_seconds();
  const auto start = std::chrono::steady_clock::now();
  apply_transforms(config, shape, 1, 0, 0, sample.data(), scratch.data());
  const auto elapsed = std::chrono::steady_clock::now() - start;
  const double cpu = thread_cpu_seconds() - cpu_start;
  EXPECT_GE(elapsed, std::chrono::microseconds(20'000));
  // A spin, not a sleep: the thread itself burns CPU (a sleep would burn ~0). Only a
  // fraction is required, as a busy machine may preempt the spinning thread.
  EXPECT_GT(cpu, 0.002);
  EXPECT_EQ(sample, (std::vector<float>{1.0f, 2.0f, 3.0f, 4.0f}));
}

TEST(Transforms, ValidationNamesTheBadValue) {
  const Shape image{8, 8, 3};
  const auto check = [&](const TransformConfig& config, const Shape& shape) {
    return error_of([&] { validate(config, shape); });
  };
  TransformConfig ok;
  ok.mean = {0.1f, 0.2f, 0.3f};
  ok.stddev = {1.0f, 1.0f, 1.0f};
  ok.crop_padding = 4;
  ok.flip = true;
  ok.decode_cost_us = 100;
  EXPECT_EQ(check(ok, image), "<no error thrown>");

  TransformConfig c = ok;
  c.mean = {0.1f, 0.2f};
  c.stddev = {1.0f, 1.0f};
  EXPECT_CONTAINS(check(c, image), "2 per-channel statistics");
  EXPECT_CONTAINS(check(c, image), "3 channels");
  c = ok;
  c.stddev = {1.0f, 1.0f};
  EXPECT_CONTAINS(check(c, image), "3 means but 2 standard deviations");
  c = ok;
  c.stddev = {1.0f, 0.0f, 1.0f};
  EXPECT_CONTAINS(check(c, image), "stddev[1] = 0");
  c = ok;
  c.stddev = {1.0f, 1.0f, -2.0f};
  EXPECT_CONTAINS(check(c, image), "stddev[2] = -2");
  c = ok;
  c.stddev = {std::numeric_limits<float>::infinity(), 1.0f, 1.0f};
  EXPECT_CONTAINS(check(c, image), "stddev[0] = inf");
  c = ok;
  c.mean = {0.0f, std::numeric_limits<float>::quiet_NaN(), 0.0f};
  EXPECT_CONTAINS(check(c, image), "mean[1] = nan");
  c = ok;
  c.crop_padding = -1;
  EXPECT_CONTAINS(check(c, image), "crop padding -1");
  c = ok;
  c.crop_padding = 8;
  EXPECT_CONTAINS(check(c, image), "crop padding 8");
  c = ok;
  c.decode_cost_us = -5;
  EXPECT_CONTAINS(check(c, image), "decode cost -5 us");
  c = ok;
  c.decode_cost_us = 5'000'000;
  EXPECT_CONTAINS(check(c, image), "decode cost 5000000 us per sample is more than a second");

  // Crop and flip are for images only; normalisation works on flat samples too.
  TransformConfig crop;
  crop.crop_padding = 2;
  EXPECT_CONTAINS(check(crop, Shape{64}), "[64]");
  TransformConfig flip;
  flip.flip = true;
  EXPECT_CONTAINS(check(flip, Shape{8, 8}), "[8, 8]");
  TransformConfig flat;
  flat.mean = {0.0f, 0.0f};
  flat.stddev = {1.0f, 1.0f};
  EXPECT_EQ(check(flat, Shape{2}), "<no error thrown>");
  EXPECT_CONTAINS(check(flat, Shape{3}), "normalisation has 2 statistics");
  EXPECT_CONTAINS(check(flat, Shape{3}), "take 1 (one channel) or 3");
  // An image with one statistic for its 3 channels is a mistake, not a broadcast.
  TransformConfig single;
  single.mean = {0.5f};
  single.stddev = {0.5f};
  EXPECT_CONTAINS(check(single, image), "1 per-channel statistics");
}

}  // namespace
}  // namespace scalescope
