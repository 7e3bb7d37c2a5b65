#include <fmt/format.h>

#include <memory>
#include <string>

#include "harness/cli/commands.h"
#include "harness/telemetry/devices.h"

namespace scalescope::cli {
namespace {

std::string gib(int64_t bytes) {
  return fmt::format("{:.1f} GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
}

std::string or_unknown(const std::string& s) {
  return s.empty() ? "unknown" : s;
}

std::string nvlink_text(const GpuDevice& g) {
  if (!g.nvlink_error.empty()) return "unknown";
  if (g.nvlinks.empty()) return "none";
  int active = 0;
  for (const NvLinkState& l : g.nvlinks) active += l.active ? 1 : 0;
  return fmt::format("{}/{} links active", active, g.nvlinks.size());
}

void print_gpus(const DeviceInventory& inv) {
  fmt::print("\nGPUs\n");
  if (inv.gpus.empty()) {
    // The one line that says everything that is missing, CUDA's and NVML's reasons both.
    fmt::print("  no GPU: {}; NVML: {}\n", or_unknown(inv.gpu_error),
               inv.nvml_loaded
                   ? fmt::format("loaded (driver {})", or_unknown(inv.nvml_driver_version))
                   : inv.nvml_error);
    return;
  }
  fmt::print("  {:<7} {:<28} {:>10} {:>4} {:>4}  {:<13} {}\n", "device", "name", "memory", "SMs",
             "CC", "PCI bus id", "NVLink");
  for (const GpuDevice& g : inv.gpus) {
    fmt::print("  {:<7} {:<28} {:>10} {:>4} {:>4}  {:<13} {}\n",
               fmt::format("cuda:{}", g.info.index), g.info.name, gib(g.info.memory_bytes),
               g.info.sm_count, g.info.compute_capability, g.info.pci_bus_id, nvlink_text(g));
  }
  if (!inv.gpu_error.empty()) fmt::print("  incomplete: {}\n", inv.gpu_error);
  if (!inv.nvml_loaded) {
    fmt::print("  NVML: {} (NVLink state and driver version unknown)\n", inv.nvml_error);
  } else {
    for (const GpuDevice& g : inv.gpus) {
      if (!g.nvlink_error.empty())
        fmt::print("  cuda:{} NVLink: {}\n", g.info.index, g.nvlink_error);
    }
  }

  if (inv.gpus.size() < 2) return;
  fmt::print("\nPeer access (cudaDeviceCanAccessPeer: row reads/writes column's memory)\n");
  if (inv.peer_access.empty()) {
    fmt::print("  unknown: {}\n", or_unknown(inv.peer_error));
    return;
  }
  fmt::print("  {:<7}", "");
  for (const GpuDevice& g : inv.gpus) fmt::print(" {:>7}", fmt::format("cuda:{}", g.info.index));
  fmt::print("\n");
  for (size_t i = 0; i < inv.gpus.size(); ++i) {
    fmt::print("  {:<7}", fmt::format("cuda:{}", inv.gpus[i].info.index));
    for (size_t j = 0; j < inv.gpus.size(); ++j) {
      fmt::print(" {:>7}", i == j ? "-" : inv.peer_access[i][j] ? "yes" : "no");
    }
    fmt::print("\n");
  }
}

int run_devices(bool as_json) {
  const DeviceInventory inv = inventory();
  if (as_json) {
    fmt::print("{}\n", to_json(inv).dump(2));
    return 0;
  }
  fmt::print("CPU\n");
  fmt::print("  cpu     {}\n", inv.cpu.model);
  fmt::print("          {} of {} logical cores usable, {} memory\n", inv.cpu.usable_cores,
             inv.cpu.logical_cores, gib(inv.cpu.memory_bytes));
  fmt::print("          {}\n", inv.cpu.meaning);
  fmt::print("\nSimulated accelerators\n");
  fmt::print("  sim     {}{}\n", inv.sim_meaning,
             inv.sim_jitter_us > 0 ? fmt::format(" (now: up to {} us)", inv.sim_jitter_us) : "");
  print_gpus(inv);

  const LibraryVersions& lib = inv.libraries;
  fmt::print("\nVersions\n");
  fmt::print("  {:<13} {}\n", "driver",
             inv.nvml_loaded ? or_unknown(inv.nvml_driver_version) : "unknown (NVML not loaded)");
  fmt::print("  {:<13} {}\n", "CUDA driver", or_unknown(lib.cuda_driver));
  fmt::print("  {:<13} {}\n", "CUDA runtime", or_unknown(lib.cuda_runtime));
  fmt::print("  {:<13} {}\n", "cuDNN", or_unknown(lib.cudnn));
  fmt::print("  {:<13} {}\n", "NCCL", or_unknown(lib.nccl));
  fmt::print("  {:<13} {}\n", "cuBLAS", or_unknown(lib.cublas));
  fmt::print("  {:<13} {}\n", "oneDNN", lib.onednn);
  fmt::print("  {:<13} {}\n", "Gloo", lib.gloo);
  fmt::print("  {:<13} {}\n", "OpenMP", lib.openmp);
  return 0;
}

}  // namespace

void add_devices_command(CLI::App& app, Action& action) {
  CLI::App* cmd = app.add_subcommand(
      "devices", "List the CPU and GPU devices, GPU peer access and NVLink, and library versions");
  auto as_json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *as_json, "Print JSON instead of text");
  cmd->callback([&action, as_json] { action = [as_json] { return run_devices(*as_json); }; });
}

}  // namespace scalescope::cli
