#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <numeric>
#include <thread>
#include <vector>

#include "core/backend.h"
#include "core/cpu/cpu_device.h"
#include "core/device_spec.h"
#include "core/error.h"
#include "core/random.h"
#include "core/tensor.h"

namespace scalescope {
namespace {

TEST(DeviceSpec, ParsesEveryForm) {
  DeviceSpec s = parse_device_spec("cpu:4");
  EXPECT_EQ(s.kind, DeviceKind::kCpu);
  EXPECT_EQ(s.indices, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(parse_device_spec("cpu").count(), 1);
  s = parse_device_spec("cuda:0,1");
  EXPECT_EQ(s.kind, DeviceKind::kCuda);
  EXPECT_EQ(s.indices, (std::vector<int>{0, 1}));
  EXPECT_EQ(parse_device_spec("cuda:3").indices, std::vector<int>{3});
  EXPECT_EQ(to_string(parse_device_spec("cpu:2")), "cpu:2");
  EXPECT_EQ(to_string(parse_device_spec("cuda:1,0")), "cuda:1,0");
}

TEST(DeviceSpec, BareCountUsesCpuWithoutGpus) {
  bool gpus = false;
  for (Backend* b : backends())
    gpus = gpus || (b->kind() == DeviceKind::kCuda && b->device_count() > 0);
  if (gpus) GTEST_SKIP() << "a GPU is present: a bare count means GPUs here";
  const DeviceSpec s = parse_device_spec("2");
  EXPECT_EQ(s.kind, DeviceKind::kCpu);
  EXPECT_EQ(s.count(), 2);
}

TEST(DeviceSpec, RejectsBadInputNamingIt) {
  for (const char* bad : {"", "cpu:", "cpu:0", "cpu:-1", "cpu:x", "tpu:1", "cuda:0,0", "cuda:-1",
                          "cuda:1,,2", "0", "cpu:100000", "3x"}) {
    try {
      parse_device_spec(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("device"), std::string::npos) << e.what();
    }
  }
}

TEST(DeviceSpec, MissingGpuIsAnErrorNamingIt) {
  bool has_cuda = false;
  for (Backend* b : backends()) has_cuda = has_cuda || b->kind() == DeviceKind::kCuda;
  if (!has_cuda) GTEST_SKIP() << "CPU-only build";
  try {
    check_devices_available(parse_device_spec("cuda:4096"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cuda:4096"), std::string::npos) << e.what();
  }
}

TEST(CpuDevice, TensorRoundTripAndCopies) {
  CpuDevice dev(0, 1);
  Tensor t(dev, Shape{2, 3});
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data()) % 64, 0u);
  std::vector<float> values(6);
  std::iota(values.begin(), values.end(), 1.0f);
  t.copy_from_host(values);
  EXPECT_EQ(t.to_host(), values);
  Tensor u(dev, Shape{6});
  dev.copy_on_device(u.data(), t.data(), t.bytes(), dev.default_stream());
  EXPECT_EQ(u.to_host(), values);
  dev.fill_zero(u.data(), u.bytes(), dev.default_stream());
  EXPECT_EQ(u.to_host(), std::vector<float>(6, 0.0f));
  EXPECT_THROW(t.copy_from_host(std::vector<float>(5)), Error);
}

TEST(CpuDevice, BufferIsMoveOnlyAndFreesOnce) {
  CpuDevice dev(0, 1);
  DeviceBuffer a(dev, 128);
  void* ptr = a.data();
  DeviceBuffer b(std::move(a));
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(b.data(), ptr);
  DeviceBuffer c;
  c = std::move(b);
  EXPECT_EQ(c.data(), ptr);
  static_assert(!std::is_copy_constructible_v<DeviceBuffer>);
}

TEST(CpuDevice, EventsMeasureTheWorkBetweenThem) {
  CpuDevice dev(0, 1);
  auto start = dev.create_event();
  auto end = dev.create_event();
  Stream& s = dev.default_stream();
  start->record(s);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // "work" enqueued inline
  end->record(s);
  end->synchronize();
  const double ms = end->elapsed_ms_since(*start);
  EXPECT_GE(ms, 19.0);
  EXPECT_LT(ms, 2000.0);
  auto never = dev.create_event();
  EXPECT_THROW((void)never->elapsed_ms_since(*start), Error);
}

TEST(CpuBackend, ThreadsDefaultToCoresPerDevice) {
  Backend& cpu = backend(DeviceKind::kCpu);
  BackendOptions options;
  options.cpu_devices = 1;
  auto dev = cpu.open(0, options);
  auto* cpu_dev = dynamic_cast<CpuDevice*>(dev.get());
  ASSERT_NE(cpu_dev, nullptr);
  EXPECT_EQ(cpu_dev->threads(),
            static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  options.cpu_threads = 1;
  EXPECT_EQ(dynamic_cast<CpuDevice&>(*cpu.open(1, options)).threads(), 1);
  options.cpu_threads = -1;
  EXPECT_THROW(cpu.open(0, options), Error);
}

TEST(Rng, DeterministicAndInRange) {
  Rng a(42, 7);
  Rng b(42, 7);
  Rng c(42, 8);
  bool differs = false;
  for (int i = 0; i < 1000; ++i) {
    const float x = a.uniform();
    EXPECT_EQ(x, b.uniform());
    EXPECT_GE(x, 0.0f);
    EXPECT_LT(x, 1.0f);
    differs = differs || x != c.uniform();
  }
  EXPECT_TRUE(differs);
  // The sequence is part of the checkpoint contract (weights from a seed): pin one value.
  EXPECT_EQ(Rng(1).next(), 0x910a2dec89025cc1ULL);
}

}  // namespace
}  // namespace scalescope
