// The NVML sampler, driven by a fake reading source: the aggregation, the thread's start and
// stop, and the path without NVML. Runs on every machine; nothing here needs a GPU.
#include "harness/telemetry/nvml_sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"

namespace scalescope {
namespace {

using std::chrono::milliseconds;

// A source that answers the n-th call for a device with the n-th scripted reading, and
// fails ("exhausted") once the script is used up; counts the calls per device.
class ScriptedSource {
 public:
  ScriptedSource(std::vector<std::string> ids, std::vector<std::vector<GpuReading>> script)
      : ids_(std::move(ids)), script_(std::move(script)), calls_(ids_.size()) {}

  GpuReadingSource source() {
    return [this](const std::string& id) -> NvmlResult<GpuReading> {
      const size_t device = index(id);
      const size_t n = calls_[device].fetch_add(1);
      if (n >= script_[device].size()) return NvmlResult<GpuReading>::failure("exhausted");
      return {script_[device][n], {}};
    };
  }
  int64_t calls(size_t device) const { return static_cast<int64_t>(calls_[device].load()); }

 private:
  size_t index(const std::string& id) const {
    for (size_t i = 0; i < ids_.size(); ++i) {
      if (ids_[i] == id) return i;
    }
    throw std::runtime_error("unknown bus id " + id);
  }
  std::vector<std::string> ids_;
  std::vector<std::vector<GpuReading>> script_;
  std::vector<std::atomic<size_t>> calls_;
};

// Waits (at most 20 s, so that a broken sampler fails instead of hanging) until `done`.
template <typename Done>
bool eventually(Done done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(milliseconds(1));
  }
  return true;
}

TEST(NvmlSampler, AggregatesMeansAndMaximaPerDevice) {
  const std::vector<std::string> ids = {"00000000:01:00.0", "00000000:02:00.0"};
  ScriptedSource fake(
      ids, {{{10, 1, 100}, {20, 2, 400}, {30, 3, 200}, {40, 4, 300}}, {{80, 50, 7}, {60, 30, 9}}});
  NvmlSampler sampler(ids, milliseconds(1), fake.source());
  EXPECT_TRUE(sampler.sampling());
  EXPECT_EQ(sampler.unavailable_reason(), "");
  // Past the end of both scripts, so that every scripted reading was taken.
  ASSERT_TRUE(eventually([&] { return fake.calls(0) >= 6 && fake.calls(1) >= 4; }));
  sampler.stop();

  const std::vector<GpuUtilizationSummary> s = sampler.summaries();
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].pci_bus_id, ids[0]);
  EXPECT_EQ(s[0].samples, 4);
  EXPECT_EQ(s[0].failed_samples, fake.calls(0) - 4);
  EXPECT_DOUBLE_EQ(s[0].mean_gpu_util_percent, 25.0);
  EXPECT_DOUBLE_EQ(s[0].max_gpu_util_percent, 40.0);
  EXPECT_DOUBLE_EQ(s[0].mean_memory_util_percent, 2.5);
  EXPECT_EQ(s[0].max_memory_used_bytes, 400u);
  EXPECT_EQ(s[0].error, "exhausted");

  EXPECT_EQ(s[1].pci_bus_id, ids[1]);
  EXPECT_EQ(s[1].samples, 2);
  EXPECT_DOUBLE_EQ(s[1].mean_gpu_util_percent, 70.0);
  EXPECT_DOUBLE_EQ(s[1].max_gpu_util_percent, 80.0);
  EXPECT_DOUBLE_EQ(s[1].mean_memory_util_percent, 40.0);
  EXPECT_EQ(s[1].max_memory_used_bytes, 9u);

  // Stopped means stopped: no reading after stop() returned.
  const int64_t calls = fake.calls(0);
  std::this_thread::sleep_for(milliseconds(20));
  EXPECT_EQ(fake.calls(0), calls);
}

TEST(NvmlSampler, TakesAReadingAtOnceAndStopsWithoutWaitingForThePeriod) {
  std::atomic<int> calls{0};
  const auto source = [&](const std::string&) -> NvmlResult<GpuReading> {
    ++calls;
    return {GpuReading{50, 5, 1 << 20}, {}};
  };
  // An hour's period: stop() must wake the thread rather than wait it out (the test would
  // hang otherwise), and the run still gets its first reading.
  NvmlSampler sampler({"00000000:01:00.0"}, std::chrono::hours(1), source);
  sampler.stop();
  sampler.stop();  // idempotent
  const auto s = sampler.summaries();
  ASSERT_EQ(s.size(), 1u);
  EXPECT_GE(s[0].samples, 1);
  EXPECT_EQ(s[0].samples, calls.load());
  EXPECT_DOUBLE_EQ(s[0].mean_gpu_util_percent, 50.0);
  EXPECT_EQ(s[0].max_memory_used_bytes, uint64_t{1} << 20);
  EXPECT_EQ(s[0].error, "");
}

