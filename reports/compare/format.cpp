#include "reports/compare/format.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>

namespace scalescope {

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
  for (const Metric m : Metric::all()) {
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
      c.regressed()          ? "REGRESSION"
      : c.nothing_compared() ? "NOTHING COMPARED"
                             : "no regression",
      c.regressions(), c.regressions() == 1 ? "" : "s", regressed, regressed == 1 ? "" : "s",
      c.improvements(), improved, c.compared(), c.compared() == 1 ? "" : "s");
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

namespace {

// A row of a Markdown table of metrics; `first` is the cells before the metric's, if any.
std::string markdown_row(const MetricComparison& m, const std::string& first) {
  const std::string verdict = m.change == Change::kRegressed  ? ":red_circle: regressed"
                              : m.change == Change::kImproved ? ":green_circle: improved"
                                                              : std::string(to_string(m.change));
  const std::string unit(metric_unit(m.metric));
  return fmt::format(
      "| {}{} | {} | {} | {} | {} | {} | {} |\n", first,
      markdown_cell(std::string(metric_name(m.metric))) + (unit.empty() ? "" : " (" + unit + ")"),
      value_text(m, m.baseline), value_text(m, m.current), change_text(m.relative_change),
      percent(m.threshold), p_text(m.test), verdict);
}

// The verdict, the counts and the reports compared.
void markdown_heading(std::string& out, const Comparison& c) {
  auto it = std::back_inserter(out);
  const char* verdict = c.regressed() ? ":x: scalescope compare: regression"
                        : c.nothing_compared()
                            ? ":warning: scalescope compare: nothing compared"
                            : ":white_check_mark: scalescope compare: no regression";
  fmt::format_to(it, "## {}\n\n", verdict);
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
}

// The metrics that regressed or improved, of every point.
void markdown_changes(std::string& out, const Comparison& c) {
  bool changes = false;
  for (const PointComparison& p : c.points) {
    for (const MetricComparison& m : p.metrics) {
      if (m.change != Change::kRegressed && m.change != Change::kImproved) continue;
      if (!changes) {
        out +=
            "| point | metric | baseline | current | change | threshold | p | verdict "
            "|\n| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |\n";
      }
      changes = true;
      out += markdown_row(m, markdown_cell(p.label) + " | ");
    }
  }
  if (!changes) out += "No metric moved beyond its threshold with significance.\n";
}

// Every metric of every compared point, collapsed.
void markdown_details(std::string& out, const Comparison& c) {
  auto it = std::back_inserter(out);
  fmt::format_to(it, "\n<details><summary>All metrics of the {} compared point{}</summary>\n",
                 c.compared(), c.compared() == 1 ? "" : "s");
  for (const PointComparison& p : c.points) {
    if (p.status != PointStatus::kCompared) continue;
    fmt::format_to(it,
                   "\n**{}** ({} vs {} measured steps)\n\n| metric | baseline | current | "
                   "change | threshold | p | verdict |\n| --- | ---: | ---: | ---: | ---: | ---: "
                   "| --- |\n",
                   markdown_cell(p.label), p.baseline_steps, p.current_steps);
    for (const MetricComparison& m : p.metrics) out += markdown_row(m, "");
  }
  out += "\n</details>\n";
}

}  // namespace

std::string format_comparison_markdown(const Comparison& c) {
  std::string out;
  markdown_heading(out, c);
  markdown_changes(out, c);
  auto it = std::back_inserter(out);
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
  if (c.compared() > 0) markdown_details(out, c);
  fmt::format_to(it, "\n<sub>Rule: {}.</sub>\n", rule_text(c.options));
  return out;
}

}  // namespace scalescope
