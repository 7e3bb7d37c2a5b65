#include <fmt/format.h>
#include <fmt/ranges.h>

#include <memory>
#include <string>
#include <vector>

#include "core/units.h"
#include "harness/cli/commands.h"
#include "harness/cli/option_app.h"
#include "harness/telemetry/devices.h"
#include "reports/json_reader.h"

namespace scalescope::cli {
namespace {

constexpr int kLinkRepeats = 5;

struct DevicesArgs {
  bool json = false;
  double bandwidth_mb = 64;
  OptionList list;  // the declarations of the above
};

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

void print_host_links(const DeviceInventory& inv) {
  if (inv.gpus.empty() || !inv.gpus.front().host_link) return;
  const HostLinkBandwidth& first = *inv.gpus.front().host_link;
  fmt::print("\nHost link (GB/s, copies of {} MiB on the copy stream, median of {})\n",
             first.bytes >> 20, first.repeats);
  fmt::print("  {:<7} {:>14} {:>14} {:>14} {:>14}\n", "device", "to GPU pinned", "to GPU pageable",
             "from GPU pinned", "from GPU pageable");
  for (const GpuDevice& g : inv.gpus) {
    const HostLinkBandwidth& b = *g.host_link;
    const std::string name = fmt::format("GPU {}", g.info.index);
    if (!b.error.empty()) {
      fmt::print("  {:<7} not measured: {}\n", name, b.error);
      continue;
    }
    fmt::print("  {:<7} {:>14.1f} {:>15.1f} {:>15.1f} {:>17.1f}\n", name, b.h2d_pinned_gbps,
               b.h2d_pageable_gbps, b.d2h_pinned_gbps, b.d2h_pageable_gbps);
  }
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
               fmt::format("GPU {}", g.info.index), g.info.name, gib(g.info.memory_bytes),
               g.info.sm_count, g.info.compute_capability, g.info.pci_bus_id, nvlink_text(g));
  }
  fmt::print(
      "  cuda:N runs N replicas on the first N of these, NCCL between them "
      "(CUDA_VISIBLE_DEVICES chooses which GPUs are visible, and their order)\n");
  for (const GpuDevice& g : inv.gpus) {
    if (!g.unusable.empty()) fmt::print("  GPU {} cannot run here: {}\n", g.info.index, g.unusable);
  }
  if (!inv.gpu_error.empty()) fmt::print("  incomplete: {}\n", inv.gpu_error);
  if (!inv.nvml_loaded) {
    fmt::print("  NVML: {} (NVLink state and driver version unknown)\n", inv.nvml_error);
  } else {
    for (const GpuDevice& g : inv.gpus) {
      if (!g.nvlink_error.empty())
        fmt::print("  GPU {} NVLink: {}\n", g.info.index, g.nvlink_error);
    }
  }

  print_host_links(inv);
  if (inv.gpus.size() < 2) return;
  fmt::print("\nPeer access (cudaDeviceCanAccessPeer: row reads/writes column's memory)\n");
  if (inv.peer_access.empty()) {
    fmt::print("  unknown: {}\n", or_unknown(inv.peer_error));
    return;
  }
  fmt::print("  {:<7}", "");
  for (const GpuDevice& g : inv.gpus) fmt::print(" {:>7}", fmt::format("GPU {}", g.info.index));
  fmt::print("\n");
  for (size_t i = 0; i < inv.gpus.size(); ++i) {
    fmt::print("  {:<7}", fmt::format("GPU {}", inv.gpus[i].info.index));
    for (size_t j = 0; j < inv.gpus.size(); ++j) {
      fmt::print(" {:>7}", i == j ? "-" : inv.peer_access[i][j] ? "yes" : "no");
    }
    fmt::print("\n");
  }
}

// "precisions fp32, bf16 (not tf32: why; not fp16: why)".
std::string precisions_text(const PrecisionSupport& s) {
  std::vector<std::string> refused;
  for (const auto& [name, why] : s.refused) {
    refused.push_back(why.empty() ? "not " + name : fmt::format("not {}: {}", name, why));
  }
  std::string text = fmt::format("precisions {}", fmt::join(s.computes, ", "));
  if (!refused.empty()) text += fmt::format(" ({})", fmt::join(refused, "; "));
  return text;
}

int run_devices(bool as_json, double bandwidth_mb) {
  DeviceInventory inv = inventory();
  if (bandwidth_mb > 0.0) {
    measure_host_links(inv, static_cast<size_t>(mib_to_bytes(bandwidth_mb)), kLinkRepeats);
  }
  if (as_json) {
    fmt::print("{}\n", dump_json(to_json(inv), 2));
    return 0;
  }
  fmt::print("CPU\n");
  fmt::print("  cpu     {}\n", inv.cpu.model);
  fmt::print("          {} of {} logical cores usable, {} memory\n", inv.cpu.usable_cores,
             inv.cpu.logical_cores, gib(inv.cpu.memory_bytes));
  fmt::print("          {}\n", inv.cpu.meaning);
  fmt::print("          {}\n", precisions_text(inv.cpu.precisions));
  fmt::print("\nSimulated accelerators\n");
  fmt::print("  sim     {}{}\n", inv.sim_meaning,
             inv.sim_jitter_us > 0 ? fmt::format(" (now: up to {} us)", inv.sim_jitter_us) : "");
  fmt::print("          {}\n", precisions_text(inv.sim_precisions));
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
  auto args = std::make_shared<DevicesArgs>();
  OptionList& list = args->list;
  list.add("--json", args->json, "Print JSON instead of text");
  list.add("--bandwidth-mb", args->bandwidth_mb,
           "Measure each GPU's host link with copies of this many MiB, from pinned and from "
           "pageable memory (0: do not measure)",
           mib_size(true, "must be 0 (do not measure) or a positive size"));
  CLI::App* cmd = app.add_subcommand(
      "devices",
      "List the CPU and GPU devices, GPU peer access, NVLink and host-link bandwidth, and "
      "library versions");
  add_options(*cmd, list);
  cmd->callback([&action, args, cmd] {
    action = [args, cmd] {
      (void)settle_options(*cmd, args->list);
      return run_devices(args->json, args->bandwidth_mb);
    };
  });
}

}  // namespace scalescope::cli
