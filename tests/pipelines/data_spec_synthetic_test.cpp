// Data specs (what --data accepts) and the synthetic datasets: a sample is a function of its
// index and the seed, whatever reads it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "pipelines/dataset.h"
#include "tests/test_util.h"

namespace scalescope {
namespace {

using testing_util::error_of;

// ---- data specs ----

TEST(DataSpec, ParsesTheAcceptedForms) {
  DataSpec s = parse_data_spec("synthetic");
  EXPECT_EQ(s.kind, DataSpec::Kind::kSynthetic);
  EXPECT_EQ(s.text, "synthetic");
  s = parse_data_spec("synthetic:device");
  EXPECT_EQ(s.kind, DataSpec::Kind::kSyntheticDevice);
  s = parse_data_spec("idx:/usr/share/datasets/fashion-mnist");
  EXPECT_EQ(s.kind, DataSpec::Kind::kIdx);
  EXPECT_EQ(s.path, "/usr/share/datasets/fashion-mnist");
  s = parse_data_spec("cifar10:data/cifar-10-batches-bin");
  EXPECT_EQ(s.kind, DataSpec::Kind::kCifar10);
  EXPECT_EQ(s.path, "data/cifar-10-batches-bin");
  EXPECT_EQ(s.text, "cifar10:data/cifar-10-batches-bin");
  s = parse_data_spec("idx:a:b");  // only the first colon separates
  EXPECT_EQ(s.path, "a:b");
}

TEST(DataSpec, RejectsOtherFormsListingTheAcceptedOnes) {
  for (const std::string text : {"", "mnist", "idx", "idx:", "cifar10:", "synthetic:foo",
                                 "synthetic:", "Synthetic", "cifar:/data", ":/data"}) {
    const std::string e = error_of([&] { parse_data_spec(text); });
    EXPECT_CONTAINS(e, "'" + text + "'");
    EXPECT_CONTAINS(e, "accepted: synthetic, synthetic:device, idx:DIR");
    EXPECT_CONTAINS(e, "cifar10:DIR");
  }
}

TEST(DataSpec, AnUnknownKindIsNamedWithTheOneMeant) {
  const auto error = [](const char* text) { return error_of([&] { parse_data_spec(text); }); };
  EXPECT_CONTAINS(error("fashion-mnist"),
                  "unknown kind 'fashion-mnist' (MNIST and Fashion-MNIST are IDX files, read as "
                  "idx:DIR: Debian's dataset-fashion-mnist is idx:/usr/share/datasets/");
  EXPECT_CONTAINS(error("MNIST:/data"), "are IDX files, read as idx:DIR");
  EXPECT_CONTAINS(error("CIFAR-10:/data"), "unknown kind 'CIFAR-10' (did you mean cifar10:DIR?)");
  EXPECT_CONTAINS(error("Synthetic"), "unknown kind 'Synthetic' (did you mean synthetic?)");
  EXPECT_CONTAINS(error("imagenet:/data"), "unknown kind 'imagenet'; accepted:");
}

TEST(DataSpec, OpenDatasetRefusesSyntheticKinds) {
  for (const char* text : {"synthetic", "synthetic:device"}) {
    const std::string e = error_of([&] { open_dataset(parse_data_spec(text), Split::kTrain); });
    EXPECT_CONTAINS(e, text);
    EXPECT_CONTAINS(e, "make_synthetic_dataset");
  }
}

TEST(DataSpec, SplitNames) {
  EXPECT_STREQ(to_string(Split::kTrain), "train");
  EXPECT_STREQ(to_string(Split::kEval), "eval");
}

// ---- synthetic datasets ----

std::vector<float> sample(const Dataset& ds, int64_t index, std::vector<float>* label = nullptr) {
  std::vector<float> x(static_cast<size_t>(ds.sample_shape().numel()));
  std::vector<float> y(static_cast<size_t>(ds.labels().width()));
  ds.read(index, x.data(), y.data());
  if (label != nullptr) *label = y;
  return x;
}

TEST(SyntheticDataset, SameIndexSameSampleWhateverReadsIt) {
  const LabelSpec labels{LabelFormat::kClassIndex, 5};
  const auto a = make_synthetic_dataset(Shape{4, 4, 3}, labels, 100, 7);
  const auto b = make_synthetic_dataset(Shape{4, 4, 3}, labels, 100, 7);
  EXPECT_EQ(a->size(), 100);
  EXPECT_EQ(a->sample_shape(), (Shape{4, 4, 3}));
  std::vector<float> la, lb;
  const std::vector<float> first = sample(*a, 42, &la);
  for (int64_t i = 99; i >= 0; --i) sample(*a, i);  // reads in between change nothing
  EXPECT_EQ(sample(*a, 42), first);
  EXPECT_EQ(sample(*b, 42, &lb), first);
  EXPECT_EQ(la, lb);
  EXPECT_NE(sample(*a, 43), first);

  // Concurrent readers get what a sequential one gets.
  std::vector<std::vector<float>> seen(100);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int64_t i = t; i < 100; i += 4) seen[static_cast<size_t>(i)] = sample(*a, i);
    });
  }
  for (auto& t : threads) t.join();
  for (int64_t i = 0; i < 100; ++i) EXPECT_EQ(seen[static_cast<size_t>(i)], sample(*b, i));
}

