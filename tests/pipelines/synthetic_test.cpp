#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "core/error.h"
#include "pipelines/synthetic.h"

namespace scalescope {
namespace {

TEST(Synthetic, ShapesAndLabelFormats) {
  SyntheticSource idx(Shape{4, 4, 3}, LabelSpec{LabelFormat::kClassIndex, 10}, 1);
  HostBatch b;
  idx.next(16, b);
  EXPECT_EQ(b.size, 16);
  EXPECT_EQ(b.inputs.size(), 16u * 48u);
  ASSERT_EQ(b.labels.size(), 16u);
  for (float y : b.labels) {
    EXPECT_GE(y, 0.0f);
    EXPECT_LT(y, 10.0f);
    EXPECT_EQ(y, std::floor(y));
  }
  SyntheticSource onehot(Shape{5}, LabelSpec{LabelFormat::kOneHot, 3}, 1);
  onehot.next(8, b);
  ASSERT_EQ(b.labels.size(), 24u);
  for (int i = 0; i < 8; ++i) {
    float sum = 0.0f;
    for (int k = 0; k < 3; ++k) sum += b.labels[static_cast<size_t>(i * 3 + k)];
    EXPECT_EQ(sum, 1.0f);
  }
  SyntheticSource binary(Shape{5}, LabelSpec{LabelFormat::kBinary, 2}, 1);
  binary.next(64, b);
  std::map<float, int> counts;
  for (float y : b.labels) ++counts[y];
  EXPECT_EQ(counts.size(), 2u);
  EXPECT_GT(counts[0.0f], 10);
  EXPECT_GT(counts[1.0f], 10);
}

TEST(Synthetic, SamplesSitNearTheirClassTemplate) {
  // Learnable: two samples of one class are closer than samples of different classes.
  SyntheticSource s(Shape{256}, LabelSpec{LabelFormat::kClassIndex, 4}, 3, 0.5f);
  HostBatch b;
  s.next(64, b);
  double same = 0.0, other = 0.0;
  int n_same = 0, n_other = 0;
  for (int i = 0; i < 64; ++i) {
    for (int j = i + 1; j < 64; ++j) {
      double d = 0.0;
      for (int k = 0; k < 256; ++k) {
        const double diff =
            b.inputs[static_cast<size_t>(i * 256 + k)] - b.inputs[static_cast<size_t>(j * 256 + k)];
        d += diff * diff;
      }
      if (b.labels[static_cast<size_t>(i)] == b.labels[static_cast<size_t>(j)]) {
        same += d;
        ++n_same;
      } else {
        other += d;
        ++n_other;
      }
    }
  }
  ASSERT_GT(n_same, 0);
  EXPECT_LT(same / n_same, 0.5 * other / n_other);
}

TEST(Synthetic, SeededAndReproducible) {
  SyntheticSource a(Shape{8}, LabelSpec{LabelFormat::kClassIndex, 3}, 9);
  SyntheticSource b(Shape{8}, LabelSpec{LabelFormat::kClassIndex, 3}, 9);
  HostBatch x, y;
  a.next(5, x);
  b.next(5, y);
  EXPECT_EQ(x.inputs, y.inputs);
  EXPECT_EQ(x.labels, y.labels);
}

TEST(Synthetic, RejectsBadArguments) {
  EXPECT_THROW(SyntheticSource(Shape{0}, LabelSpec{}, 1), Error);
  EXPECT_THROW(SyntheticSource(Shape{4}, LabelSpec{LabelFormat::kClassIndex, 1}, 1), Error);
  SyntheticSource s(Shape{4}, LabelSpec{}, 1);
  HostBatch b;
  EXPECT_THROW(s.next(0, b), Error);
}

}  // namespace
}  // namespace scalescope
