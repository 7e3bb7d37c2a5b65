#include "reports/analysis/time_to_target.h"

#include <fmt/format.h>

#include <vector>

#include "core/check.h"
#include "reports/analysis/stats.h"

namespace scalescope {

TimeToTarget summarize_targets(std::span<const TargetRecord> targets) {
  SS_CHECK(!targets.empty(), "a time to target over no runs");
  TimeToTarget t;
  t.metric = targets.front().metric;
  t.value = targets.front().value;
  t.repeats = static_cast<int>(targets.size());
  std::vector<double> steps, samples, epochs, train_s, wall_s;
  for (const TargetRecord& r : targets) {
    SS_CHECK(r.metric == t.metric && r.value == t.value,
             "the repeats of one point have different targets ({} {} and {} {})", t.metric, t.value,
             r.metric, r.value);
    if (!r.reached) continue;
    ++t.reached;
    steps.push_back(static_cast<double>(r.step));
    samples.push_back(static_cast<double>(r.samples));
    epochs.push_back(r.epochs);
    train_s.push_back(r.train_ms / 1e3);
    wall_s.push_back(r.wall_ms / 1e3);
  }
  if (t.reached == 0) return t;
  t.steps = median(steps);
  t.samples = median(samples);
  t.epochs = median(epochs);
  t.train_s = median(train_s);
  t.wall_s = median(wall_s);
  return t;
}

void compare_targets(TimeToTarget& at_n, const TimeToTarget& one) {
  if (!at_n.all_reached() || !one.all_reached() || at_n.train_s <= 0.0) return;
  at_n.speedup = one.train_s / at_n.train_s;
  at_n.statistical = one.samples / at_n.samples;
  at_n.hardware = *at_n.speedup / *at_n.statistical;
}

namespace {

nlohmann::json optional_json(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

}  // namespace

nlohmann::json to_json(const TimeToTarget& t) {
  return {{"metric", t.metric},
          {"value", t.value},
          {"repeats", t.repeats},
          {"reached", t.reached},
          {"steps", t.steps},
          {"samples", t.samples},
          {"epochs", t.epochs},
          {"train_s", t.train_s},
          {"wall_s", t.wall_s},
          {"speedup", optional_json(t.speedup)},
          {"hardware_speedup", optional_json(t.hardware)},
          {"statistical_efficiency", optional_json(t.statistical)},
          {"predicted_statistical_efficiency", optional_json(t.predicted_statistical)}};
}

std::string speedup_text(const TimeToTarget& t) {
  if (!t.speedup) {
    return t.all_reached()
               ? "no speedup: the one-device point did not reach the target every time"
               : fmt::format("no speedup: {} of {} runs reached the target", t.reached, t.repeats);
  }
  const std::string predicted =
      t.predicted_statistical
          ? fmt::format(" (B_noise predicted {:.0f}%)", 100.0 * *t.predicted_statistical)
          : "";
  return fmt::format("{:.2f}x = {:.2f}x hardware × {:.0f}% statistical{}", *t.speedup, *t.hardware,
                     100.0 * *t.statistical, predicted);
}

}  // namespace scalescope
