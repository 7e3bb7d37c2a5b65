#include "harness/telemetry/devices.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>

#include "core/backend.h"
#include "core/build_info.h"
#include "core/cuda_architectures.h"
#include "core/sim/sim_device.h"
#include "harness/telemetry/environment.h"
#include "models/kernels.h"

namespace scalescope {
namespace {

// REQUIRES: inv.gpus are the CUDA backend's devices. Creates no context.
void read_peer_access(DeviceInventory& inv) {
  const Backend* cuda = find_backend(DeviceKind::kCuda);
  const size_t n = inv.gpus.size();
  if (cuda == nullptr || n < 2) return;
  std::vector<std::vector<bool>> matrix(n, std::vector<bool>(n, true));
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) {
      if (i == j) continue;  // CUDA refuses a device as its own peer
      const PeerAccess access = cuda->peer_access(inv.gpus[i].info.index, inv.gpus[j].info.index);
      if (!access.error.empty()) {
        inv.peer_error = access.error;
        return;
      }
      matrix[i][j] = access.possible;
    }
  }
  inv.peer_access = std::move(matrix);
}

std::string cpu_meaning(int usable_cores) {
  return fmt::format(
      "cpu:N runs N replicas as threads of this process on the {} usable cores (each with "
      "cores/N OpenMP threads for oneDNN unless --threads says otherwise); gradients are "
      "averaged through shared memory between the replicas (--cpu-collectives gloo: Gloo over "
      "TCP on loopback, as separate hosts would; across processes always Gloo)",
      usable_cores);
}

constexpr const char* kSimMeaning =
    "sim:N runs N simulated accelerators as threads of this process: the GPU code path (three "
    "streams per device as worker threads, events, the caching allocator, collectives enqueued "
    "on the communication stream) computing with the CPU kernels, to test and show that path "
    "without a GPU; their timings are CPU timings. SCALESCOPE_SIM_JITTER_US=N delays every "
    "enqueued operation by a seeded random 0..N us (chaos mode)";

// From the kernels that run `kind`: what options.cpp accepts and refuses for --precision.
PrecisionSupport precision_support(DeviceKind kind) {
  const KernelBackend& kernels = kernel_backend(kind);
  const std::vector<Precision> computes = kernels.precisions();
  PrecisionSupport s;
  for (const Precision p : computes) s.computes.push_back(to_string(p));
  for (const std::string& name : precision_names()) {
    const Precision p = parse_precision(name);
    if (std::find(computes.begin(), computes.end(), p) == computes.end()) {
      s.refused.emplace_back(name, kernels.precision_refusal(p));
    }
  }
  return s;
}

nlohmann::json to_json(const PrecisionSupport& s) {
  nlohmann::json refused = nlohmann::json::object();
  for (const auto& [name, why] : s.refused) refused[name] = why;
  return {{"computes", s.computes}, {"refused", refused}};
}

// Absent facts are null in JSON, so a reader cannot mistake "" for a version.
nlohmann::json or_null(const std::string& s) {
  return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s);
}

nlohmann::json links_json(const GpuDevice& g) {
  nlohmann::json links = nlohmann::json::array();
  for (const NvLinkState& l : g.nvlinks) links.push_back({{"link", l.link}, {"active", l.active}});
  return links;
}

}  // namespace

std::string unusable_gpu_reason(const std::string& capability) {
  int major = 0;
  int minor = 0;
  if (std::sscanf(capability.c_str(), "%d.%d", &major, &minor) != 2) return "";
  return cuda_code_mismatch(build_info::kCudaArchitectures, major, minor);
}

