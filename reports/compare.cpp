#include "reports/compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <iterator>
#include <limits>
#include <map>

#include "core/check.h"

namespace scalescope {
namespace {

constexpr std::array<std::string_view, kMetricCount> kMetricNames = {
    "throughput", "step_time", "efficiency",        "input",    "h2d", "forward",
    "backward",   "allreduce", "allreduce_exposed", "optimizer"};

constexpr const char* kPhasesName = "phases";

size_t index_of(Metric metric) {
  return static_cast<size_t>(metric);
}

// The per-step field a phase metric reads; nullptr for the others.
double PhaseTimes::*phase_field(Metric metric) {
  switch (metric) {
    case Metric::kInput:
      return &PhaseTimes::input_ms;
    case Metric::kH2d:
      return &PhaseTimes::h2d_ms;
    case Metric::kForward:
      return &PhaseTimes::forward_ms;
    case Metric::kBackward:
      return &PhaseTimes::backward_ms;
    case Metric::kAllreduce:
      return &PhaseTimes::allreduce_ms;
    case Metric::kAllreduceExposed:
      return &PhaseTimes::allreduce_exposed_ms;
    case Metric::kOptimizer:
      return &PhaseTimes::optimizer_ms;
    default:
      return nullptr;
  }
}

std::string metric_list() {
  std::string out;
  for (const std::string_view name : kMetricNames) {
    out += fmt::format("{}{}", out.empty() ? "" : ", ", name);
  }
  return out + ", " + kPhasesName;
}

std::string_view trim(std::string_view text) {
  const size_t first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  const size_t last = text.find_last_not_of(" \t");
  return text.substr(first, last - first + 1);
}

}  // namespace

std::string_view metric_name(Metric metric) {
  return kMetricNames[index_of(metric)];
}

std::string_view metric_unit(Metric metric) {
  switch (metric) {
    case Metric::kThroughput:
      return "samples/s";
    case Metric::kEfficiency:
      return "";
    default:
      return "ms";
  }
}

bool higher_is_better(Metric metric) {
  return metric == Metric::kThroughput || metric == Metric::kEfficiency;
}

bool is_phase(Metric metric) {
  return phase_field(metric) != nullptr;
}

double Thresholds::of(Metric m) const {
  if (metric[index_of(m)]) return *metric[index_of(m)];
  if (is_phase(m) && phases) return *phases;
  return fallback;
}

double parse_percent(std::string_view text, std::string_view what) {
  const std::string_view t = trim(text);
  SS_CHECK(!t.empty() && t.back() == '%',
           "{} '{}': a threshold is a percentage with a % sign, like 5% or 2.5%", what, text);
  const std::string_view number = t.substr(0, t.size() - 1);
  double value = 0;
  const auto [end, error] = std::from_chars(number.data(), number.data() + number.size(), value);
  SS_CHECK(!number.empty() && error == std::errc() && end == number.data() + number.size(),
           "{} '{}': '{}' is not a number (accepted: a percentage like 5% or 2.5%)", what, text,
           number);
  SS_CHECK(std::isfinite(value) && value >= 0.0 && value <= 1000.0,
           "{} '{}': the percentage must be between 0% and 1000%", what, text);
  return value / 100.0;
}

Thresholds parse_thresholds(std::string_view text) {
  Thresholds out;
  bool fallback_given = false;
  SS_CHECK(!trim(text).empty(),
           "--threshold is empty (accepted: 5%, or NAME=PERCENT items like throughput=3%)");
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(',', start), text.size());
    const std::string_view item = trim(text.substr(start, end - start));
    start = end + 1;
    const std::string what = fmt::format("--threshold item '{}'", item);
    SS_CHECK(!item.empty(),
             "--threshold '{}' has an empty item (items are separated by single commas)", text);
    const size_t equals = item.find('=');
    if (equals == std::string_view::npos) {
      SS_CHECK(!fallback_given, "--threshold '{}' gives the default threshold twice", text);
      out.fallback = parse_percent(item, what);
      fallback_given = true;
      continue;
    }
    const std::string_view name = trim(item.substr(0, equals));
    const double value = parse_percent(item.substr(equals + 1), what);
    if (name == kPhasesName) {
      SS_CHECK(!out.phases, "--threshold '{}' names '{}' twice", text, name);
      out.phases = value;
      continue;
    }
    const auto it = std::find(kMetricNames.begin(), kMetricNames.end(), name);
    SS_CHECK(it != kMetricNames.end(), "{}: '{}' is not a metric (accepted: {})", what, name,
             metric_list());
    std::optional<double>& slot = out.metric[static_cast<size_t>(it - kMetricNames.begin())];
    SS_CHECK(!slot, "--threshold '{}' names '{}' twice", text, name);
    slot = value;
  }
  return out;
}

