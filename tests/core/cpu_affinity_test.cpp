#include "core/cpu_affinity.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <vector>

#include "core/backend.h"
#include "core/device_spec.h"
#include "core/error.h"
#include "tests/test_util.h"

namespace scalescope {
namespace {

TEST(CpuAffinity, CpuSetsTravelAsRangesAndBack) {
  const std::vector<int> cpus = {0, 1, 2, 3, 8, 10, 11};
  EXPECT_EQ(format_cpu_set(cpus), "0-3,8,10-11");
  EXPECT_EQ(parse_cpu_set("0-3,8,10-11"), cpus);
  EXPECT_EQ(parse_cpu_set("5"), std::vector<int>{5});
  EXPECT_EQ(parse_cpu_set(format_cpu_set(usable_cpus())), usable_cpus());
  for (const char* bad : {"", "x", "3-1", "2,1", "1,1", "-1", "1-", "0,,2", "99999"}) {
    EXPECT_THROW((void)parse_cpu_set(bad), Error) << bad;
  }
  EXPECT_CONTAINS(testing_util::error_of([] { (void)parse_cpu_set("0-2,1"); }),
                  "CPU set '0-2,1': its CPUs are not in ascending order");
}

// Processes an MPI launcher bound to cores of their own share none; unbound ones share all.
TEST(CpuAffinity, SetsIntersectWhereTheyHaveACoreInCommon) {
  EXPECT_FALSE(cpu_sets_intersect({0}, {1}));
  EXPECT_FALSE(cpu_sets_intersect({0, 1, 2, 3}, {4, 5, 6, 7}));
  EXPECT_TRUE(cpu_sets_intersect({0, 1}, {0, 1}));
  EXPECT_TRUE(cpu_sets_intersect({0, 2, 4}, {3, 4, 5}));
  EXPECT_FALSE(cpu_sets_intersect({0, 2, 4}, {1, 3, 5}));
}

// Under taskset, a cpuset or a launcher's binding, the devices count the cores the process
// may use, not the machine's: a device's default threads, the default device axis and a
// sweep's refusal to oversubscribe follow. (sched_setaffinity(0) sets the calling thread's
// mask, which is the one sched_getaffinity(0) reads.)
TEST(CpuAffinity, TheBackendsCountTheCoresTheProcessMayUse) {
  const std::vector<int> cpus = usable_cpus();
  EXPECT_EQ(backend(DeviceKind::kCpu).device_count(), static_cast<int>(cpus.size()));
  EXPECT_EQ(backend(DeviceKind::kSim).device_count(), static_cast<int>(cpus.size()));
  if (cpus.size() < 2) GTEST_SKIP() << "one usable CPU: nothing narrower to set";
  cpu_set_t all;
  ASSERT_EQ(sched_getaffinity(0, sizeof(all), &all), 0);
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpus.back(), &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
  const int cpu_devices = backend(DeviceKind::kCpu).device_count();
  const int sim_devices = backend(DeviceKind::kSim).device_count();
  const std::vector<int> narrowed = usable_cpus();
  const DefaultDevices defaults = default_device_axis();
  ASSERT_EQ(sched_setaffinity(0, sizeof(all), &all), 0);
  EXPECT_EQ(cpu_devices, 1);
  EXPECT_EQ(sim_devices, 1);
  EXPECT_EQ(narrowed, std::vector<int>{cpus.back()});
  EXPECT_EQ(defaults.axis.counts, std::vector<int>{1});
}

}  // namespace
}  // namespace scalescope
