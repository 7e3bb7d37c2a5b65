#include <gtest/gtest.h>

#include "core/cpu/cpu_device.h"
#include "core/error.h"
#include "pipelines/stager.h"

namespace scalescope {
namespace {

TEST(Stager, CpuHandsTheHostBatchOverWithoutCopying) {
  CpuDevice dev(0, 1);
  Stager stager(dev, 4, 3, 1);
  HostBatch batch;
  batch.size = 4;
  batch.sample_shape = Shape{3};
  batch.inputs.assign(12, 1.0f);
  batch.labels.assign(4, 0.0f);
  const Stager::Staged staged = stager.stage(batch, dev.default_stream());
  EXPECT_EQ(staged.inputs, batch.inputs.data());
  EXPECT_EQ(staged.labels, batch.labels.data());
  EXPECT_EQ(staged.copy_start, nullptr);
  stager.release(dev.default_stream());
}

TEST(Stager, RefusesABatchOfAnotherSize) {
  CpuDevice dev(0, 1);
  Stager stager(dev, 4, 3, 1);
  HostBatch batch;
  batch.inputs.assign(9, 1.0f);
  batch.labels.assign(3, 0.0f);
  EXPECT_THROW(stager.stage(batch, dev.default_stream()), Error);
  EXPECT_THROW(stager.release(dev.default_stream()), Error);  // nothing staged yet
  EXPECT_THROW(Stager(dev, 0, 3, 1), Error);
}

}  // namespace
}  // namespace scalescope
