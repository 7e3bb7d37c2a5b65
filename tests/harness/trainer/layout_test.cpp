// How replicas spread over processes, and which device each opens.
#include <gtest/gtest.h>

#include "core/error.h"
#include "harness/trainer/layout.h"
#include "tests/test_util.h"

namespace scalescope {
namespace {

TEST(ProcessLayout, OneProcessHostsEveryReplica) {
  const ProcessLayout l = process_layout(nullptr, 0, 4);
  EXPECT_EQ(l.processes, 1);
  EXPECT_EQ(l.local, 4);
  EXPECT_EQ(l.first, 0);
  EXPECT_EQ(l.on_node, 4);
}

// Two nodes of two processes, two GPUs each: this process is the second on its node and
// hosts replicas 6 and 7.
ProcessLayout second_process_of_second_node() {
  ProcessLayout l;
  l.processes = 4;
  l.replicas_per_process = 2;
  l.first = 6;
  l.local = 2;
  l.on_node = 4;
  l.node_first = 2;
  l.nodes = 2;
  return l;
}

TEST(DeviceIndex, OneProcessOpensTheFirstVisibleDevices) {
  const ProcessLayout l = process_layout(nullptr, 0, 2);
  EXPECT_EQ(device_index(l, 0, 8), 0);
  EXPECT_EQ(device_index(l, 1, 8), 1);
}

TEST(DeviceIndex, AProcessSeeingItsNodesDevicesTakesItsShare) {
  const ProcessLayout l = second_process_of_second_node();
  EXPECT_EQ(device_index(l, 6, 4), 2);
  EXPECT_EQ(device_index(l, 7, 4), 3);
}

// srun --gpus-per-task=2 or a per-rank CUDA_VISIBLE_DEVICES: each process sees its own two
// GPUs as 0 and 1.
TEST(DeviceIndex, AProcessSeeingOnlyItsOwnDevicesCountsFromZero) {
  const ProcessLayout l = second_process_of_second_node();
  EXPECT_EQ(device_index(l, 6, 2), 0);
  EXPECT_EQ(device_index(l, 7, 2), 1);
  EXPECT_NO_THROW(check_visible_devices(l, DeviceKind::kCuda, 2));
  const std::string message =
      testing_util::error_of([&] { check_visible_devices(l, DeviceKind::kCuda, 1); });
  EXPECT_CONTAINS(message, "hosts 2 replica(s) on cuda devices but sees 1");
}

}  // namespace
}  // namespace scalescope
