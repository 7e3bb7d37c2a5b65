// The CUDA device: the caching allocator, memory accounting, and the replica's streams and
// events. Every test skips without a GPU (and on CPU-only builds).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "core/backend.h"
#include "core/buffer.h"
#include "core/error.h"

#if SCALESCOPE_WITH_CUDA
#include "core/caching_allocator.h"
#include "core/check.h"
#include "core/cuda/cuda_device.h"
#endif

namespace scalescope {
namespace {

#if SCALESCOPE_WITH_CUDA

class CudaDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Backend& cuda = backend(DeviceKind::kCuda);
    if (cuda.device_count() == 0) {
      GTEST_SKIP() << "no GPU to run the CUDA device tests on (" << cuda.unavailable_reason()
                   << ")";
    }
    device_ = cuda.open(0, BackendOptions{});
  }

  Device& device() { return *device_; }

 private:
  std::unique_ptr<Device> device_;
};

TEST_F(CudaDeviceTest, FreedBlockIsReusedWithoutAnotherCudaMalloc) {
  Device& dev = device();
  const int64_t before = dev.device_allocations();
  void* first = dev.allocate(1000);
  dev.deallocate(first, 1000);
  // No work was queued, so the block carries no fence and is reusable at once; 1024 bytes
  // round to the same block size as 1000.
  void* second = dev.allocate(1024);
  EXPECT_EQ(second, first);
  EXPECT_EQ(dev.device_allocations() - before, 1);
  dev.deallocate(second, 1024);
}

TEST_F(CudaDeviceTest, SteadyStateStepsCallCudaMallocZeroTimes) {
  Device& dev = device();
  Stream& compute = dev.default_stream();
  auto step = [&] {
    // Temporaries of a step: allocated, used by queued work, freed before the work ran.
    DeviceBuffer a(dev, 3 << 20);
    DeviceBuffer b(dev, 4096);
    dev.fill_zero(a.data(), a.bytes(), compute);
    dev.fill_zero(b.data(), b.bytes(), compute);
  };
  step();
  compute.synchronize();  // the trainer synchronizes once per step
  step();
  compute.synchronize();
  const int64_t warm = dev.device_allocations();
  for (int i = 0; i < 10; ++i) {
    step();
    compute.synchronize();
  }
  EXPECT_EQ(dev.device_allocations(), warm);
}

// Holds a stream busy until opened: a host function enqueued on the stream that waits for a
// flag (at most 30 s, so that a failing test cannot hang). The flag is shared with the host
// function, which may still be polling it after the gate went out of scope.
class StreamGate {
 public:
  explicit StreamGate(Stream& stream) {
    auto* held = new std::shared_ptr<std::atomic<bool>>(open_);
    const cudaError_t status = cudaLaunchHostFunc(cuda_stream(stream), &StreamGate::wait, held);
    if (status != cudaSuccess) delete held;
    SS_CHECK_CUDA(status);
  }
  ~StreamGate() { open(); }
  StreamGate(const StreamGate&) = delete;
  StreamGate& operator=(const StreamGate&) = delete;
  void open() { open_->store(true); }

