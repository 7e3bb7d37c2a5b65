// GPU utilisation and memory sampled in the background while a run measures: evidence for
// the verdict of a report (a GPU busy 40% of the time with its memory idle points at the
// input pipeline or the collectives, not at the kernels).
//
// A thread reads every device once per period until stop(), and keeps only running sums
// and maxima, so that a long run costs no memory. The readings come from a source: NVML by
// default, or any function (tests inject a fake one, so that the aggregation is tested on
// machines without a GPU). Nothing here throws once constructed: when NVML cannot be loaded
// the sampler records why and returns summaries without samples.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "harness/telemetry/nvml.h"

namespace scalescope {

// One reading of one GPU.
struct GpuReading {
  double gpu_util_percent = 0.0;
  double memory_util_percent = 0.0;
  uint64_t memory_used_bytes = 0;
};

// Reads the GPU at a PCI bus id now, or says why it could not. Called from the sampling
// thread only; may throw (counted as a failed sample).
using GpuReadingSource = std::function<NvmlResult<GpuReading>(const std::string& pci_bus_id)>;

// What the samples of one GPU add up to.
struct GpuUtilizationSummary {
  std::string pci_bus_id;
  int64_t samples = 0;         // successful readings
  int64_t failed_samples = 0;  // readings the source could not take
  double mean_gpu_util_percent = 0.0;
  double max_gpu_util_percent = 0.0;
  double mean_memory_util_percent = 0.0;
  uint64_t max_memory_used_bytes = 0;
  // Why readings failed (the latest reason), or why there were none at all (NVML not
  // loaded); empty when every reading succeeded.
  std::string error;
};

class NvmlSampler {
 public:
  static constexpr std::chrono::milliseconds kDefaultPeriod{100};

  // Samples the GPUs at these PCI bus ids (as cudaDeviceGetPCIBusId prints them) through
  // NVML loaded from `library`. When NVML does not load, no thread starts and
  // unavailable_reason() says why. Throws Error only for a period <= 0.
  explicit NvmlSampler(std::vector<std::string> pci_bus_ids,
                       std::chrono::milliseconds period = kDefaultPeriod,
                       const std::string& library = kNvmlLibrary);
  // Samples through `source` instead of NVML. Throws Error for a period <= 0 or an empty
  // source.
  NvmlSampler(std::vector<std::string> pci_bus_ids, std::chrono::milliseconds period,
              GpuReadingSource source);
  ~NvmlSampler();  // stop(); never throws
  NvmlSampler(const NvmlSampler&) = delete;
  NvmlSampler& operator=(const NvmlSampler&) = delete;

  // Whether a sampling thread was started (false without NVML or without devices).
  bool sampling() const { return started_; }
  // Why nothing is sampled; empty when sampling.
  const std::string& unavailable_reason() const { return unavailable_; }
  std::chrono::milliseconds period() const { return period_; }

  // Stops the thread and waits for it: a sampler that started has taken at least one
  // reading of every device (the first is taken at once), and stop() waits for at most one
  // more. Idempotent; never throws.
  void stop() noexcept;
  // One summary per PCI bus id, in the constructor's order: final after stop(), a snapshot
  // while sampling. Thread-safe.
  std::vector<GpuUtilizationSummary> summaries() const;

 private:
  struct Totals {
    int64_t samples = 0;
    int64_t failed = 0;
    double sum_gpu = 0.0;
    double max_gpu = 0.0;
    double sum_memory = 0.0;
    uint64_t max_used = 0;
    std::string error;
  };

  void start();
  void run() noexcept;
  void sample_all() noexcept;

  std::vector<std::string> pci_bus_ids_;
  std::chrono::milliseconds period_;
  std::unique_ptr<Nvml> nvml_;  // when sampling NVML; outlives the thread (stopped first)
  GpuReadingSource source_;
  std::string unavailable_;

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;           // guarded by mutex_
  std::vector<Totals> totals_;  // guarded by mutex_
  bool started_ = false;
  std::thread thread_;
};

}  // namespace scalescope