TEST(SyntheticDataset, DifferentSeedsDiffer) {
  const LabelSpec labels{LabelFormat::kClassIndex, 5};
  const auto a = make_synthetic_dataset(Shape{16}, labels, 10, 1);
  const auto b = make_synthetic_dataset(Shape{16}, labels, 10, 2);
  for (int64_t i = 0; i < 10; ++i) EXPECT_NE(sample(*a, i), sample(*b, i)) << i;
}

TEST(SyntheticDataset, LabelsInRangeInEveryFormat) {
  const auto idx =
      make_synthetic_dataset(Shape{3}, LabelSpec{LabelFormat::kClassIndex, 7, 1}, 500, 1);
  std::map<float, int> counts;
  std::vector<float> y;
  for (int64_t i = 0; i < 500; ++i) {
    sample(*idx, i, &y);
    ASSERT_EQ(y.size(), 1u);
    EXPECT_GE(y[0], 0.0f);
    EXPECT_LT(y[0], 7.0f);
    EXPECT_EQ(y[0], std::floor(y[0]));
    ++counts[y[0]];
  }
  EXPECT_EQ(counts.size(), 7u);  // every class occurs

  const auto onehot =
      make_synthetic_dataset(Shape{3}, LabelSpec{LabelFormat::kOneHot, 4, 1}, 50, 1);
  for (int64_t i = 0; i < 50; ++i) {
    sample(*onehot, i, &y);
    ASSERT_EQ(y.size(), 4u);
    float sum = 0.0f;
    for (float v : y) {
      EXPECT_TRUE(v == 0.0f || v == 1.0f);
      sum += v;
    }
    EXPECT_EQ(sum, 1.0f);
  }

  const auto binary =
      make_synthetic_dataset(Shape{3}, LabelSpec{LabelFormat::kBinary, 2, 1}, 200, 1);
  counts.clear();
  for (int64_t i = 0; i < 200; ++i) {
    sample(*binary, i, &y);
    ++counts[y[0]];
  }
  EXPECT_EQ(counts.size(), 2u);
  EXPECT_GT(counts[0.0f], 50);
  EXPECT_GT(counts[1.0f], 50);
}

