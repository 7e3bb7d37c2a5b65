// What `scalescope devices` shows: every device this machine offers the trainer, how the
// GPUs reach each other (peer access, NVLink) and the library versions that run them.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "harness/telemetry/host_link.h"
#include "harness/telemetry/nvml.h"
#include "reports/environment.h"

namespace scalescope {

// What a device kind's kernels compute in (`--precision`), and why not the rest.
struct PrecisionSupport {
  std::vector<std::string> computes;                         // the default first
  std::vector<std::pair<std::string, std::string>> refused;  // precision, why
};

struct CpuSummary {
  std::string model;
  int logical_cores = 0;
  int usable_cores = 0;  // in this process's affinity mask: what cpu:N replicas share
  int64_t memory_bytes = 0;
  std::string onednn;
  std::string gloo;
  std::string openmp;
  std::string meaning;  // what `--devices cpu:N` runs
  PrecisionSupport precisions;
};

struct GpuDevice {
  GpuInfo info;                      // as capture_environment reads it
  std::vector<NvLinkState> nvlinks;  // empty: no NVLink, or nvlink_error says why unknown
  std::string nvlink_error;
  std::optional<HostLinkBandwidth> host_link;  // measure_host_links; none: not measured
  std::string unusable;  // why a run refuses to open it (core/cuda_architectures.h); "" none
};

struct DeviceInventory {
  CpuSummary cpu;
  // What `--devices sim:N` runs (simulated accelerators), and chaos mode's delay now.
  std::string sim_meaning;
  int64_t sim_jitter_us = 0;
  PrecisionSupport sim_precisions;
  std::vector<GpuDevice> gpus;
  // Why `gpus` is empty or incomplete (CUDA's reason, or missing_backend_message when this
  // build lacks the CUDA backend).
  std::string gpu_error;
  // peer_access[i][j]: GPU i can read and write GPU j's memory directly
  // (cudaDeviceCanAccessPeer); the diagonal is true. Empty with fewer than two GPUs.
  std::vector<std::vector<bool>> peer_access;
  std::string peer_error;  // why peer_access is missing although there are GPUs
  LibraryVersions libraries;
  bool nvml_loaded = false;
  std::string nvml_driver_version;  // e.g. "580.65.06"; empty when NVML could not say
  std::string nvml_error;           // why NVML is not loaded, or why it could not say
};

// Why a run refuses to open a GPU of compute capability `capability` ("9.0"), as
// CudaBackend::open does (core/cuda_architectures.h); "" where it opens it or cannot tell.
std::string unusable_gpu_reason(const std::string& capability);

// Never throws for a missing GPU, driver or NVML: the *_error fields say what is missing.
// Creates no CUDA context. `nvml_library` is for tests (a path that does not exist).
DeviceInventory inventory(const std::string& nvml_library = kNvmlLibrary);

// Measures every GPU's host link (copies of `bytes`, `repeats` times each way and kind):
// creates a CUDA context on each. Never throws: a GPU that cannot be measured says why.
void measure_host_links(DeviceInventory& inv, size_t bytes, int repeats);

nlohmann::json to_json(const DeviceInventory& inv);

}  // namespace scalescope
