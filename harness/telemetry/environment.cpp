#include "harness/telemetry/environment.h"

#include <fmt/format.h>
#include <gloo/config.h>
#include <oneapi/dnnl/dnnl.h>
#include <sched.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <array>
#include <climits>
#include <ctime>
#include <fstream>
#include <string_view>

#if SCALESCOPE_WITH_CUDA
#include <cublas_api.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <nccl.h>
#endif

extern char** environ;

// Defined in the build_info.cpp that cmake/ScalescopeBuildInfo.cmake generates.
namespace scalescope::build_info {
extern const char* const kScalescopeVersion;
extern const char* const kCompiler;
extern const char* const kBuildType;
extern const char* const kCudaArchitectures;
extern const char* const kGitCommit;
extern const bool kGitDirty;
extern const char* const kGlooPackageVersion;
}  // namespace scalescope::build_info

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
  cpu_set_t set;
  CPU_ZERO(&set);
  h.usable_cores = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 0;
  if (h.usable_cores <= 0) h.usable_cores = h.logical_cores;

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

std::string openmp_version() {
#ifdef _OPENMP
  // _OPENMP is the release date of the specification the compiler implements.
  constexpr std::array<std::pair<int, const char*>, 9> kReleases{{{200505, "2.5"},
                                                                  {200805, "3.0"},
                                                                  {201107, "3.1"},
                                                                  {201307, "4.0"},
                                                                  {201511, "4.5"},
                                                                  {201811, "5.0"},
                                                                  {202011, "5.1"},
                                                                  {202111, "5.2"},
                                                                  {202411, "6.0"}}};
  for (const auto& [date, version] : kReleases) {
    if (date == _OPENMP) return fmt::format("{} ({})", version, _OPENMP);
  }
  return fmt::format("{}", _OPENMP);
#else
  return "none";
#endif
}

std::string onednn_version() {
  const dnnl_version_t* v = dnnl_version();
  std::string text = fmt::format("{}.{}.{}", v->major, v->minor, v->patch);
  // Distribution builds often have no hash ("N/A").
  if (v->hash != nullptr && *v->hash != '\0' && std::string_view(v->hash) != "N/A") {
    text += fmt::format(" ({})", v->hash);
  }
  return text;
}

std::string gloo_version() {
  // The header's version; the package version tells which snapshot of Gloo it really is.
  std::string text =
      fmt::format("{}.{}.{}", GLOO_VERSION_MAJOR, GLOO_VERSION_MINOR, GLOO_VERSION_PATCH);
  if (std::string_view(build_info::kGlooPackageVersion) != kUnknown) {
    text += fmt::format(" (libgloo-dev {})", build_info::kGlooPackageVersion);
  }
  return text;
}

#if SCALESCOPE_WITH_CUDA
std::string cuda_message(cudaError_t status) {
  return fmt::format("{} ({})", cudaGetErrorString(status), cudaGetErrorName(status));
}

// CUDA encodes versions as 1000 * major + 10 * minor.
std::string cuda_version_text(int v) {
  return fmt::format("{}.{}", v / 1000, (v % 1000) / 10);
}

// 16 bytes as nvidia-smi prints them: GPU-8-4-4-4-12 hex digits.
std::string uuid_text(const cudaUUID_t& uuid) {
  std::string text = "GPU-";
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) text += '-';
    text += fmt::format("{:02x}", static_cast<unsigned char>(uuid.bytes[i]));
  }
  return text;
}

// Appends one failure to gpu_error, so that several are all reported.
void note(std::string& error, const std::string& what) {
  if (!error.empty()) error += "; ";
  error += what;
}

void capture_cuda(Environment& env) {
  LibraryVersions& lib = env.libraries;
  // Without a driver these two still succeed: the driver version is then 0.
  int v = 0;
  if (cudaDriverGetVersion(&v) == cudaSuccess) {
    lib.cuda_driver = v > 0 ? cuda_version_text(v) : "none";
  } else {
    lib.cuda_driver = kUnknown;
  }
  lib.cuda_runtime = cudaRuntimeGetVersion(&v) == cudaSuccess ? cuda_version_text(v) : kUnknown;

  int major = 0, minor = 0, patch = 0;
  lib.cudnn = cudnnGetProperty(MAJOR_VERSION, &major) == CUDNN_STATUS_SUCCESS &&
                      cudnnGetProperty(MINOR_VERSION, &minor) == CUDNN_STATUS_SUCCESS &&
                      cudnnGetProperty(PATCH_LEVEL, &patch) == CUDNN_STATUS_SUCCESS
                  ? fmt::format("{}.{}.{}", major, minor, patch)
                  : kUnknown;
  lib.cublas = cublasGetProperty(MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS &&
                       cublasGetProperty(MINOR_VERSION, &minor) == CUBLAS_STATUS_SUCCESS &&
                       cublasGetProperty(PATCH_LEVEL, &patch) == CUBLAS_STATUS_SUCCESS
                   ? fmt::format("{}.{}.{}", major, minor, patch)
                   : kUnknown;
  // NCCL >= 2.9 encodes 10000 * major + 100 * minor + patch, older ones 1000 * major + ...
  if (ncclGetVersion(&v) == ncclSuccess) {
    lib.nccl = v >= 20900 ? fmt::format("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100)
                          : fmt::format("{}.{}.{}", v / 1000, (v % 1000) / 100, v % 100);
  } else {
    lib.nccl = kUnknown;
  }

  // None of the calls below creates a context: capturing must not take memory on the GPUs.
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    env.gpu_error = fmt::format("cudaGetDeviceCount failed: {}", cuda_message(status));
    // The failure stays sticky in the runtime's last error; later checks must not see it.
    (void)cudaGetLastError();
    return;
  }
  if (count == 0) {
    env.gpu_error = "no CUDA device visible";
    return;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    const cudaError_t s = cudaGetDeviceProperties(&prop, i);
    if (s != cudaSuccess) {
      note(env.gpu_error,
           fmt::format("cudaGetDeviceProperties({}) failed: {}", i, cuda_message(s)));
      (void)cudaGetLastError();
      continue;
    }
    GpuInfo g;
    g.index = i;
    g.name = prop.name;
    g.uuid = uuid_text(prop.uuid);
    std::array<char, 64> bus{};
    if (cudaDeviceGetPCIBusId(bus.data(), static_cast<int>(bus.size()), i) == cudaSuccess) {
      g.pci_bus_id = bus.data();
    } else {
      (void)cudaGetLastError();
      g.pci_bus_id =
          fmt::format("{:08X}:{:02X}:{:02X}.0", prop.pciDomainID, prop.pciBusID, prop.pciDeviceID);
    }
    g.memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
    g.compute_capability = fmt::format("{}.{}", prop.major, prop.minor);
    g.sm_count = prop.multiProcessorCount;
    env.gpus.push_back(std::move(g));
  }
}
#endif

BuildInfo capture_build() {
  BuildInfo b;
  b.scalescope_version = build_info::kScalescopeVersion;
  b.compiler = build_info::kCompiler;
  b.build_type = *build_info::kBuildType != '\0' ? build_info::kBuildType : "none";
  b.with_cuda = SCALESCOPE_WITH_CUDA != 0;
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
  env.libraries.onednn = onednn_version();
  env.libraries.gloo = gloo_version();
  env.libraries.openmp = openmp_version();
#if SCALESCOPE_WITH_CUDA
  capture_cuda(env);
#else
  env.gpu_error = "built without CUDA";
#endif
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