TEST(SyntheticDataset, SamplesOfAClassAreCloserThanSamplesOfDifferentClasses) {
  const auto ds =
      make_synthetic_dataset(Shape{256}, LabelSpec{LabelFormat::kClassIndex, 4, 1}, 64, 3, 0.5f);
  std::vector<std::vector<float>> xs, ys(64);
  for (int64_t i = 0; i < 64; ++i) xs.push_back(sample(*ds, i, &ys[static_cast<size_t>(i)]));
  double same = 0.0, other = 0.0;
  int n_same = 0, n_other = 0;
  for (size_t i = 0; i < 64; ++i) {
    for (size_t j = i + 1; j < 64; ++j) {
      double d = 0.0;
      for (size_t k = 0; k < 256; ++k) d += (xs[i][k] - xs[j][k]) * (xs[i][k] - xs[j][k]);
      if (ys[i] == ys[j]) {
        same += d;
        ++n_same;
      } else {
        other += d;
        ++n_other;
      }
    }
  }
  ASSERT_GT(n_same, 0);
  ASSERT_GT(n_other, 0);
  EXPECT_LT(same / n_same, 0.5 * other / n_other);
  // Noise of stddev 0.5 around each template: the squared distance within a class is
  // 2 × 256 × 0.25 on average.
  EXPECT_NEAR(same / n_same, 128.0, 20.0);
}

TEST(SyntheticDataset, ChannelStatsOfAnImageShape) {
  const auto ds =
      make_synthetic_dataset(Shape{2, 2, 3}, LabelSpec{LabelFormat::kClassIndex, 3, 1}, 40, 5);
  std::array<double, 3> sum{}, sq{};
  for (int64_t i = 0; i < 40; ++i) {
    const std::vector<float> x = sample(*ds, i);
    for (size_t j = 0; j < x.size(); ++j) sum[j % 3] += x[j];
  }
  const double n = 40 * 4;
  for (int64_t i = 0; i < 40; ++i) {
    const std::vector<float> x = sample(*ds, i);
    for (size_t j = 0; j < x.size(); ++j) {
      const double d = x[j] - sum[j % 3] / n;
      sq[j % 3] += d * d;
    }
  }
  std::vector<float> mean, stddev;
  ds->channel_stats(mean, stddev);
  ASSERT_EQ(mean.size(), 3u);
  for (size_t c = 0; c < 3; ++c) {
    EXPECT_NEAR(mean[c], sum[c] / n, 1e-5) << c;
    EXPECT_NEAR(stddev[c], std::sqrt(sq[c] / n), 1e-5) << c;
  }
}

TEST(SyntheticDataset, RejectsBadArguments) {
  const LabelSpec ten{};
  EXPECT_CONTAINS(error_of([&] { make_synthetic_dataset(Shape{4}, ten, 0, 1); }), "samples");
  EXPECT_CONTAINS(error_of([&] { make_synthetic_dataset(Shape{4}, ten, -5, 1); }), "-5");
  EXPECT_CONTAINS(error_of([&] { make_synthetic_dataset(Shape{0}, ten, 10, 1); }), "[0]");
  EXPECT_CONTAINS(error_of([&] { make_synthetic_dataset(Shape{}, ten, 10, 1); }), "shape");
  EXPECT_CONTAINS(
      error_of([&] {
        make_synthetic_dataset(Shape{4}, LabelSpec{LabelFormat::kClassIndex, 1, 1}, 10, 1);
      }),
      "at least 2 classes");
  EXPECT_CONTAINS(error_of([&] {
                    make_synthetic_dataset(Shape{4}, LabelSpec{LabelFormat::kBinary, 3, 1}, 10, 1);
                  }),
                  "binary");
  EXPECT_CONTAINS(error_of([&] { make_synthetic_dataset(Shape{4}, ten, 10, 1, -1.0f); }), "noise");
  EXPECT_CONTAINS(error_of([&] { make_synthetic_dataset(Shape{4}, ten, 10, 1, NAN); }), "noise");
  EXPECT_CONTAINS(error_of([&] {
                    make_synthetic_dataset(Shape{1 << 20, 1 << 20}, ten, 10, 1);
                  }),
                  "template");
  const auto ds = make_synthetic_dataset(Shape{4}, ten, 10, 1);
  float x[4], y;
  EXPECT_THROW(ds->read(10, x, &y), Error);
}

}  // namespace
}  // namespace scalescope