std::string_view to_string(Change change) {
  switch (change) {
    case Change::kUnchanged:
      return "unchanged";
    case Change::kNotSignificant:
      return "not significant";
    case Change::kNegligible:
      return "negligible";
    case Change::kImproved:
      return "improved";
    case Change::kRegressed:
      return "regressed";
  }
  return "?";
}

std::string_view to_string(PointStatus status) {
  switch (status) {
    case PointStatus::kCompared:
      return "compared";
    case PointStatus::kOnlyInBaseline:
      return "only in the baseline";
    case PointStatus::kOnlyInCurrent:
      return "only in the current report";
    case PointStatus::kFailedInCurrent:
      return "failed in the current report";
    case PointStatus::kFailedInBaseline:
      return "failed in the baseline";
    case PointStatus::kFailedInBoth:
      return "failed in both";
  }
  return "?";
}

int PointComparison::regressions() const {
  return static_cast<int>(std::count_if(metrics.begin(), metrics.end(), [](const auto& m) {
    return m.change == Change::kRegressed;
  }));
}

int PointComparison::improvements() const {
  return static_cast<int>(std::count_if(
      metrics.begin(), metrics.end(), [](const auto& m) { return m.change == Change::kImproved; }));
}

bool PointComparison::weak() const {
  return std::any_of(metrics.begin(), metrics.end(),
                     [](const MetricComparison& m) { return !m.test.exact_enough; });
}

int Comparison::regressions() const {
  int n = 0;
  for (const PointComparison& p : points) n += p.regressions();
  return n;
}

int Comparison::improvements() const {
  int n = 0;
  for (const PointComparison& p : points) n += p.improvements();
  return n;
}

int Comparison::newly_failed() const {
  return static_cast<int>(std::count_if(points.begin(), points.end(), [](const auto& p) {
    return p.status == PointStatus::kFailedInCurrent;
  }));
}

int Comparison::compared() const {
  return static_cast<int>(std::count_if(points.begin(), points.end(), [](const auto& p) {
    return p.status == PointStatus::kCompared;
  }));
}

bool Comparison::weak() const {
  return std::any_of(points.begin(), points.end(),
                     [](const PointComparison& p) { return p.weak(); });
}

bool Comparison::regressed() const {
  return regressions() > 0 || newly_failed() > 0;
}

// ---------------------------------------------------------------------------------------
// Environments.

namespace {

std::string or_none(const std::string& value) {
  return value.empty() ? "none" : value;
}

std::string gpu_names(const Environment& env) {
  if (env.gpus.empty()) return "none";
  std::string out;
  for (const GpuInfo& g : env.gpus) out += (out.empty() ? "" : ", ") + g.name;
  return out;
}

}  // namespace

