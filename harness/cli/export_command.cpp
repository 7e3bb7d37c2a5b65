// `scalescope export FILE --format ...`: a sweep report in another benchmark tracker's format
// (reports/writers/export.h says what each holds).
#include <fmt/format.h>

#include <cstdio>
#include <memory>

#include "core/check.h"
#include "core/fs.h"
#include "harness/cli/commands.h"
#include "harness/cli/option_app.h"
#include "reports/json_reader.h"
#include "reports/writers/export.h"

namespace scalescope::cli {
namespace {

struct ExportArgs {
  std::string file;
  std::string format;
  std::string output = "-";
  std::string metric;  // github-action-benchmark only; empty: throughput
  OptionList list;     // the declarations of the above
};

int run_export(const ExportArgs& a) {
  const ExportFormat format = parse_export_format(a.format);
  SS_CHECK_INPUT(a.metric.empty() || format == ExportFormat::kGithubActionBenchmark,
                 "--metric {} applies to --format github-action-benchmark only (the other formats "
                 "hold every metric)",
                 a.metric);
  const GithubMetric metric =
      a.metric.empty() ? GithubMetric::kThroughput : parse_github_metric(a.metric);
  SweepReport report;
  as_usage_error([&] { report = read_sweep_report(a.file); });  // the user's file to fix
  nlohmann::json j;
  switch (format) {
    case ExportFormat::kGbench:
      j = to_gbench_json(report);
      break;
    case ExportFormat::kGithubActionBenchmark:
      j = to_github_action_benchmark_json(report, metric);
      break;
    case ExportFormat::kBencher:
      j = to_bencher_json(report);
      break;
  }
  if (format != ExportFormat::kGbench) {
    for (const SweepPoint& p : report.points) {
      if (!p.ok()) {
        fmt::print(stderr, "export: left out {}, which failed ({})\n", p.label(), p.error);
      }
    }
  }
  const std::string text = dump_json(j, 2) + "\n";
  if (a.output == "-") {
    fmt::print("{}", text);
  } else {
    write_file_atomic(a.output, text);
  }
  return 0;
}

void declare(ExportArgs& a) {
  OptionList& list = a.list;
  list.add("FILE", a.file, "A report written by `scalescope sweep`").require();
  list.add("--format",
           Choice{export_format_names(), [&a] { return a.format; },
                  [&a](const std::string& name) { a.format = name; }},
           "gbench (Google Benchmark JSON, for its compare.py), github-action-benchmark "
           "(customBiggerIsBetter; customSmallerIsBetter with --metric step-time) or bencher "
           "(Bencher Metric Format)")
      .require();
  list.add("-o,--output", a.output, "Output file; - for standard output",
           writable_file(/*dash_is_stdout=*/true));
  list.add("--metric",
           Choice{github_metric_names(), [&a] { return a.metric; },
                  [&a](const std::string& name) { a.metric = name; }},
           "github-action-benchmark only: throughput (samples/s, bigger is better; the default) "
           "or step-time (median ms, smaller is better)");
}

}  // namespace

void add_export_command(CLI::App& app, Action& action) {
  auto args = std::make_shared<ExportArgs>();
  declare(*args);
  CLI::App* cmd =
      app.add_subcommand("export", "Write a sweep report in another benchmark tracker's format");
  add_options(*cmd, args->list);
  cmd->callback([&action, args, cmd] {
    action = [args, cmd] {
      (void)settle_options(*cmd, args->list);
      return run_export(*args);
    };
  });
}

}  // namespace scalescope::cli
