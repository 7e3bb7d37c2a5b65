#include "harness/telemetry/environment.h"

#include <gtest/gtest.h>
#include <oneapi/dnnl/dnnl.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <thread>

#include "core/backend.h"

namespace scalescope {
namespace {

// The first "model name" of /proc/cpuinfo, read independently of the code under test.
std::string first_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  const std::regex re(R"(^model name\s*:\s*(.*?)\s*$)");
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_match(line, m, re)) return m[1];
  }
  return "unknown";
}

TEST(CaptureEnvironment, DescribesThisHost) {
  const Environment env = capture_environment("scalescope train --steps 3");
  EXPECT_EQ(env.command_line, "scalescope train --steps 3");
  EXPECT_TRUE(std::regex_match(env.captured_at, std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)")))
      << env.captured_at;

  std::array<char, 256> name{};
  ASSERT_EQ(gethostname(name.data(), name.size() - 1), 0);
  EXPECT_FALSE(env.host.hostname.empty());
  EXPECT_EQ(env.host.hostname, name.data());

  EXPECT_GE(env.host.logical_cores, 1);
  EXPECT_EQ(env.host.logical_cores, static_cast<int>(std::thread::hardware_concurrency()));
  EXPECT_GE(env.host.usable_cores, 1);
  EXPECT_LE(env.host.usable_cores, env.host.logical_cores);
  EXPECT_GT(env.host.memory_bytes, 0);
  EXPECT_EQ(env.host.cpu_model, first_model_name());
  EXPECT_FALSE(env.host.os.empty());
  EXPECT_FALSE(env.host.kernel.empty());
  EXPECT_FALSE(env.host.arch.empty());
}

TEST(CaptureEnvironment, RecordsLibraryVersions) {
  const Environment env = capture_environment("");
  const dnnl_version_t* v = dnnl_version();
  const std::string onednn =
      std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
  EXPECT_TRUE(env.libraries.onednn == onednn || env.libraries.onednn.starts_with(onednn + " ("))
      << env.libraries.onednn << " vs " << onednn;
  EXPECT_FALSE(env.libraries.gloo.empty());
  EXPECT_FALSE(env.libraries.openmp.empty());
  if (SCALESCOPE_WITH_CUDA != 0) {
    const std::regex dotted(R"(\d+\.\d+(\.\d+)?)");
    for (const std::string& s :
         {env.libraries.cuda_runtime, env.libraries.cudnn, env.libraries.nccl}) {
      EXPECT_TRUE(std::regex_match(s, dotted)) << "'" << s << "'";
    }
    // cuBLAS's: the loaded library's, or before this process loaded it its headers'.
    EXPECT_TRUE(std::regex_match(env.libraries.cublas,
                                 std::regex(R"(\d+\.\d+\.\d+( \(headers; not loaded\))?)")))
        << "'" << env.libraries.cublas << "'";
    EXPECT_FALSE(env.libraries.cuda_driver.empty());
  } else {
    for (const std::string& s : {env.libraries.cuda_driver, env.libraries.cuda_runtime,
                                 env.libraries.cudnn, env.libraries.nccl, env.libraries.cublas}) {
      EXPECT_TRUE(s.empty()) << "'" << s << "'";
    }
  }
}

TEST(CaptureEnvironment, RecordsBuild) {
  const Environment env = capture_environment("");
  EXPECT_TRUE(env.build.git_commit == "unknown" ||
              std::regex_match(env.build.git_commit, std::regex("[0-9a-f]{40}")))
      << env.build.git_commit;
  if (env.build.git_commit == "unknown") {
    EXPECT_FALSE(env.build.git_dirty);
  }
  EXPECT_FALSE(env.build.scalescope_version.empty());
  EXPECT_FALSE(env.build.compiler.empty());
  EXPECT_FALSE(env.build.build_type.empty());
  EXPECT_EQ(env.build.with_cuda, SCALESCOPE_WITH_CUDA != 0);
  if (!env.build.with_cuda) {
    EXPECT_EQ(env.build.cuda_architectures, "none");
  }
}

TEST(CaptureEnvironment, KeepsOnlyAllowlistedVariables) {
  ASSERT_EQ(setenv("NCCL_DEBUG", "WARN", 1), 0);
  ASSERT_EQ(setenv("SECRET_TOKEN", "hunter2", 1), 0);
  ASSERT_EQ(setenv("SCALESCOPE_UPLOAD_TOKEN", "hunter2", 1), 0);
  const Environment env = capture_environment("");
  unsetenv("NCCL_DEBUG");
  unsetenv("SECRET_TOKEN");
  unsetenv("SCALESCOPE_UPLOAD_TOKEN");

  ASSERT_TRUE(env.env_vars.contains("NCCL_DEBUG"));
  EXPECT_EQ(env.env_vars.at("NCCL_DEBUG"), "WARN");
  EXPECT_FALSE(env.env_vars.contains("SECRET_TOKEN"));
  EXPECT_FALSE(env.env_vars.contains("SCALESCOPE_UPLOAD_TOKEN"));
  for (const auto& [name, value] : env.env_vars) {
    EXPECT_TRUE(is_allowlisted_env_var(name)) << name;
    EXPECT_EQ(value.find("hunter2"), std::string::npos) << name;
  }
  EXPECT_FALSE(env.env_vars.contains("PATH"));
  EXPECT_FALSE(env.env_vars.contains("HOME"));

  EXPECT_TRUE(is_allowlisted_env_var("CUDA_VISIBLE_DEVICES"));
  EXPECT_TRUE(is_allowlisted_env_var("OMP_NUM_THREADS"));
  EXPECT_TRUE(is_allowlisted_env_var("SLURM_JOB_ID"));
  EXPECT_FALSE(is_allowlisted_env_var("SLURM_JOB_NAME"));
  EXPECT_FALSE(is_allowlisted_env_var("NCCL_"));
  EXPECT_FALSE(is_allowlisted_env_var("AWS_SECRET_ACCESS_KEY"));
}

TEST(CaptureEnvironment, NoGpuIsRecordedNotThrown) {
  const Backend* cuda = find_backend(DeviceKind::kCuda);
  if (cuda == nullptr) {
    const Environment env = capture_environment("");
    EXPECT_TRUE(env.gpus.empty());
    EXPECT_EQ(env.gpu_error, missing_backend_message(DeviceKind::kCuda));
    return;
  }
  const int count = cuda->device_count();
  if (count > 0) {
    const Environment env = capture_environment("");
    EXPECT_EQ(static_cast<int>(env.gpus.size()), count);
    EXPECT_EQ(env.gpu_error, "");
    const std::regex uuid("GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}");
    for (const GpuInfo& g : env.gpus) {
      EXPECT_TRUE(std::regex_match(g.uuid, uuid)) << g.uuid;
      EXPECT_FALSE(g.name.empty());
      EXPECT_FALSE(g.pci_bus_id.empty());
      EXPECT_GT(g.memory_bytes, 0);
      EXPECT_GT(g.sm_count, 0);
    }
    GTEST_SKIP() << "a GPU is present; the no-GPU path is not exercised";
  }
  const Environment env = capture_environment("");
  EXPECT_TRUE(env.gpus.empty());
  EXPECT_FALSE(env.gpu_error.empty());
}

}  // namespace
}  // namespace scalescope
