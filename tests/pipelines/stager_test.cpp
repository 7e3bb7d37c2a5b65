// The stager: handing host batches to a device, directly (CPU) or through pinned memory and
// a copy stream, double-buffered (simulated devices, GPUs).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "core/cpu/cpu_device.h"
#include "core/error.h"
#include "core/sim/sim_device.h"
#include "pipelines/stager.h"

namespace scalescope {
namespace {

Stager::Staged stage(Stager& stager, const HostBatch& batch, Stream& compute) {
  stager.start(batch);
  return stager.take(compute);
}

TEST(Stager, CpuHandsTheHostBatchOverWithoutCopying) {
  CpuDevice dev(0, 1);
  Stager stager(dev, 4, 3, 1);
  HostBatch batch;
  batch.size = 4;
  batch.sample_shape = Shape{3};
  batch.inputs.assign(12, 1.0f);
  batch.labels.assign(4, 0.0f);
  const Stager::Staged staged = stage(stager, batch, dev.default_stream());
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
  EXPECT_THROW(stage(stager, batch, dev.default_stream()), Error);
  EXPECT_THROW(stager.release(dev.default_stream()), Error);  // nothing staged yet
  EXPECT_THROW(stager.take(dev.default_stream()), Error);     // nothing started
  EXPECT_THROW(Stager(dev, 0, 3, 1), Error);
}

TEST(Stager, StartsOneBatchAheadAtMost) {
  SimDevice device(0, 1, 0, 7);
  Stager stager(device, 4, 8, 1);
  HostBatch batch;
  batch.inputs.assign(32, 1.0f);
  batch.labels.assign(4, 0.0f);
  stager.start(batch);
  EXPECT_TRUE(stager.started());
  EXPECT_THROW(stager.start(batch), Error);
  (void)stager.take(device.default_stream());
  EXPECT_FALSE(stager.started());
  stager.release(device.default_stream());
}

HostBatch filled(float value) {
  HostBatch batch;
  batch.size = 4;
  batch.sample_shape = Shape{8};
  batch.inputs.assign(32, value);
  batch.labels.assign(4, value);
  return batch;
}

// On a device with real streams: the copy of the next batch runs while the compute stream
// is still busy with the last one, and a slot is never overwritten before the compute that
// reads it has run. Batch C reuses batch A's slot while a (gated) kernel has yet to read A.
TEST(Stager, CopiesOverlapComputeAndNeverOverwriteABatchStillToBeRead) {
  for (const int64_t jitter_us : {0, 300}) {
    SimDevice device(0, 1, jitter_us, 7);
    Stream& compute = device.default_stream();
    Stager stager(device, 4, 8, 1);
    std::atomic<bool> open{false};
    std::vector<float> read_a(32), read_b(32), read_c(32);
    const auto read_into = [&](const Stager::Staged& staged, std::vector<float>& out) {
      device.launch(compute, [&out, in = staged.inputs] { std::copy(in, in + 32, out.begin()); });
    };
    const Stager::Staged a = stage(stager, filled(1.0f), compute);
    device.launch(compute, [&open] {
      while (!open.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
    read_into(a, read_a);
    stager.release(compute);
    const Stager::Staged b = stage(stager, filled(2.0f), compute);
    // B's copy needs nothing from the compute stream: it finishes while compute waits.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!b.copy_end->query() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_TRUE(b.copy_end->query()) << "the copy of the next batch waited for compute";
    read_into(b, read_b);
    stager.release(compute);
    const Stager::Staged c = stage(stager, filled(3.0f), compute);  // A's slot again
    EXPECT_EQ(c.inputs, a.inputs);
    std::this_thread::sleep_for(std::chrono::milliseconds(30));  // room for a wrong copy
    open = true;
    read_into(c, read_c);
    stager.release(compute);
    compute.synchronize();
    EXPECT_EQ(read_a, std::vector<float>(32, 1.0f)) << "jitter " << jitter_us;
    EXPECT_EQ(read_b, std::vector<float>(32, 2.0f));
    EXPECT_EQ(read_c, std::vector<float>(32, 3.0f));
  }
}

// The host refills a pinned slot only after the copy that read it: batch C's copy waits
// behind the gated compute that reads A (its slot's previous batch), so when batch E reuses
// the slot, C's copy has yet to read the pinned memory that E would overwrite.
TEST(Stager, TheHostNeverRefillsAPinnedSlotBeforeItsCopyHasReadIt) {
  SimDevice device(0, 1, 0, 7);
  Stream& compute = device.default_stream();
  Stager stager(device, 4, 8, 1);
  std::atomic<bool> open{false};
  std::vector<float> read_c(32);
  (void)stage(stager, filled(1.0f), compute);  // A, slot 0
  device.launch(compute, [&open] {
    while (!open.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  stager.release(compute);
  (void)stage(stager, filled(2.0f), compute);  // B, slot 1
  stager.release(compute);
  const Stager::Staged c = stage(stager, filled(3.0f), compute);  // slot 0, after A's compute
  device.launch(compute, [&read_c, in = c.inputs] { std::copy(in, in + 32, read_c.begin()); });
  stager.release(compute);
  (void)stage(stager, filled(4.0f), compute);  // D, slot 1
  stager.release(compute);
  std::thread opener([&open] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    open = true;
  });
  stager.start(filled(5.0f));  // E, slot 0: must wait for C's copy, which waits for the gate
  (void)stager.take(compute);
  stager.release(compute);
  opener.join();
  compute.synchronize();
  EXPECT_EQ(read_c, std::vector<float>(32, 3.0f));
}

}  // namespace
}  // namespace scalescope