std::vector<EnvironmentDifference> compare_environments(const Environment& baseline,
                                                        const Environment& current) {
  std::vector<EnvironmentDifference> out;
  const auto differ = [&out](const char* what, const std::string& a, const std::string& b) {
    if (a != b) out.push_back({what, a, b});
  };
  differ("GPU models", gpu_names(baseline), gpu_names(current));
  differ("GPU count", std::to_string(baseline.gpus.size()), std::to_string(current.gpus.size()));
  differ("CUDA driver", or_none(baseline.libraries.cuda_driver),
         or_none(current.libraries.cuda_driver));
  differ("CUDA runtime", or_none(baseline.libraries.cuda_runtime),
         or_none(current.libraries.cuda_runtime));
  differ("cuDNN", or_none(baseline.libraries.cudnn), or_none(current.libraries.cudnn));
  differ("NCCL", or_none(baseline.libraries.nccl), or_none(current.libraries.nccl));
  differ("oneDNN", or_none(baseline.libraries.onednn), or_none(current.libraries.onednn));
  differ("Gloo", or_none(baseline.libraries.gloo), or_none(current.libraries.gloo));
  differ("build type", or_none(baseline.build.build_type), or_none(current.build.build_type));
  differ("CPU model", or_none(baseline.host.cpu_model), or_none(current.host.cpu_model));
  differ("logical cores", std::to_string(baseline.host.logical_cores),
         std::to_string(current.host.logical_cores));
  differ("usable cores", std::to_string(baseline.host.usable_cores),
         std::to_string(current.host.usable_cores));
  return out;
}

// ---------------------------------------------------------------------------------------
// Points.

namespace {

struct PointSamples {
  std::vector<double> step_ms;
  // Per phase metric (by index), the slowest replica's phase per step; empty for the others
  // and when a step has no replica record.
  std::array<std::vector<double>, kMetricCount> phases;
};

PointSamples samples_of(const SweepPoint& p) {
  PointSamples out;
  bool replicas = true;
  for (const RepeatRecord& r : p.repeats) {
    for (const StepRecord& s : r.steps) {
      out.step_ms.push_back(s.step_ms);
      replicas = replicas && !s.replicas.empty();
      if (!replicas) continue;
      // The replica that set the step time; the first of equals, as the report's analysis.
      const PhaseTimes& slowest = *std::max_element(
          s.replicas.begin(), s.replicas.end(),
          [](const PhaseTimes& a, const PhaseTimes& b) { return a.step_ms < b.step_ms; });
      for (const Metric m : kAllMetrics) {
        if (double PhaseTimes::*field = phase_field(m)) {
          out.phases[index_of(m)].push_back(slowest.*field);
        }
      }
    }
  }
  if (!replicas) {
    for (std::vector<double>& v : out.phases) v.clear();
  }
  SS_CHECK(!out.step_ms.empty(), "point {} is ok but has no measured steps", p.label());
  return out;
}

double relative_change(double baseline, double current) {
  if (baseline == 0.0) {
    return current == 0.0 ? 0.0 : std::copysign(std::numeric_limits<double>::infinity(), current);
  }
  return (current - baseline) / std::abs(baseline);
}

// The rule of the header: size, then significance in the same direction, then materiality.
Change classify(Metric metric, const MetricComparison& c, double alpha, bool material) {
  if (!(std::abs(c.relative_change) > c.threshold)) return Change::kUnchanged;
  const bool worse = higher_is_better(metric) ? c.relative_change < 0 : c.relative_change > 0;
  // Every test runs on times (larger is slower): a worse metric needs current samples that
  // tend to be larger (z > 0), a better one smaller.
  const bool significant = c.test.p_value < alpha && (worse ? c.test.z > 0 : c.test.z < 0);
  if (!significant) return Change::kNotSignificant;
  if (!material) return Change::kNegligible;
  return worse ? Change::kRegressed : Change::kImproved;
}

void compare_point(PointComparison& out, const SweepPoint& base, const SweepPoint& cur,
                   const CompareOptions& options) {
  const PointSamples b = samples_of(base);
  const PointSamples c = samples_of(cur);
  out.baseline_steps = static_cast<int64_t>(b.step_ms.size());
  out.current_steps = static_cast<int64_t>(c.step_ms.size());
  const auto add = [&](Metric metric, double baseline, double current, const MannWhitney& test,
                       bool material) {
    MetricComparison m;
    m.metric = metric;
    m.baseline = baseline;
    m.current = current;
    m.relative_change = relative_change(baseline, current);
    m.threshold = options.thresholds.of(metric);
    m.test = test;
    m.change = classify(metric, m, options.alpha, material);
    out.metrics.push_back(m);
  };
  const MannWhitney step_test = mann_whitney_u(c.step_ms, b.step_ms);
  const double step_b = median(b.step_ms);
  const double step_c = median(c.step_ms);
  add(Metric::kThroughput, static_cast<double>(base.global_batch) * 1e3 / step_b,
      static_cast<double>(cur.global_batch) * 1e3 / step_c, step_test, true);
  add(Metric::kStepTime, step_b, step_c, step_test, true);
  // At one device efficiency is 1 by definition: nothing to compare.
  if (base.devices > 1 && base.summary.efficiency && cur.summary.efficiency) {
    add(Metric::kEfficiency, base.summary.efficiency->value, cur.summary.efficiency->value,
        step_test, true);
  }
  for (const Metric metric : kAllMetrics) {
    if (!is_phase(metric)) continue;
    const std::vector<double>& pb = b.phases[index_of(metric)];
    const std::vector<double>& pc = c.phases[index_of(metric)];
    if (pb.empty() || pc.empty()) continue;
    const double mb = median(pb);
    const double mc = median(pc);
    if (mb == 0.0 && mc == 0.0) continue;  // a phase neither run has (all-reduce at 1 device)
    const bool material = std::abs(mc - mb) >= options.min_phase_change * step_b;
    add(metric, mb, mc, mann_whitney_u(pc, pb), material);
  }
}

std::map<std::string, const SweepPoint*> index_points(const SweepReport& report,
                                                      const std::string& name) {
  std::map<std::string, const SweepPoint*> out;
  for (const SweepPoint& p : report.points) {
    SS_CHECK(out.emplace(p.key(), &p).second,
             "report {} has two points for {}: compare cannot tell which to match", name,
             p.label());
  }
  return out;
}

ReportInfo info_of(const SweepReport& report, const std::string& name) {
  return {name,
          report.created,
          report.tool_version,
          report.environment.build.git_commit,
          report.environment.build.git_dirty,
          report.complete};
}

}  // namespace

