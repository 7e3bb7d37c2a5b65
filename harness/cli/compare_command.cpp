// `scalescope compare BASELINE CURRENT`: the regression gate of a CI job. Exit status 0: no
// regression; 1: a regression (or a point that ran in the baseline fails now); 2: bad input (an
// unreadable or invalid report, a bad flag value, or, with --strict, environments that differ)
// and any other error, which must not read as a regression.
#include <fmt/format.h>

#include <cstdio>
#include <memory>

#include "core/check.h"
#include "core/fs.h"
#include "harness/cli/commands.h"
#include "harness/cli/option_app.h"
#include "reports/compare/compare.h"
#include "reports/compare/format.h"
#include "reports/trace_analysis/analysis_report.h"

namespace scalescope::cli {
namespace {

constexpr int kNoRegression = 0;
constexpr int kRegression = 1;
constexpr int kError = 2;  // bad input among them

struct CompareArgs {
  std::string baseline;
  std::string current;
  std::vector<std::string> thresholds;  // each a --threshold value; items joined
  double alpha = 0.05;
  std::string min_phase_change = "1%";
  std::string markdown;
  bool strict = false;
  OptionList list;  // the declarations of the above
};

int run_compare(const CompareArgs& a) {
  // Every flag is checked before a report is read.
  CompareOptions options;
  std::string spec;
  for (const std::string& t : a.thresholds) spec += (spec.empty() ? "" : ",") + t;
  if (!spec.empty()) options.thresholds = parse_thresholds(spec);
  options.alpha = a.alpha;
  options.min_phase_change = parse_percent(a.min_phase_change, "--min-phase-change");

  // What is wrong inside either file is the user's to fix: named without our source line.
  SweepReport baseline, current;
  as_usage_error([&] {
    baseline = traces::read_comparable_report(a.baseline);
    current = traces::read_comparable_report(a.current);
  });
  const Comparison c = compare_reports(baseline, current, options, a.baseline, a.current);
  if (a.strict && !c.environment.empty()) {
    std::string list;
    for (const EnvironmentDifference& d : c.environment) {
      list +=
          fmt::format("{}{} '{}' vs '{}'", list.empty() ? "" : "; ", d.what, d.baseline, d.current);
    }
    throw_usage_error(fmt::format("--strict: the environments of {} and {} differ: {}", a.baseline,
                                  a.current, list));
  }
  fmt::print("{}", format_comparison_table(c));
  if (!a.markdown.empty()) {
    write_file_atomic(a.markdown, format_comparison_markdown(c));
    fmt::print("markdown written to {}\n", a.markdown);
  }
  if (c.regressed()) return kRegression;
  // A gate that passed comparing nothing would pass a sweep that measured nothing.
  SS_CHECK_INPUT(!c.nothing_compared(),
                 "no point ran in both {} and {} (the points not compared are listed above), so "
                 "nothing could be found to have regressed",
                 a.baseline, a.current);
  return kNoRegression;
}

void declare(CompareArgs& a) {
  OptionList& list = a.list;
  list.add("BASELINE", a.baseline, "The reference sweep report or analysis").require();
  list.add("CURRENT", a.current, "The sweep report or analysis to judge").require();
  list.add("--threshold", a.thresholds,
           fmt::format("Relative change that counts, default 5%: PERCENT for every metric and/or "
                       "NAME=PERCENT items, comma-separated (names: {}), e.g. "
                       "5%,throughput=3%,allreduce_exposed=10%",
                       metric_names()))
      .shown_default("5%");
  list.add("--alpha", a.alpha,
           "Significance level of the Mann-Whitney U test on the per-step samples",
           [](const double& alpha) {
             return alpha > 0.0 && alpha < 1.0
                        ? std::string()
                        : std::string(
                              "is not a significance level (accepted: 0 < alpha < 1, e.g. 0.05)");
           });
  list.add("--min-phase-change", a.min_phase_change,
           "A phase counts only when its median moved by at least this share of the baseline's "
           "step time");
  list.add("--markdown", a.markdown,
           "Also write the comparison as Markdown (a pull-request comment) to this file",
           writable_file());
  list.add("--strict", a.strict,
           "Refuse (exit status 2) when the environments differ (GPUs, driver, libraries, build "
           "type, CPU, cores)");
}

}  // namespace

void add_compare_command(CLI::App& app, Action& action) {
  auto args = std::make_shared<CompareArgs>();
  declare(*args);
  CLI::App* cmd = app.add_subcommand(
      "compare",
      "Compare two sweep reports (or two analyses of `scalescope analyze -o`) point by point; "
      "exit status 1 when a metric regressed beyond its threshold and beyond noise, 2 on bad "
      "input");
  add_options(*cmd, args->list);
  cmd->callback([&action, args, cmd] {
    // Any error is status 2 here, not main's 1: 1 means "regression" to a CI job.
    set_error_status(kError);
    action = [args, cmd] {
      (void)settle_options(*cmd, args->list);
      return run_compare(*args);
    };
  });
}

}  // namespace scalescope::cli