TEST(NvmlSampler, SamplesRepeatedlyAndSummariesAreReadableWhileRunning) {
  std::atomic<int> calls{0};
  const auto source = [&](const std::string&) -> NvmlResult<GpuReading> {
    const int n = ++calls;
    return {GpuReading{static_cast<double>(n % 100), 0, static_cast<uint64_t>(n)}, {}};
  };
  NvmlSampler sampler({"a", "b"}, milliseconds(1), source);
  ASSERT_TRUE(eventually([&] {
    const auto s = sampler.summaries();  // concurrently with the thread
    return s[0].samples >= 3 && s[1].samples >= 3;
  }));
  sampler.stop();
  const auto s = sampler.summaries();
  EXPECT_EQ(s[0].samples + s[1].samples, calls.load());
  EXPECT_EQ(std::max(s[0].max_memory_used_bytes, s[1].max_memory_used_bytes),
            static_cast<uint64_t>(calls.load()));
}

TEST(NvmlSampler, DestructorStopsTheThread) {
  std::atomic<int> calls{0};
  {
    NvmlSampler sampler({"a"}, milliseconds(1), [&](const std::string&) {
      ++calls;
      return NvmlResult<GpuReading>{GpuReading{}, {}};
    });
    ASSERT_TRUE(eventually([&] { return calls.load() >= 2; }));
  }
  const int after = calls.load();
  std::this_thread::sleep_for(milliseconds(20));
  EXPECT_EQ(calls.load(), after);
}

TEST(NvmlSampler, ASourceThatThrowsCountsAsAFailedReading) {
  std::atomic<int> calls{0};
  NvmlSampler sampler({"a"}, milliseconds(1), [&](const std::string&) -> NvmlResult<GpuReading> {
    if (++calls % 2 == 0) throw std::runtime_error("driver went away");
    return {GpuReading{30, 3, 3}, {}};
  });
  ASSERT_TRUE(eventually([&] { return calls.load() >= 4; }));
  sampler.stop();
  const auto s = sampler.summaries()[0];
  EXPECT_GE(s.samples, 2);
  EXPECT_GE(s.failed_samples, 2);
  EXPECT_EQ(s.samples + s.failed_samples, calls.load());
  EXPECT_DOUBLE_EQ(s.mean_gpu_util_percent, 30.0);
  EXPECT_NE(s.error.find("driver went away"), std::string::npos) << s.error;
}

TEST(NvmlSampler, WithoutNvmlRecordsWhyAndReturnsNoSamples) {
  NvmlSampler sampler({"00000000:01:00.0"}, NvmlSampler::kDefaultPeriod,
                      "libscalescope-no-such-nvml.so.1");
  EXPECT_FALSE(sampler.sampling());
  EXPECT_NE(sampler.unavailable_reason().find("not loaded"), std::string::npos)
      << sampler.unavailable_reason();
  EXPECT_NE(sampler.unavailable_reason().find("libscalescope-no-such-nvml.so.1"), std::string::npos)
      << sampler.unavailable_reason();
  sampler.stop();
  const auto s = sampler.summaries();
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].samples, 0);
  EXPECT_EQ(s[0].failed_samples, 0);
  EXPECT_EQ(s[0].error, sampler.unavailable_reason());
}

TEST(NvmlSampler, NothingToSampleAndBadArguments) {
  NvmlSampler none({}, milliseconds(10), [](const std::string&) {
    return NvmlResult<GpuReading>{GpuReading{}, {}};
  });
  EXPECT_FALSE(none.sampling());
  EXPECT_TRUE(none.summaries().empty());
  EXPECT_NE(none.unavailable_reason(), "");

  const auto ok = [](const std::string&) { return NvmlResult<GpuReading>{GpuReading{}, {}}; };
  EXPECT_THROW(NvmlSampler({"a"}, milliseconds(0), ok), Error);
  EXPECT_THROW(NvmlSampler({"a"}, milliseconds(-5), ok), Error);
  EXPECT_THROW(NvmlSampler({"a"}, milliseconds(10), GpuReadingSource{}), Error);
}

// On a machine with a driver, NVML's own readings come through; elsewhere the reason does.
TEST(NvmlSampler, RealNvmlEitherSamplesOrSaysWhy) {
  const Nvml nvml;
  if (!nvml.loaded()) {
    NvmlSampler sampler({"00000000:01:00.0"});
    EXPECT_FALSE(sampler.sampling());
    EXPECT_EQ(sampler.unavailable_reason(), nvml.error());
    return;
  }
  // A bus id no GPU has: every reading fails, naming NVML's call.
  NvmlSampler sampler({"00000000:FF:1F.7"}, milliseconds(1));
  EXPECT_TRUE(sampler.sampling());
  sampler.stop();
  const auto s = sampler.summaries()[0];
  EXPECT_EQ(s.samples, 0);
  EXPECT_GE(s.failed_samples, 1);
  EXPECT_NE(s.error.find("nvmlDeviceGetHandleByPciBusId"), std::string::npos) << s.error;
}

}  // namespace
}  // namespace scalescope