Comparison compare_reports(const SweepReport& baseline, const SweepReport& current,
                           const CompareOptions& options, const std::string& baseline_name,
                           const std::string& current_name) {
  SS_CHECK(options.alpha > 0.0 && options.alpha < 1.0,
           "alpha {} is not a significance level (accepted: 0 < alpha < 1, e.g. 0.05)",
           options.alpha);
  SS_CHECK(options.min_phase_change >= 0.0, "minimum phase change {} is negative",
           options.min_phase_change);
  Comparison out;
  out.options = options;
  out.baseline = info_of(baseline, baseline_name);
  out.current = info_of(current, current_name);
  out.environment = compare_environments(baseline.environment, current.environment);
  const auto base_points = index_points(baseline, baseline_name);
  const auto cur_points = index_points(current, current_name);
  for (const SweepPoint& b : baseline.points) {
    PointComparison pc;
    pc.key = b.key();
    pc.label = b.label();
    pc.baseline_error = b.error;
    const auto it = cur_points.find(pc.key);
    if (it == cur_points.end()) {
      pc.status = PointStatus::kOnlyInBaseline;
    } else {
      const SweepPoint& c = *it->second;
      pc.current_error = c.error;
      if (b.ok() && c.ok()) {
        pc.status = PointStatus::kCompared;
        compare_point(pc, b, c, options);
      } else if (b.ok()) {
        pc.status = PointStatus::kFailedInCurrent;
      } else if (c.ok()) {
        pc.status = PointStatus::kFailedInBaseline;
      } else {
        pc.status = PointStatus::kFailedInBoth;
      }
    }
    out.points.push_back(std::move(pc));
  }
  for (const SweepPoint& c : current.points) {
    if (base_points.count(c.key()) != 0) continue;
    PointComparison pc;
    pc.key = c.key();
    pc.label = c.label();
    pc.current_error = c.error;
    pc.status = PointStatus::kOnlyInCurrent;
    out.points.push_back(std::move(pc));
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// Formatting.

namespace {

// fmt 9 has no '%' presentation.
std::string percent(double fraction) {
  return fmt::format("{:g}%", 100.0 * fraction);
}

// Both values of a row get the decimals the larger one needs, so that they line up.
int decimals(Metric metric, const MetricComparison& m) {
  if (metric == Metric::kThroughput || metric == Metric::kEfficiency) return 1;
  const double a = std::max(std::abs(m.baseline), std::abs(m.current));
  return a >= 100.0 ? 1 : a >= 1.0 ? 2 : 3;
}

std::string value_text(const MetricComparison& m, double v) {
  if (m.metric == Metric::kEfficiency) return fmt::format("{:.1f}%", 100.0 * v);
  return fmt::format("{:.{}f}", v, decimals(m.metric, m));
}

std::string change_text(double relative) {
  if (std::isinf(relative)) return relative > 0 ? "new" : "-new";
  return fmt::format("{:+.1f}%", 100.0 * relative);
}

std::string p_text(const MannWhitney& t) {
  const std::string p = t.p_value < 0.001 ? "<0.001" : fmt::format("{:.3f}", t.p_value);
  return t.exact_enough ? p : p + "*";
}

// Only the thresholds that differ from the default are listed after it.
std::string thresholds_text(const Thresholds& t) {
  std::string overrides;
  for (const Metric m : kAllMetrics) {
    if (t.of(m) != t.fallback) {
      overrides +=
          fmt::format("{}{} {}", overrides.empty() ? "" : ", ", metric_name(m), percent(t.of(m)));
    }
  }
  return percent(t.fallback) + (overrides.empty() ? "" : " (" + overrides + ")");
}

std::string rule_text(const CompareOptions& o) {
  return fmt::format(
      "a regression is a change for the worse beyond its threshold, {}, that a Mann-Whitney U "
      "test on the per-step samples finds significant (p < {:g}); a phase must also move by at "
      "least {} of the baseline's step time",
      thresholds_text(o.thresholds), o.alpha, percent(o.min_phase_change));
}

// The commit a report's binary was built from, short.
std::string commit_text(const ReportInfo& r) {
  if (r.git_commit.empty()) return "unknown";
  return r.git_commit.size() > 12 ? r.git_commit.substr(0, 12) : r.git_commit;
}

std::string report_text(const ReportInfo& r) {
  std::string commit = commit_text(r);
  if (r.git_dirty) commit += " (dirty)";
  return fmt::format("{}  (scalescope {}, commit {}, {}{})", r.name, r.tool_version, commit,
                     r.created, r.complete ? "" : ", incomplete sweep");
}

std::string report_markdown(const ReportInfo& r) {
  return fmt::format("`{}` (scalescope {}, commit `{}`{}, {}{})", r.name, r.tool_version,
                     commit_text(r), r.git_dirty ? " dirty" : "", r.created,
                     r.complete ? "" : ", incomplete sweep");
}

std::string point_problem(const PointComparison& p) {
  switch (p.status) {
    case PointStatus::kFailedInCurrent:
      return fmt::format("failed in the current report: {}", p.current_error);
    case PointStatus::kFailedInBaseline:
      return fmt::format("failed in the baseline ({}), ok now", p.baseline_error);
    case PointStatus::kFailedInBoth:
      return fmt::format("failed in both: {}", p.current_error);
    default:
      return std::string(to_string(p.status));
  }
}

std::string summary_text(const Comparison& c) {
  const auto points_with = [&c](auto count) {
    return std::count_if(c.points.begin(), c.points.end(),
                         [&count](const PointComparison& p) { return count(p) > 0; });
  };
  const auto regressed = points_with([](const PointComparison& p) { return p.regressions(); });
  const auto improved = points_with([](const PointComparison& p) { return p.improvements(); });
  std::string text = fmt::format(
      "{}: {} metric{} regressed in {} point{}, {} improved in {}, of {} point{} compared",
      c.regressed() ? "REGRESSION" : "no regression", c.regressions(),
      c.regressions() == 1 ? "" : "s", regressed, regressed == 1 ? "" : "s", c.improvements(),
      improved, c.compared(), c.compared() == 1 ? "" : "s");
  if (c.newly_failed() > 0) {
    text += fmt::format("; {} point{} that ran in the baseline failed", c.newly_failed(),
                        c.newly_failed() == 1 ? "" : "s");
  }
  return text;
}

std::string weak_text() {
  return fmt::format(
      "fewer than {} measured steps on a side: the test is weak, its p-value rough; measure more "
      "steps or repeats for a verdict to trust",
      kMannWhitneyMinSamples);
}

std::string markdown_cell(std::string text) {
  std::string out;
  for (const char ch : text) {
    if (ch == '|') out += '\\';
    out += ch;
  }
  return out;
}

}  // namespace

std::string format_comparison_table(const Comparison& c) {
  std::string out;
  auto it = std::back_inserter(out);
  fmt::format_to(it, "baseline  {}\ncurrent   {}\n", report_text(c.baseline),
                 report_text(c.current));
  if (!c.environment.empty()) {
    fmt::format_to(it,
                   "\nWARNING: the environments differ, so a change may come from the machine "
                   "and not the code:\n");
    for (const EnvironmentDifference& d : c.environment) {
      fmt::format_to(it, "  {:<14} {}  ->  {}\n", d.what, d.baseline, d.current);
    }
  }
  for (const PointComparison& p : c.points) {
    if (p.status != PointStatus::kCompared) continue;
    fmt::format_to(it, "\n{}  ({} vs {} measured steps)\n", p.label, p.baseline_steps,
                   p.current_steps);
    fmt::format_to(it, "  {:<18} {:<10} {:>11} {:>11} {:>8} {:>10} {:>8}  {}\n", "metric", "unit",
                   "baseline", "current", "change", "threshold", "p", "verdict");
    for (const MetricComparison& m : p.metrics) {
      const std::string verdict =
          m.change == Change::kRegressed ? "REGRESSED"
          : m.change == Change::kNegligible
              ? fmt::format("negligible (< {} of step)", percent(c.options.min_phase_change))
              : std::string(to_string(m.change));
      fmt::format_to(it, "  {:<18} {:<10} {:>11} {:>11} {:>8} {:>10} {:>8}  {}\n",
                     metric_name(m.metric), metric_unit(m.metric), value_text(m, m.baseline),
                     value_text(m, m.current), change_text(m.relative_change), percent(m.threshold),
                     p_text(m.test), verdict);
    }
  }
  bool header = false;
  for (const PointComparison& p : c.points) {
    if (p.status == PointStatus::kCompared) continue;
    if (!header) fmt::format_to(it, "\nnot compared:\n");
    header = true;
    fmt::format_to(it, "  {}: {}\n", p.label, point_problem(p));
  }
  if (c.weak()) fmt::format_to(it, "\n* {}\n", weak_text());
  fmt::format_to(it, "\nrule: {}\n{}\n", rule_text(c.options), summary_text(c));
  return out;
}

std::string format_comparison_markdown(const Comparison& c) {
  std::string out;
  auto it = std::back_inserter(out);
  fmt::format_to(
      it, "## {} scalescope compare: {}\n\n",
      c.regressed() ? ":x:" : ":white_check_mark:", c.regressed() ? "regression" : "no regression");
  fmt::format_to(it,
                 "**{} regression{}**, {} improvement{} in {} compared point{}{} · threshold {} "
                 "· α = {:g}\n\n",
                 c.regressions(), c.regressions() == 1 ? "" : "s", c.improvements(),
                 c.improvements() == 1 ? "" : "s", c.compared(), c.compared() == 1 ? "" : "s",
                 c.newly_failed() > 0
                     ? fmt::format(" · **{} point{} failed that ran before**", c.newly_failed(),
                                   c.newly_failed() == 1 ? "" : "s")
                     : "",
                 thresholds_text(c.options.thresholds), c.options.alpha);
  fmt::format_to(it, "Baseline {} → current {}\n\n", report_markdown(c.baseline),
                 report_markdown(c.current));
  if (!c.environment.empty()) {
    fmt::format_to(it,
                   "> [!WARNING]\n> **The environments differ**, so a change may come from the "
                   "machine and not the code:\n");
    for (const EnvironmentDifference& d : c.environment) {
      fmt::format_to(it, "> - {}: `{}` → `{}`\n", d.what, d.baseline, d.current);
    }
    fmt::format_to(it, "\n");
  }
  const auto row = [&](const MetricComparison& m, const std::string& first) {
    const std::string verdict = m.change == Change::kRegressed  ? ":red_circle: regressed"
                                : m.change == Change::kImproved ? ":green_circle: improved"
                                                                : std::string(to_string(m.change));
    const std::string unit(metric_unit(m.metric));
    fmt::format_to(
        it, "| {}{} | {} | {} | {} | {} | {} | {} |\n", first,
        markdown_cell(std::string(metric_name(m.metric))) + (unit.empty() ? "" : " (" + unit + ")"),
        value_text(m, m.baseline), value_text(m, m.current), change_text(m.relative_change),
        percent(m.threshold), p_text(m.test), verdict);
  };
  bool changes = false;
  for (const PointComparison& p : c.points) {
    for (const MetricComparison& m : p.metrics) {
      if (m.change != Change::kRegressed && m.change != Change::kImproved) continue;
      if (!changes) {
        fmt::format_to(it,
                       "| point | metric | baseline | current | change | threshold | p | verdict "
                       "|\n| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |\n");
      }
      changes = true;
      row(m, markdown_cell(p.label) + " | ");
    }
  }
  if (!changes) {
    fmt::format_to(it, "No metric moved beyond its threshold with significance.\n");
  }
  bool header = false;
  for (const PointComparison& p : c.points) {
    if (p.status == PointStatus::kCompared) continue;
    if (!header) fmt::format_to(it, "\n**Points not compared**\n\n");
    header = true;
    fmt::format_to(it, "- {}`{}`: {}\n",
                   p.status == PointStatus::kFailedInCurrent ? ":red_circle: " : "", p.label,
                   markdown_cell(point_problem(p)));
  }
  if (c.weak()) {
    fmt::format_to(it, "\n> [!NOTE]\n> p-values marked * come from {}.\n", weak_text());
  }
  if (c.compared() > 0) {
    fmt::format_to(it, "\n<details><summary>All metrics of the {} compared point{}</summary>\n",
                   c.compared(), c.compared() == 1 ? "" : "s");
    for (const PointComparison& p : c.points) {
      if (p.status != PointStatus::kCompared) continue;
      fmt::format_to(it,
                     "\n**{}** ({} vs {} measured steps)\n\n| metric | baseline | current | "
                     "change | threshold | p | verdict |\n| --- | ---: | ---: | ---: | ---: | ---: "
                     "| --- |\n",
                     markdown_cell(p.label), p.baseline_steps, p.current_steps);
      for (const MetricComparison& m : p.metrics) row(m, "");
    }
    fmt::format_to(it, "\n</details>\n");
  }
  fmt::format_to(it, "\n<sub>Rule: {}.</sub>\n", rule_text(c.options));
  return out;
}

}  // namespace scalescope