 private:
  static void wait(void* arg) {
    const std::unique_ptr<std::shared_ptr<std::atomic<bool>>> flag(
        static_cast<std::shared_ptr<std::atomic<bool>>*>(arg));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!(*flag)->load() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  std::shared_ptr<std::atomic<bool>> open_ = std::make_shared<std::atomic<bool>>(false);
};

TEST_F(CudaDeviceTest, BlockStillUsedByQueuedWorkIsNotHandedOutAgain) {
  Device& dev = device();
  Stream& compute = dev.default_stream();
  const size_t bytes = size_t{4} << 20;
  const int64_t before = dev.device_allocations();
  void* busy = dev.allocate(bytes);
  {
    StreamGate gate(compute);
    dev.fill_zero(busy, bytes, compute);  // queued behind the gate: cannot have run
    dev.deallocate(busy, bytes);
    void* other = dev.allocate(bytes);
    EXPECT_NE(other, busy) << "a block was reused while queued work still used it";
    EXPECT_EQ(dev.device_allocations() - before, 2);
    dev.deallocate(other, bytes);
    gate.open();
    compute.synchronize();
  }
  // Once the stream has passed the fences both blocks are reusable.
  void* again = dev.allocate(bytes);
  EXPECT_NE(again, nullptr);
  EXPECT_EQ(dev.device_allocations() - before, 2);
  dev.deallocate(again, bytes);
}

TEST_F(CudaDeviceTest, AccountingCountsLogicalSizesAndCacheIsReserved) {
  Device& dev = device();
  const int64_t in_use = dev.memory_in_use();
  dev.reset_peak_memory();
  void* a = dev.allocate(1000);
  void* b = dev.allocate(3 << 20);
  EXPECT_EQ(dev.memory_in_use() - in_use, 1000 + (3 << 20));
  EXPECT_EQ(dev.peak_memory() - in_use, 1000 + (3 << 20));
  EXPECT_GE(dev.memory_reserved(), static_cast<int64_t>(CachingAllocator::round_size(1000) +
                                                        CachingAllocator::round_size(3 << 20)));
  dev.deallocate(a, 1000);
  EXPECT_EQ(dev.memory_in_use() - in_use, 3 << 20);
  EXPECT_EQ(dev.peak_memory() - in_use, 1000 + (3 << 20));  // the peak stays
  dev.deallocate(b, 3 << 20);
  EXPECT_EQ(dev.memory_in_use(), in_use);
  const int64_t cached = dev.memory_reserved();
  EXPECT_GT(cached, 0);  // freed blocks stay with the device
  dev.release_cached_memory();
  EXPECT_LT(dev.memory_reserved(), cached);
  dev.reset_peak_memory();
  EXPECT_EQ(dev.peak_memory(), dev.memory_in_use());
}

TEST_F(CudaDeviceTest, MemoryLimitAndOutOfMemoryNameTheSize) {
  Device& dev = device();
  dev.set_memory_limit(1 << 20);
  EXPECT_THROW(dev.allocate(2 << 20), Error);
  dev.set_memory_limit(0);
  const int64_t in_use = dev.memory_in_use();
  const size_t huge = size_t{1} << 50;  // a petabyte: no GPU has it
  try {
    dev.allocate(huge);
    FAIL() << "a petabyte was allocated";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(huge)), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("in use"), std::string::npos) << e.what();
  }
  EXPECT_EQ(dev.memory_in_use(), in_use);
  // The failure left the device usable.
  DeviceBuffer ok(dev, 4096);
  EXPECT_FALSE(ok.empty());
}

TEST_F(CudaDeviceTest, ReplicaStreamsAreDistinctAndBelongToTheDevice) {
  Device& dev = device();
  EXPECT_NE(&dev.copy_stream(), &dev.default_stream());
  EXPECT_NE(&dev.comm_stream(), &dev.default_stream());
  EXPECT_NE(&dev.comm_stream(), &dev.copy_stream());
  for (Stream* s : {&dev.default_stream(), &dev.copy_stream(), &dev.comm_stream()}) {
    EXPECT_EQ(&s->device(), &dev);
  }
}

TEST_F(CudaDeviceTest, EventOrdersCopyStreamBeforeComputeStream) {
  Device& dev = device();
  const size_t count = size_t{16} << 20;  // 64 MiB: long enough that a missing wait would show
  const size_t bytes = count * sizeof(float);
  HostBuffer host_in(dev, bytes);
  HostBuffer host_out(dev, bytes);
  auto* in = static_cast<float*>(host_in.data());
  std::iota(in, in + count, 0.0f);
  std::memset(host_out.data(), 0, bytes);
  DeviceBuffer staged(dev, bytes);
  DeviceBuffer used(dev, bytes);

  const std::unique_ptr<Event> copied = dev.create_ordering_event();
  dev.copy_to_device(staged.data(), host_in.data(), bytes, dev.copy_stream());
  copied->record(dev.copy_stream());
  copied->wait_on(dev.default_stream());
  dev.copy_on_device(used.data(), staged.data(), bytes, dev.default_stream());
  dev.copy_to_host(host_out.data(), used.data(), bytes, dev.default_stream());
  dev.default_stream().synchronize();
  EXPECT_EQ(std::memcmp(host_out.data(), host_in.data(), bytes), 0);
}

TEST_F(CudaDeviceTest, TimingEventsMeasureAndOrderingEventsRefuseTo) {
  Device& dev = device();
  Stream& s = dev.default_stream();
  DeviceBuffer buffer(dev, size_t{32} << 20);
  const auto start = dev.create_event();
  const auto end = dev.create_event();
  start->record(s);
  dev.fill_zero(buffer.data(), buffer.bytes(), s);
  end->record(s);
  end->synchronize();
  EXPECT_GE(end->elapsed_ms_since(*start), 0.0);

  const auto a = dev.create_ordering_event();
  const auto b = dev.create_ordering_event();
  a->record(s);
  b->record(s);
  b->synchronize();
  EXPECT_THROW((void)b->elapsed_ms_since(*a), Error);
}

#else

TEST(CudaDeviceTest, SkippedWithoutCuda) {
  GTEST_SKIP() << "CPU-only build (SCALESCOPE_WITH_CUDA=0): no CUDA device to test";
}

#endif

}  // namespace
}  // namespace scalescope
