#include "harness/telemetry/nvml_sampler.h"

#include <algorithm>
#include <exception>
#include <utility>

#include "core/check.h"
#include "core/nvtx.h"

namespace scalescope {
namespace {

// NVML's two queries as one reading; either failing fails the reading, so that the means
// are over the same samples.
GpuReadingSource nvml_source(const Nvml& nvml) {
  return [&nvml](const std::string& pci_bus_id) -> NvmlResult<GpuReading> {
    const NvmlResult<NvmlUtilization> rates = nvml.utilization(pci_bus_id);
    if (!rates.ok()) return NvmlResult<GpuReading>::failure(rates.error);
    const NvmlResult<NvmlMemoryInfo> memory = nvml.memory_info(pci_bus_id);
    if (!memory.ok()) return NvmlResult<GpuReading>::failure(memory.error);
    return {GpuReading{static_cast<double>(rates.value->gpu_percent),
                       static_cast<double>(rates.value->memory_percent), memory.value->used_bytes},
            {}};
  };
}

}  // namespace

NvmlSampler::NvmlSampler(std::vector<std::string> pci_bus_ids, std::chrono::milliseconds period,
                         const std::string& library)
    : pci_bus_ids_(std::move(pci_bus_ids)), period_(period) {
  SS_CHECK(period.count() > 0, "NVML sampler: the period must be > 0 ms, got {} ms",
           period.count());
  totals_.resize(pci_bus_ids_.size());
  nvml_ = std::make_unique<Nvml>(library);
  if (!nvml_->loaded()) {
    unavailable_ = nvml_->error();
    nvml_.reset();
    return;
  }
  source_ = nvml_source(*nvml_);
  start();
}

NvmlSampler::NvmlSampler(std::vector<std::string> pci_bus_ids, std::chrono::milliseconds period,
                         GpuReadingSource source)
    : pci_bus_ids_(std::move(pci_bus_ids)), period_(period), source_(std::move(source)) {
  SS_CHECK(period.count() > 0, "NVML sampler: the period must be > 0 ms, got {} ms",
           period.count());
  SS_CHECK(static_cast<bool>(source_), "NVML sampler: the reading source is empty");
  totals_.resize(pci_bus_ids_.size());
  start();
}

NvmlSampler::~NvmlSampler() {
  stop();
}

void NvmlSampler::start() {
  if (pci_bus_ids_.empty()) {
    unavailable_ = "no GPUs to sample";
    return;
  }
  thread_ = std::thread([this] { run(); });
  started_ = true;
}

void NvmlSampler::stop() noexcept {
  {
    const std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void NvmlSampler::run() noexcept {
  nvtx::name_current_thread("scalescope nvml sampler");
  // Fixed-rate rather than fixed-delay: the readings stay `period_` apart on average however
  // long a reading takes; readings missed while one was slow are skipped, not caught up.
  // The first reading is taken even when stop() came first: a run shorter than the period
  // still gets one.
  auto next = std::chrono::steady_clock::now();
  std::unique_lock lock(mutex_);
  do {
    lock.unlock();
    sample_all();
    lock.lock();
    next += period_;
    const auto now = std::chrono::steady_clock::now();
    if (next < now) next = now + period_;
    wake_.wait_until(lock, next, [this] { return stop_; });
  } while (!stop_);
}

void NvmlSampler::sample_all() noexcept {
  for (size_t i = 0; i < pci_bus_ids_.size(); ++i) {
    NvmlResult<GpuReading> reading;
    try {
      reading = source_(pci_bus_ids_[i]);
    } catch (const std::exception& e) {
      reading = NvmlResult<GpuReading>::failure(fmt::format("reading failed: {}", e.what()));
    } catch (...) {
      reading = NvmlResult<GpuReading>::failure("reading failed: unknown exception");
    }
    const std::lock_guard lock(mutex_);
    Totals& t = totals_[i];
    if (!reading.ok()) {
      ++t.failed;
      try {
        t.error = reading.error.empty() ? "reading failed" : reading.error;
      } catch (...) {
        // No host memory for the reason: the count still says a reading failed.
      }
      continue;
    }
    const GpuReading& r = *reading.value;
    ++t.samples;
    t.sum_gpu += r.gpu_util_percent;
    t.max_gpu = t.samples == 1 ? r.gpu_util_percent : std::max(t.max_gpu, r.gpu_util_percent);
    t.sum_memory += r.memory_util_percent;
    t.max_used = std::max(t.max_used, r.memory_used_bytes);
  }
}

std::vector<GpuUtilizationSummary> NvmlSampler::summaries() const {
  std::vector<GpuUtilizationSummary> out;
  out.reserve(pci_bus_ids_.size());
  const std::lock_guard lock(mutex_);
  for (size_t i = 0; i < pci_bus_ids_.size(); ++i) {
    const Totals& t = totals_[i];
    GpuUtilizationSummary s;
    s.pci_bus_id = pci_bus_ids_[i];
    s.samples = t.samples;
    s.failed_samples = t.failed;
    if (t.samples > 0) {
      const auto n = static_cast<double>(t.samples);
      s.mean_gpu_util_percent = t.sum_gpu / n;
      s.max_gpu_util_percent = t.max_gpu;
      s.mean_memory_util_percent = t.sum_memory / n;
      s.max_memory_used_bytes = t.max_used;
    }
    s.error = !unavailable_.empty() ? unavailable_ : t.error;
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace scalescope
