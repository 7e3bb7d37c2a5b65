// Gradient buckets: consecutive layers in backward order, tiling the flat gradients.
#include <gtest/gtest.h>

#include "core/cpu/cpu_device.h"
#include "core/error.h"
#include "harness/trainer/buckets.h"
#include "models/zoo.h"

namespace scalescope {
namespace {

TEST(Buckets, TileTheGradientsInBackwardOrder) {
  CpuDevice dev(0, 1);
  Model m(make_model("cifar-cnn"), Shape{32, 32, 3}, dev, 1);
  // 1 KiB first bucket, 128 KiB the rest: dense 10 (650 floats, 704 padded) alone, then
  // dense 64 (1 MiB) alone (larger than the cap), then both convs (18,496 + 896 floats =
  // 76 KiB, under the cap: the last bucket closes with the first layer).
  const std::vector<Bucket> b = plan_buckets(m, 128 * 1024, 1024);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].begin, 0);
  EXPECT_EQ(b[0].first_layer, 9);
  EXPECT_EQ(b[1].first_layer, 7);
  EXPECT_EQ(b[2].first_layer, 0);
  EXPECT_EQ(b[2].last_layer, 3);
  for (size_t i = 1; i < b.size(); ++i) EXPECT_EQ(b[i].begin, b[i - 1].end);
  // Each starts 256 bytes into the flat buffers' alignment (NCCL's vectorised path).
  for (const Bucket& bucket : b) EXPECT_EQ(bucket.begin * sizeof(float) % 256, 0u);
  EXPECT_EQ(b.back().end, m.flat_size());
  // One huge cap: a single bucket after the first.
  EXPECT_EQ(plan_buckets(m, int64_t{1} << 30, 1024).size(), 2u);
  EXPECT_THROW(plan_buckets(m, 0, 1024), Error);
}

}  // namespace
}  // namespace scalescope
