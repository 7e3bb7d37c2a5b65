#include "reports/writers/layer_profile.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <vector>

namespace scalescope {
namespace {

// Replica 0's forward and backward phases, their mean over the measured steps.
double passes_ms(const RunReport& report) {
  double sum = 0.0;
  int64_t steps = 0;
  for (const StepRecord& s : report.steps) {
    if (s.step <= report.warmup_steps || s.replicas.empty()) continue;
    sum += s.replicas.front()[Phase::kForward] + s.replicas.front()[Phase::kBackward];
    ++steps;
  }
  return steps > 0 ? sum / static_cast<double>(steps) : 0.0;
}

std::string row(const std::string& layer, const std::string& name, double forward_ms,
                double backward_ms, double share, const std::string& rates,
                const std::string& kernel) {
  return fmt::format("{:>6}  {:<56} {:>10.3f} {:>11.3f} {:>9.3f} {:>6.1f}% {:>21}  {}\n", layer,
                     name.substr(0, 56), forward_ms, backward_ms, forward_ms + backward_ms,
                     100.0 * share, rates, kernel.substr(0, 60));
}

// The forward's GFLOP/s, and for a memory-bound layer the GB/s it moved: "-" where unknown.
std::string forward_rates(const LayerTimeRecord& l) {
  const auto text = [](std::optional<double> rate) {
    return rate ? fmt::format("{:.1f}", *rate) : std::string("-");
  };
  return fmt::format("{:>11} {:>9}", text(l.forward_gflop_per_s()), text(l.forward_gb_per_s()));
}

// What the library chose for `layer`'s forward (oneDNN's implementation, cuDNN's algorithm
// and math), from the run's kernels; "" for our own kernels.
std::string forward_kernel(const RunReport& report, int layer) {
  for (const KernelChoiceRecord& k : report.kernels) {
    if (k.layer != layer || k.pass != "forward") continue;
    return k.math.empty() || k.math == "fp32" ? k.algorithm : k.algorithm + " " + k.math;
  }
  return "";
}

std::vector<LayerTimeRecord> slowest_first(std::vector<LayerTimeRecord> layers) {
  std::stable_sort(layers.begin(), layers.end(),
                   [](const auto& a, const auto& b) { return a.total_ms() > b.total_ms(); });
  return layers;
}

}  // namespace

std::string format_point_layers(const SweepReport& report, size_t top) {
  std::string out;
  for (const SweepPoint& p : report.points) {
    if (p.layer_profile.empty()) continue;
    double all_ms = 0.0;
    for (const LayerTimeRecord& l : p.layer_profile) all_ms += l.total_ms();
    const std::vector<LayerTimeRecord> layers = slowest_first(p.layer_profile);
    std::vector<std::string> named;
    for (size_t i = 0; i < std::min(top, layers.size()); ++i) {
      named.push_back(fmt::format("#{} {} {:.3f} ms", layers[i].layer, layers[i].layer_name,
                                  layers[i].total_ms()));
    }
    out +=
        fmt::format("{}: {} (all layers {:.3f} ms)\n", p.label(), fmt::join(named, "; "), all_ms);
  }
  if (out.empty()) return out;
  return "\nslowest layers of replica 0 per point (--profile-layers; mean per step, forward + "
         "backward):\n" +
         out;
}

std::string format_layer_profile(const RunReport& report, size_t top) {
  if (report.layer_profile.empty()) return "";
  double all_ms = 0.0;
  for (const LayerTimeRecord& l : report.layer_profile) all_ms += l.total_ms();
  const std::vector<LayerTimeRecord> layers = slowest_first(report.layer_profile);
  const double share_of = all_ms > 0.0 ? all_ms : 1.0;
  std::string out = fmt::format(
      "\nlayers of replica 0, mean per measured step: {:.3f} ms in all, in forward and backward "
      "phases of {:.3f} ms (the rest: the loss, and the gaps between layers)\n",
      all_ms, passes_ms(report));
  out += fmt::format("{:>6}  {:<56} {:>10} {:>11} {:>9} {:>7} {:>11} {:>9}  {}\n", "layer", "name",
                     "forward ms", "backward ms", "total ms", "share", "fwd GFLOP/s", "fwd GB/s",
                     "forward kernel");
  const size_t shown = std::min(top, layers.size());
  for (size_t i = 0; i < shown; ++i) {
    const LayerTimeRecord& l = layers[i];
    out += row(std::to_string(l.layer), l.layer_name, l.forward_ms, l.backward_ms,
               l.total_ms() / share_of, forward_rates(l), forward_kernel(report, l.layer));
  }
  if (shown < layers.size()) {
    double forward = 0.0;
    double backward = 0.0;
    for (size_t i = shown; i < layers.size(); ++i) {
      forward += layers[i].forward_ms;
      backward += layers[i].backward_ms;
    }
    out += row("", fmt::format("{} other layers", layers.size() - shown), forward, backward,
               (forward + backward) / share_of, "", "");
  }
  return out;
}

}  // namespace scalescope
