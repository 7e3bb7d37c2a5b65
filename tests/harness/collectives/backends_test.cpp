// The three registration tables agree: every device kind this build has gets kernels and
// collectives, a kind it lacks is refused everywhere with the one message, and every library
// a backend names lands in the environment of a report.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "core/backend.h"
#include "harness/collectives/collective_backends.h"
#include "harness/collectives/replica_comms.h"
#include "harness/telemetry/environment.h"
#include "models/kernels.h"
#include "tests/test_util.h"

namespace scalescope {
namespace {

using testing_util::error_of;

constexpr std::chrono::milliseconds kTimeout{5000};

std::vector<DeviceKind> kinds_of(const auto& registered) {
  std::vector<DeviceKind> kinds;
  for (const auto* entry : registered) kinds.push_back(entry->kind());
  return kinds;
}

TEST(Registries, ListTheDeviceKindsOfTheBuildInTheSameOrder) {
  EXPECT_EQ(kinds_of(kernel_backends()), kinds_of(backends()));
  EXPECT_EQ(kinds_of(collective_backends()), kinds_of(backends()));
  for (const Backend* b : backends()) {
    EXPECT_EQ(kernel_backend(b->kind()).kind(), b->kind()) << b->name();
    EXPECT_EQ(collective_backend(b->kind()).kind(), b->kind()) << b->name();
  }
}

TEST(CollectiveRegistry, CpuReplicasUseGlooOnly) {
  const CollectiveBackend& cpu = collective_backend(DeviceKind::kCpu);
  EXPECT_EQ(cpu.device_collectives(), nullptr);
  EXPECT_CONTAINS(error_of([&] { cpu.create_group(1, kTimeout); }), "Gloo");
  const std::vector<LibraryVersion> versions = cpu.library_versions();
  ASSERT_EQ(versions.size(), 1u);
  EXPECT_EQ(versions[0].name, "gloo");
  EXPECT_EQ(versions[0].version, gloo_version().version);
  EXPECT_FALSE(versions[0].version.empty());
}

TEST(CollectiveRegistry, CudaReplicasUseNcclAndGlooInCudaBuilds) {
  if (find_backend(DeviceKind::kCuda) == nullptr) {
    EXPECT_CONTAINS(error_of([] { collective_backend(DeviceKind::kCuda); }),
                    missing_backend_message(DeviceKind::kCuda));
    return;
  }
  const CollectiveBackend& cuda = collective_backend(DeviceKind::kCuda);
  ASSERT_NE(cuda.device_collectives(), nullptr);
  EXPECT_STREQ(cuda.device_collectives(), "NCCL");
  std::vector<std::string> names;
  for (const LibraryVersion& v : cuda.library_versions()) names.push_back(v.name);
  EXPECT_EQ(names, (std::vector<std::string>{"gloo", "nccl"}));
}

TEST(ReplicaComms, RefusesAKindThisBuildLacksWithTheOneMessage) {
  if (find_backend(DeviceKind::kCuda) != nullptr) GTEST_SKIP() << "this build has CUDA";
  EXPECT_CONTAINS(
      error_of([] { ReplicaComms comms(DeviceKind::kCuda, 1, 0, 1, kTimeout, 1, "", ""); }),
      missing_backend_message(DeviceKind::kCuda));
}

TEST(ReplicaComms, CpuReplicasWaitForNoDeviceGroupId) {
  ReplicaComms comms(DeviceKind::kCpu, 2, 0, 2, kTimeout, 1, "", "");
  EXPECT_TRUE(comms.nccl_id().empty());
  EXPECT_FALSE(comms.needs_nccl_id());
  EXPECT_NO_THROW(comms.set_nccl_id({'x'}));
  EXPECT_EQ(comms.node_gloo(), nullptr);
}

// Every library any registry names has its field in the report's environment, with the
// version the registry gives.
TEST(BackendLibraries, EveryNamedLibraryLandsInTheEnvironment) {
  const nlohmann::json libraries = to_json(capture_environment(""))["libraries"];
  std::vector<LibraryVersion> named;
  for (const Backend* b : backends()) {
    for (const LibraryVersion& v : b->library_versions()) named.push_back(v);
  }
  for (const KernelBackend* k : kernel_backends()) {
    for (const LibraryVersion& v : k->library_versions()) named.push_back(v);
  }
  for (const CollectiveBackend* c : collective_backends()) {
    for (const LibraryVersion& v : c->library_versions()) named.push_back(v);
  }
  for (const std::string name : {"openmp", "onednn", "gloo"}) {
    bool found = false;
    for (const LibraryVersion& v : named) found = found || v.name == name;
    EXPECT_TRUE(found) << name << " is named by no CPU backend";
  }
  for (const LibraryVersion& v : named) {
    ASSERT_TRUE(libraries.contains(v.name)) << v.name;
    EXPECT_EQ(libraries[v.name], v.version) << v.name;
  }
}

}  // namespace
}  // namespace scalescope
