#include "harness/telemetry/utilization.h"

#include <algorithm>

#include "core/check.h"

namespace scalescope {

UtilizationSampling::UtilizationSampling(int devices)
    : pci_bus_ids_(static_cast<size_t>(std::max(devices, 0))) {}

UtilizationSampling::~UtilizationSampling() = default;

void UtilizationSampling::add(int index, const Device& device) {
  const std::string id = device.pci_bus_id();
  std::lock_guard lock(mutex_);
  SS_CHECK(index >= 0 && static_cast<size_t>(index) < pci_bus_ids_.size(),
           "device {} of {} named for sampling", index, pci_bus_ids_.size());
  pci_bus_ids_[static_cast<size_t>(index)] = id;
}

void UtilizationSampling::start() {
  std::lock_guard lock(mutex_);
  if (started_) return;
  started_ = true;
  std::vector<std::string> ids;
  for (const std::string& id : pci_bus_ids_) {
    if (!id.empty()) ids.push_back(id);
  }
  if (!ids.empty()) sampler_ = std::make_unique<NvmlSampler>(std::move(ids));
}

void UtilizationSampling::stop() noexcept {
  std::lock_guard lock(mutex_);
  if (sampler_) sampler_->stop();
}

std::vector<GpuUtilizationSummary> UtilizationSampling::summaries() const {
  std::lock_guard lock(mutex_);
  return sampler_ ? sampler_->summaries() : std::vector<GpuUtilizationSummary>{};
}

}  // namespace scalescope
