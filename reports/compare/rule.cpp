#include "reports/compare/rule.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

#include "core/check.h"
#include "core/enum_names.h"
#include "core/spelling.h"

namespace scalescope {
namespace {

constexpr std::array<std::string_view, kStepMetricCount> kStepMetricNames = {
    "throughput", "step_time", "efficiency"};

constexpr const char* kPhasesName = "phases";

std::string_view trim(std::string_view text) {
  const size_t first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  const size_t last = text.find_last_not_of(" \t");
  return text.substr(first, last - first + 1);
}

std::optional<Metric> metric_named(std::string_view name) {
  for (const Metric m : Metric::all()) {
    if (metric_name(m) == name) return m;
  }
  return std::nullopt;
}

double relative_change(double baseline, double current) {
  if (baseline == 0.0) {
    return current == 0.0 ? 0.0 : std::copysign(std::numeric_limits<double>::infinity(), current);
  }
  return (current - baseline) / std::abs(baseline);
}

// The rule of the header: size, then significance in the same direction, then materiality.
Change classify(const MetricComparison& c, double alpha, bool material) {
  if (!(std::abs(c.relative_change) > c.threshold)) return Change::kUnchanged;
  const bool worse = higher_is_better(c.metric) ? c.relative_change < 0 : c.relative_change > 0;
  // Every test runs on times (larger is slower): a worse metric needs current samples that
  // tend to be larger (z > 0), a better one smaller.
  const bool significant = c.test.p_value < alpha && (worse ? c.test.z > 0 : c.test.z < 0);
  if (!significant) return Change::kNotSignificant;
  if (!material) return Change::kNegligible;
  return worse ? Change::kRegressed : Change::kImproved;
}

}  // namespace

std::optional<Phase> Metric::phase() const {
  if (index_ < kStepMetricCount) return std::nullopt;
  return kPhases[index_ - kStepMetricCount].phase;
}

std::string_view metric_name(Metric metric) {
  if (const std::optional<Phase> p = metric.phase()) return phase_def(*p).key;
  return kStepMetricNames[metric.index()];
}

// " (did you mean X?)" where `name` is a slip away from a metric's name or "phases".
std::string metric_meant(std::string_view name) {
  std::vector<std::string_view> names = {kPhasesName};
  for (const Metric m : Metric::all()) names.push_back(metric_name(m));
  return did_you_mean(name, names);
}

std::string metric_names() {
  std::string out;
  for (const Metric m : Metric::all()) out += fmt::format("{}, ", metric_name(m));
  return out + kPhasesName;
}

std::string_view metric_unit(Metric metric) {
  if (metric == Metric::kThroughput) return "samples/s";
  if (metric == Metric::kEfficiency) return "";
  return "ms";
}

bool higher_is_better(Metric metric) {
  return metric == Metric::kThroughput || metric == Metric::kEfficiency;
}

bool is_phase(Metric metric) {
  return metric.phase().has_value();
}

double Thresholds::of(Metric m) const {
  if (metric[m.index()]) return *metric[m.index()];
  if (is_phase(m) && phases) return *phases;
  return fallback;
}

double parse_percent(std::string_view text, std::string_view what) {
  const std::string_view t = trim(text);
  SS_CHECK_INPUT(!t.empty() && t.back() == '%',
                 "{} '{}': a threshold is a percentage with a % sign, like 5% or 2.5%", what, text);
  const std::string_view number = t.substr(0, t.size() - 1);
  double value = 0;
  const auto [end, error] = std::from_chars(number.data(), number.data() + number.size(), value);
  SS_CHECK_INPUT(!number.empty() && error == std::errc() && end == number.data() + number.size(),
                 "{} '{}': '{}' is not a number (accepted: a percentage like 5% or 2.5%)", what,
                 text, number);
  SS_CHECK_INPUT(std::isfinite(value) && value >= 0.0 && value <= 1000.0,
                 "{} '{}': the percentage must be between 0% and 1000%", what, text);
  return value / 100.0;
}

Thresholds parse_thresholds(std::string_view text) {
  Thresholds out;
  bool fallback_given = false;
  SS_CHECK_INPUT(!trim(text).empty(),
                 "--threshold is empty (accepted: 5%, or NAME=PERCENT items like throughput=3%)");
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(',', start), text.size());
    const std::string_view item = trim(text.substr(start, end - start));
    start = end + 1;
    const std::string what = fmt::format("--threshold item '{}'", item);
    SS_CHECK_INPUT(!item.empty(),
                   "--threshold '{}' has an empty item (items are separated by single commas)",
                   text);
    const size_t equals = item.find('=');
    if (equals == std::string_view::npos) {
      SS_CHECK_INPUT(!fallback_given, "--threshold '{}' gives the default threshold twice", text);
      out.fallback = parse_percent(item, "--threshold item");  // named once, not twice
      fallback_given = true;
      continue;
    }
    const std::string_view name = trim(item.substr(0, equals));
    const double value = parse_percent(item.substr(equals + 1), what);
    if (name == kPhasesName) {
      SS_CHECK_INPUT(!out.phases, "--threshold '{}' names '{}' twice", text, name);
      out.phases = value;
      continue;
    }
    const std::optional<Metric> metric = metric_named(name);
    SS_CHECK_INPUT(metric.has_value(), "{}: '{}' is not a metric{} (accepted: {})", what, name,
                   metric_meant(name), metric_names());
    std::optional<double>& slot = out.metric[metric->index()];
    SS_CHECK_INPUT(!slot, "--threshold '{}' names '{}' twice", text, name);
    slot = value;
  }
  return out;
}

std::string_view to_string(Change change) {
  static constexpr auto kNames =
      enum_names<Change>("unchanged", "not significant", "negligible", "improved", "regressed");
  return kNames(change);
}

MetricComparison compare_metric(Metric metric, double baseline, double current,
                                const MannWhitney& test, bool material,
                                const CompareOptions& options) {
  MetricComparison m;
  m.metric = metric;
  m.baseline = baseline;
  m.current = current;
  m.relative_change = relative_change(baseline, current);
  m.threshold = options.thresholds.of(metric);
  m.test = test;
  m.change = classify(m, options.alpha, material);
  return m;
}

}  // namespace scalescope
