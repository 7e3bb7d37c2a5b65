// The device backends registry: every backend of the build is found by its kind, a missing
// one is refused with the one message that says how to get it, and every backend answers
// what telemetry asks of it (library versions, devices, peer access) without throwing.
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/error.h"
#include "tests/test_util.h"

namespace scalescope {
namespace {

using testing_util::error_of;

// The version of library `name` among `versions`, or "" when it is not listed.
std::string version_of(const std::vector<LibraryVersion>& versions, const std::string& name) {
  for (const LibraryVersion& v : versions) {
    if (v.name == name) return v.version;
  }
  return "";
}

TEST(BackendRegistry, EveryBackendIsFoundByItsKindOnce) {
  ASSERT_FALSE(backends().empty());
  EXPECT_EQ(backends().front()->kind(), DeviceKind::kCpu);
  std::set<DeviceKind> kinds;
  for (Backend* b : backends()) {
    EXPECT_TRUE(kinds.insert(b->kind()).second) << b->name() << " is registered twice";
    EXPECT_EQ(&backend(b->kind()), b);
    EXPECT_EQ(find_backend(b->kind()), b);
    EXPECT_STREQ(b->name(), to_string(b->kind()));
  }
}

TEST(BackendRegistry, CudaIsRegisteredExactlyInCudaBuilds) {
  // The build's macro as the independent truth: the registry is the one place that reads it.
  EXPECT_EQ(find_backend(DeviceKind::kCuda) != nullptr, SCALESCOPE_WITH_CUDA != 0);
  if (find_backend(DeviceKind::kCuda) != nullptr) return;
  EXPECT_CONTAINS(error_of([] { backend(DeviceKind::kCuda); }),
                  missing_backend_message(DeviceKind::kCuda));
}

TEST(BackendRegistry, MissingCudaMessageSaysHowToGetIt) {
  const std::string message = missing_backend_message(DeviceKind::kCuda);
  EXPECT_CONTAINS(message, "cuda");
  EXPECT_CONTAINS(message, "-DSCALESCOPE_WITH_CUDA=ON");
  EXPECT_CONTAINS(message, "CUDA toolkit, cuDNN and NCCL");
  EXPECT_CONTAINS(message, "--devices cpu:N");
  EXPECT_CONTAINS(missing_backend_message(DeviceKind::kCpu), "cpu");
}

// A registry of entries of its own, so that the missing kind is tested in every build.
struct FakeEntry {
  DeviceKind registered;
  DeviceKind kind() const { return registered; }
};

TEST(BackendRegistry, TableFindsItsEntriesAndRefusesOthersWithTheMessage) {
  std::vector<std::unique_ptr<FakeEntry>> entries;
  entries.push_back(std::make_unique<FakeEntry>(FakeEntry{DeviceKind::kCpu}));
  const BackendRegistry<FakeEntry> table(std::move(entries));
  ASSERT_EQ(table.all().size(), 1u);
  EXPECT_EQ(&table.get(DeviceKind::kCpu), table.all().front());
  EXPECT_EQ(table.find(DeviceKind::kCuda), nullptr);
  EXPECT_CONTAINS(error_of([&] { table.get(DeviceKind::kCuda); }),
                  missing_backend_message(DeviceKind::kCuda));
}

TEST(CpuBackend, ReportsOpenMpAndNoPhysicalDevices) {
  const Backend& cpu = backend(DeviceKind::kCpu);
  EXPECT_FALSE(version_of(cpu.library_versions(), "openmp").empty());
  const DeviceSurvey survey = cpu.survey();
  EXPECT_TRUE(survey.devices.empty());
  EXPECT_EQ(survey.error, "");
  const PeerAccess access = cpu.peer_access(0, 1);
  EXPECT_FALSE(access.possible);
  EXPECT_CONTAINS(access.error, "cpu");
}

TEST(CudaBackend, ReportsVersionsAndDevicesWithoutThrowing) {
  const Backend* cuda = find_backend(DeviceKind::kCuda);
  if (cuda == nullptr) GTEST_SKIP() << missing_backend_message(DeviceKind::kCuda);
  const std::vector<LibraryVersion> versions = cuda->library_versions();
  EXPECT_FALSE(version_of(versions, "cuda_driver").empty());
  EXPECT_FALSE(version_of(versions, "cuda_runtime").empty());
  const DeviceSurvey survey = cuda->survey();
  if (survey.devices.empty()) {
    EXPECT_FALSE(survey.error.empty());
  } else {
    EXPECT_EQ(static_cast<int>(survey.devices.size()), cuda->device_count());
  }
  for (const DeviceProperties& d : survey.devices) {
    EXPECT_FALSE(d.name.empty());
    EXPECT_FALSE(d.pci_bus_id.empty());
    EXPECT_GT(d.memory_bytes, 0);
  }
}

}  // namespace
}  // namespace scalescope
