// How tables, progress and headings name sweep points and groups of them.
#include <fmt/format.h>

#include "reports/sweep_report.h"

namespace scalescope {
namespace {

// "cifar-cnn cpu:2 batch 64" (weak scaling's per-device batch), "... global batch 128".
std::string grid_text(const std::string& model, const std::string& device_kind, int devices,
                      ScalingMode mode, int64_t batch) {
  return fmt::format("{} {}:{} {}{}", model, device_kind, devices,
                     mode == ScalingMode::kWeak ? "batch " : "global batch ", batch);
}

}  // namespace

std::string bucket_caps_text(double cap_mb, double first_mb) {
  if (first_mb == kDefaultFirstBucketMb) return fmt::format("{} MB", cap_mb);
  return fmt::format("{} MB (first {} MB)", cap_mb, first_mb);
}

std::string precision_text(Precision precision, bool is_default) {
  return is_default ? "" : fmt::format(" in {}", to_string(precision));
}

std::string SweepPoint::label() const {
  std::string label = grid_text(model, device_kind, devices, mode,
                                mode == ScalingMode::kWeak ? batch : global_batch);
  if (devices > 1 && !default_buckets()) label += " bucket " + buckets_text();
  if (devices > 1 && compressed()) label += fmt::format(" {}", compression_text(grad_compression));
  return label + precision_text(precision, precision_default);
}

std::string PointGroup::label(std::string_view qualifier) const {
  return grid_text(model, device_kind, devices, mode, batch) + std::string(qualifier) +
         precision_text(precision, precision_default);
}

}  // namespace scalescope