DeviceInventory inventory(const std::string& nvml_library) {
  const Environment env = capture_environment("scalescope devices");
  DeviceInventory inv;
  inv.cpu.model = env.host.cpu_model;
  inv.cpu.logical_cores = env.host.logical_cores;
  inv.cpu.usable_cores = env.host.usable_cores;
  inv.cpu.memory_bytes = env.host.memory_bytes;
  inv.cpu.onednn = env.libraries.onednn;
  inv.cpu.gloo = env.libraries.gloo;
  inv.cpu.openmp = env.libraries.openmp;
  inv.cpu.meaning = cpu_meaning(env.host.usable_cores);
  inv.cpu.precisions = precision_support(DeviceKind::kCpu);
  inv.sim_meaning = kSimMeaning;
  inv.sim_precisions = precision_support(DeviceKind::kSim);
  inv.sim_jitter_us = sim_jitter_from_environment();
  inv.libraries = env.libraries;
  inv.gpu_error = env.gpu_error;
  for (const GpuInfo& g : env.gpus) {
    GpuDevice& d = inv.gpus.emplace_back();
    d.info = g;
    d.unusable = unusable_gpu_reason(g.compute_capability);
  }
  read_peer_access(inv);

  // Scoped here: NVML is shut down before this returns, and no static keeps it.
  const Nvml nvml(nvml_library);
  inv.nvml_loaded = nvml.loaded();
  if (nvml.loaded()) {
    const NvmlResult<std::string> driver = nvml.driver_version();
    if (driver.ok()) {
      inv.nvml_driver_version = *driver.value;
    } else {
      inv.nvml_error = driver.error;
    }
    for (GpuDevice& g : inv.gpus) {
      NvmlResult<std::vector<NvLinkState>> links = nvml.nvlink_states(g.info.pci_bus_id);
      if (links.ok()) {
        g.nvlinks = std::move(*links.value);
      } else {
        g.nvlink_error = std::move(links.error);
      }
    }
  } else {
    inv.nvml_error = nvml.error();
    for (GpuDevice& g : inv.gpus) g.nvlink_error = "NVML " + nvml.error();
  }
  return inv;
}

void measure_host_links(DeviceInventory& inv, size_t bytes, int repeats) {
  for (GpuDevice& g : inv.gpus) {
    try {
      const std::unique_ptr<Device> device = backend(DeviceKind::kCuda).open(g.info.index, {});
      device->make_current();
      g.host_link = measure_host_link(*device, bytes, repeats);
    } catch (const Error& e) {
      g.host_link = HostLinkBandwidth{.bytes = bytes, .repeats = repeats, .error = e.what()};
    }
  }
}

nlohmann::json to_json(const DeviceInventory& inv) {
  nlohmann::json gpus = nlohmann::json::array();
  for (const GpuDevice& g : inv.gpus) {
    nlohmann::json nvlink = {{"links", links_json(g)}};
    nvlink["error"] = or_null(g.nvlink_error);
    gpus.push_back({{"index", g.info.index},
                    {"name", g.info.name},
                    {"uuid", g.info.uuid},
                    {"pci_bus_id", g.info.pci_bus_id},
                    {"memory_bytes", g.info.memory_bytes},
                    {"compute_capability", g.info.compute_capability},
                    {"sm_count", g.info.sm_count},
                    {"nvlink", nvlink},
                    {"unusable", or_null(g.unusable)}});
    if (g.host_link) gpus.back()["host_link"] = to_json(*g.host_link);
  }
  const LibraryVersions& lib = inv.libraries;
  return {{"cpu",
           {{"device", "cpu"},
            {"model", inv.cpu.model},
            {"logical_cores", inv.cpu.logical_cores},
            {"usable_cores", inv.cpu.usable_cores},
            {"memory_bytes", inv.cpu.memory_bytes},
            {"onednn", inv.cpu.onednn},
            {"gloo", inv.cpu.gloo},
            {"openmp", inv.cpu.openmp},
            {"meaning", inv.cpu.meaning},
            {"precisions", to_json(inv.cpu.precisions)}}},
          {"sim",
           {{"device", "sim"},
            {"jitter_us", inv.sim_jitter_us},
            {"meaning", inv.sim_meaning},
            {"precisions", to_json(inv.sim_precisions)}}},
          {"gpus", gpus},
          {"gpu_error", or_null(inv.gpu_error)},
          {"peer_access", inv.peer_access},
          {"peer_error", or_null(inv.peer_error)},
          {"nvml",
           {{"loaded", inv.nvml_loaded},
            {"driver_version", or_null(inv.nvml_driver_version)},
            {"error", or_null(inv.nvml_error)}}},
          {"versions",
           {{"driver", or_null(inv.nvml_driver_version)},
            {"cuda_driver", or_null(lib.cuda_driver)},
            {"cuda_runtime", or_null(lib.cuda_runtime)},
            {"cudnn", or_null(lib.cudnn)},
            {"nccl", or_null(lib.nccl)},
            {"cublas", or_null(lib.cublas)},
            {"onednn", lib.onednn},
            {"gloo", lib.gloo},
            {"openmp", lib.openmp}}}};
}

}  // namespace scalescope
