// The utilisation of this process's devices while a run measures its steps, for the devices
// telemetry can sample (GPUs, read through NVML by their PCI bus id); nothing is sampled,
// and nothing loaded, when no device has an id.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/device.h"
#include "harness/telemetry/nvml_sampler.h"

namespace scalescope {

class UtilizationSampling {
 public:
  // For `devices` devices of this process, each named by add() before start().
  explicit UtilizationSampling(int devices);
  ~UtilizationSampling();
  UtilizationSampling(const UtilizationSampling&) = delete;
  UtilizationSampling& operator=(const UtilizationSampling&) = delete;

  // Device `index` (0 <= index < devices) is `device`. Thread-safe.
  void add(int index, const Device& device);
  // Starts sampling the devices that have a PCI bus id (loading NVML takes a while: call it
  // outside timed work). Once; later calls do nothing. Thread-safe.
  void start();
  // Stops sampling; idempotent, never throws. Thread-safe.
  void stop() noexcept;
  // One summary per sampled device, in index order; empty when nothing was sampled.
  // Final after stop().
  std::vector<GpuUtilizationSummary> summaries() const;

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> pci_bus_ids_;  // guarded by mutex_
  bool started_ = false;                  // guarded by mutex_
  std::unique_ptr<NvmlSampler> sampler_;  // made by start(), guarded by mutex_
};

}  // namespace scalescope
