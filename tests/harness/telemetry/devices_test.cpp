#include "harness/telemetry/devices.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "core/sim/sim_device.h"
#include "harness/telemetry/environment.h"
#include "harness/telemetry/host_link.h"
#include "harness/telemetry/nvml.h"
#include "tests/models/precision_scope.h"

namespace scalescope {
namespace {

// Whether the driver's NVML exists here; the assertions about a missing one only hold
// where it is missing.
bool nvml_installed() {
  void* h = dlopen(kNvmlLibrary, RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) return false;
  dlclose(h);
  return true;
}

TEST(Nvml, MissingLibraryGivesTheReasonAndNoCrash) {
  const Nvml nvml("/nonexistent/libnvidia-ml.so.1");
  EXPECT_FALSE(nvml.loaded());
  EXPECT_NE(nvml.error().find("not loaded"), std::string::npos) << nvml.error();
  EXPECT_NE(nvml.error().find("/nonexistent/libnvidia-ml.so.1"), std::string::npos) << nvml.error();
  // Every query answers with the reason instead of failing.
  const NvmlResult<std::string> driver = nvml.driver_version();
  EXPECT_FALSE(driver.ok());
  EXPECT_EQ(driver.error, nvml.error());
  const auto links = nvml.nvlink_states("0000:00:00.0");
  EXPECT_FALSE(links.ok());
  EXPECT_FALSE(links.error.empty());
}

TEST(Nvml, LibraryWithoutNvmlSymbolsIsRefused) {
  // A shared library that exists but is not NVML: the C library.
  const Nvml nvml("libc.so.6");
  EXPECT_FALSE(nvml.loaded());
  EXPECT_NE(nvml.error().find("nvmlInit_v2"), std::string::npos) << nvml.error();
}

TEST(Nvml, MovesOwnership) {
  Nvml a("/nonexistent/libnvidia-ml.so.1");
  const std::string why = a.error();
  Nvml b(std::move(a));
  EXPECT_FALSE(b.loaded());
  EXPECT_EQ(b.error(), why);
  a = std::move(b);
  EXPECT_EQ(a.error(), why);
}

TEST(Nvml, DefaultLibraryIsLoadedOrSaysWhy) {
  const Nvml nvml;
  if (nvml.loaded()) {
    EXPECT_TRUE(nvml.error().empty());
  } else {
    EXPECT_NE(nvml.error().find("not loaded"), std::string::npos) << nvml.error();
    if (!nvml_installed()) {
      EXPECT_NE(nvml.error().find(kNvmlLibrary), std::string::npos) << nvml.error();
    }
  }
}

TEST(DeviceInventory, CpuEntryMatchesTheEnvironment) {
  const Environment env = capture_environment("test");
  const DeviceInventory inv = inventory();
  EXPECT_EQ(inv.cpu.model, env.host.cpu_model);
  EXPECT_EQ(inv.cpu.logical_cores, env.host.logical_cores);
  EXPECT_EQ(inv.cpu.usable_cores, env.host.usable_cores);
  EXPECT_EQ(inv.cpu.memory_bytes, env.host.memory_bytes);
  EXPECT_EQ(inv.cpu.onednn, env.libraries.onednn);
  EXPECT_EQ(inv.cpu.gloo, env.libraries.gloo);
  EXPECT_NE(inv.cpu.meaning.find("cpu:N"), std::string::npos);
  EXPECT_EQ(inv.libraries, env.libraries);
  EXPECT_EQ(inv.gpus.size(), env.gpus.size());
  EXPECT_EQ(inv.gpu_error, env.gpu_error);
}

TEST(DeviceInventory, WithoutGpusSaysWhy) {
  const DeviceInventory inv = inventory();
  if (!inv.gpus.empty()) GTEST_SKIP() << "this machine has GPUs";
  EXPECT_FALSE(inv.gpu_error.empty());
  EXPECT_TRUE(inv.peer_access.empty());
  if (!nvml_installed()) {
    EXPECT_FALSE(inv.nvml_loaded);
    EXPECT_NE(inv.nvml_error.find("not loaded"), std::string::npos) << inv.nvml_error;
    EXPECT_NE(inv.nvml_error.find(kNvmlLibrary), std::string::npos) << inv.nvml_error;
  }
}

TEST(DeviceInventory, MissingNvmlStillListsEverything) {
  const DeviceInventory inv = inventory("/nonexistent/libnvidia-ml.so.1");
  EXPECT_FALSE(inv.nvml_loaded);
  EXPECT_NE(inv.nvml_error.find("/nonexistent/libnvidia-ml.so.1"), std::string::npos);
  EXPECT_TRUE(inv.nvml_driver_version.empty());
  EXPECT_GT(inv.cpu.usable_cores, 0);
  for (const GpuDevice& g : inv.gpus) {
    EXPECT_TRUE(g.nvlinks.empty());
    EXPECT_FALSE(g.nvlink_error.empty());
  }
}

TEST(DeviceInventory, JsonHasEveryFact) {
  const nlohmann::json j = to_json(inventory("/nonexistent/libnvidia-ml.so.1"));
  for (const char* key :
       {"cpu", "gpus", "gpu_error", "peer_access", "peer_error", "nvml", "versions"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["nvml"]["loaded"], false);
  EXPECT_TRUE(j["nvml"]["error"].is_string());
  EXPECT_EQ(j["cpu"]["device"], "cpu");
  for (const char* key :
       {"driver", "cuda_driver", "cuda_runtime", "cudnn", "nccl", "cublas", "onednn", "gloo"}) {
    EXPECT_TRUE(j["versions"].contains(key)) << key;
  }
}

// Each device kind's precisions as `--precision` takes them: the CPU's default fp32 first, bf16
// where oneDNN has kernels for this CPU and refused naming why elsewhere, never tf32 or fp16;
// `sim` adds fp16, emulated.
TEST(DeviceInventory, SaysWhichPrecisionsEachDeviceKindComputes) {
  const DeviceInventory inv = inventory("/nonexistent/libnvidia-ml.so.1");
  const auto has = [](const std::vector<std::string>& names, const std::string& name) {
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  const auto refused = [](const PrecisionSupport& s) {
    return std::map<std::string, std::string>(s.refused.begin(), s.refused.end());
  };
  const std::string bf16_refusal = testing_util::cpu_bf16_refusal();
  for (const PrecisionSupport* s : {&inv.cpu.precisions, &inv.sim_precisions}) {
    ASSERT_FALSE(s->computes.empty());
    EXPECT_EQ(s->computes.front(), "fp32");
    EXPECT_EQ(refused(*s).at("tf32"), "TF32 is a format of GPU tensor cores");
    EXPECT_EQ(has(s->computes, "bf16"), bf16_refusal.empty());
    if (!bf16_refusal.empty()) {
      EXPECT_EQ(refused(*s).at("bf16"), bf16_refusal);
    }
    EXPECT_EQ(s->computes.size() + s->refused.size(), precision_names().size());
  }
  EXPECT_EQ(refused(inv.cpu.precisions).at("fp16"), "oneDNN 2.6 has no fp16 kernels for CPUs");
  EXPECT_TRUE(has(inv.sim_precisions.computes, "fp16"));
  const nlohmann::json j = to_json(inv);
  EXPECT_EQ(j["cpu"]["precisions"]["computes"][0], "fp32");
  EXPECT_TRUE(j["sim"]["precisions"]["refused"].contains("tf32"));
}

// A GPU a run would refuse says so in the listing (`devices` prints the reason under the table):
// before Ampere whatever the build; an H100 or H200 never with this build.
TEST(DeviceInventory, SaysWhichGpusARunWouldRefuse) {
  EXPECT_TRUE(unusable_gpu_reason("7.5").starts_with(
      "scalescope's GPU kernels need compute capability 8.0 or later"))
      << unusable_gpu_reason("7.5");
  EXPECT_EQ(unusable_gpu_reason("9.0"), "");
  EXPECT_EQ(unusable_gpu_reason("unknown"), "");
  DeviceInventory inv;
  inv.gpus.emplace_back().info.compute_capability = "7.5";
  inv.gpus.back().unusable = unusable_gpu_reason("7.5");
  inv.gpus.emplace_back().info.compute_capability = "9.0";
  const nlohmann::json j = to_json(inv);
  EXPECT_EQ(j["gpus"][0]["unusable"], inv.gpus[0].unusable);
  EXPECT_TRUE(j["gpus"][1]["unusable"].is_null());
}

// A simulated device with a 200 MB/s host link: no copy can cross it faster, so a measurement
// in the wrong unit or of the wrong size shows as a rate above it.
TEST(HostLink, MeasuresEveryDirectionAndKindOfMemoryAtTheLinksRate) {
  SimDevice device(0, 1, 0, 1);
  device.make_current();
  device.set_link_bytes_per_second(200'000'000);
  const HostLinkBandwidth b = measure_host_link(device, 2'000'000, 3);
  ASSERT_TRUE(b.error.empty()) << b.error;
  EXPECT_EQ(b.bytes, 2'000'000u);
  EXPECT_EQ(b.repeats, 3);
  for (const double gbps :
       {b.h2d_pinned_gbps, b.h2d_pageable_gbps, b.d2h_pinned_gbps, b.d2h_pageable_gbps}) {
    EXPECT_GT(gbps, 0.0);
    EXPECT_LE(gbps, 0.2);
  }
  const nlohmann::json j = to_json(b);
  EXPECT_EQ(j["bytes"], 2'000'000);
  EXPECT_DOUBLE_EQ(j["h2d_pageable_gbps"].get<double>(), b.h2d_pageable_gbps);
}

TEST(HostLink, AFailedMeasurementSaysWhy) {
  SimDevice device(0, 1, 0, 1);
  device.make_current();
  device.set_memory_limit(1024);  // less than one copy's buffer
  const HostLinkBandwidth b = measure_host_link(device, 1 << 20, 1);
  EXPECT_NE(b.error.find("out of memory"), std::string::npos) << b.error;
  EXPECT_EQ(b.h2d_pinned_gbps, 0.0);
  EXPECT_EQ(to_json(b)["error"], b.error);
}

}  // namespace
}  // namespace scalescope
