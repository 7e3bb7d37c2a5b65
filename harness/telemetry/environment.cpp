#include "harness/telemetry/environment.h"

#include <fmt/format.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <array>
#include <climits>
#include <ctime>
#include <fstream>
#include <string_view>

#include "core/backend.h"
#include "core/build_info.h"
#include "core/check.h"
#include "core/cpu_affinity.h"
#include "harness/collectives/collective_backends.h"
#include "models/kernels.h"

extern char** environ;

namespace scalescope {
namespace {

constexpr const char* kUnknown = "unknown";

std::string trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(first, last - first + 1));
}

// The value of the first "key : value" line of a /proc file (cpuinfo, meminfo), or "".
std::string proc_field(const char* path, std::string_view key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    if (trim(std::string_view(line).substr(0, colon)) == key) return trim(line.substr(colon + 1));
  }
  return {};
}

// PRETTY_NAME of os-release(5): the standard file, then the fallback it names.
std::string os_pretty_name() {
  for (const char* path : {"/etc/os-release", "/usr/lib/os-release"}) {
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
      constexpr std::string_view kKey = "PRETTY_NAME=";
      if (!line.starts_with(kKey)) continue;
      std::string value = trim(std::string_view(line).substr(kKey.size()));
      if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') &&
          value.back() == value.front()) {
        value = value.substr(1, value.size() - 2);
      }
      if (!value.empty()) return value;
    }
  }
  return kUnknown;
}

HostInfo capture_host() {
  HostInfo h;
  std::array<char, HOST_NAME_MAX + 1> name{};
  if (gethostname(name.data(), name.size() - 1) == 0) h.hostname = name.data();
  if (h.hostname.empty()) h.hostname = kUnknown;

  h.cpu_model = proc_field("/proc/cpuinfo", "model name");
  if (h.cpu_model.empty()) h.cpu_model = kUnknown;  // e.g. many ARM kernels print none

  // What std::thread::hardware_concurrency() reports: CPUs online, whatever the affinity.
  h.logical_cores = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  // A job scheduler or taskset may confine us to fewer; replicas' threads share those.
  h.usable_cores = usable_core_count();

  // "MemTotal:  131072000 kB"
  const std::string mem = proc_field("/proc/meminfo", "MemTotal");
  try {
    h.memory_bytes = std::stoll(mem) * 1024;
  } catch (const std::exception&) {
    const long pages = sysconf(_SC_PHYS_PAGES);
    const long page_size = sysconf(_SC_PAGESIZE);
    h.memory_bytes = pages > 0 && page_size > 0 ? int64_t{pages} * page_size : 0;
  }

  h.os = os_pretty_name();
  utsname u{};
  if (uname(&u) == 0) {
    h.kernel = u.release;
    h.arch = u.machine;
  } else {
    h.kernel = h.arch = kUnknown;
  }
  return h;
}

std::string utc_now_iso8601() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  std::array<char, 32> text{};
  std::strftime(text.data(), text.size(), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text.data();
}

// The report's field for a library that a registry names.
void set_library(LibraryVersions& lib, const LibraryVersion& v) {
  static constexpr std::array<std::pair<std::string_view, std::string LibraryVersions::*>, 8>
      kFields{{{"cuda_driver", &LibraryVersions::cuda_driver},
               {"cuda_runtime", &LibraryVersions::cuda_runtime},
               {"cudnn", &LibraryVersions::cudnn},
               {"nccl", &LibraryVersions::nccl},
               {"cublas", &LibraryVersions::cublas},
               {"onednn", &LibraryVersions::onednn},
               {"gloo", &LibraryVersions::gloo},
               {"openmp", &LibraryVersions::openmp}}};
  for (const auto& [name, field] : kFields) {
    if (name == v.name) {
      lib.*field = v.version;
      return;
    }
  }
  throw_error(
      fmt::format("a backend names the library '{}', which reports have no field for", v.name));
}

template <typename Entries>
void add_libraries(LibraryVersions& lib, const Entries& registered) {
  for (const auto* entry : registered) {
    for (const LibraryVersion& v : entry->library_versions()) set_library(lib, v);
  }
}

// What the backends of this build run on: its devices', kernels' and collectives'
// libraries. A library several backends share (Gloo) has the same version in each.
LibraryVersions capture_libraries() {
  LibraryVersions lib;
  add_libraries(lib, backends());
  add_libraries(lib, kernel_backends());
  add_libraries(lib, collective_backends());
  return lib;
}

// The GPUs are the CUDA backend's devices.
void capture_gpus(Environment& env) {
  const Backend* cuda = find_backend(DeviceKind::kCuda);
  if (cuda == nullptr) {
    env.gpu_error = missing_backend_message(DeviceKind::kCuda);
    return;
  }
  DeviceSurvey survey = cuda->survey();
  env.gpus = std::move(survey.devices);
  env.gpu_error = std::move(survey.error);
}

BuildInfo capture_build() {
  BuildInfo b;
  b.scalescope_version = build_info::kScalescopeVersion;
  b.compiler = build_info::kCompiler;
  b.build_type = *build_info::kBuildType != '\0' ? build_info::kBuildType : "none";
  b.with_cuda = find_backend(DeviceKind::kCuda) != nullptr;
  b.cuda_architectures = build_info::kCudaArchitectures;
  b.git_commit = build_info::kGitCommit;
  b.git_dirty = build_info::kGitDirty;
  return b;
}

}  // namespace

bool is_allowlisted_env_var(const std::string& name) {
  static constexpr std::array<std::string_view, 6> kPrefixes{"NCCL_", "OMP_",  "ONEDNN_",
                                                             "DNNL_", "GLOO_", "SCALESCOPE_"};
  static constexpr std::array<std::string_view, 3> kNames{"CUDA_VISIBLE_DEVICES", "SLURM_JOB_ID",
                                                          "OMPI_COMM_WORLD_SIZE"};
  for (const std::string_view n : kNames) {
    if (name == n) return true;
  }
  // A prefix admits names nobody reviewed (SCALESCOPE_UPLOAD_TOKEN): keep out any that
  // look like they hold a credential.
  for (const std::string_view word : {"TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL"}) {
    if (name.find(word) != std::string::npos) return false;
  }
  for (const std::string_view p : kPrefixes) {
    if (name.size() > p.size() && name.starts_with(p)) return true;
  }
  return false;
}

Environment capture_environment(const std::string& command_line) {
  Environment env;
  env.captured_at = utc_now_iso8601();
  env.command_line = command_line;
  env.host = capture_host();
  env.libraries = capture_libraries();
  capture_gpus(env);
  env.build = capture_build();
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const auto eq = entry.find('=');
    if (eq == std::string_view::npos) continue;
    std::string name(entry.substr(0, eq));
    if (is_allowlisted_env_var(name)) env.env_vars[name] = std::string(entry.substr(eq + 1));
  }
  return env;
}

}  // namespace scalescope
