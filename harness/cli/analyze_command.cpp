// `scalescope analyze TRACE... [--baseline TRACE]`: the scaling diagnosis of a user's own
// training job from its traces (reports/trace_analysis): per rank and step where the time went,
// across ranks the slowest and the skew, against a one-rank baseline the speedup, efficiency
// and efficiency-loss split, with the verdicts of scalescope's sweeps.
#include <fmt/chrono.h>
#include <fmt/format.h>

#include <ctime>
#include <memory>

#include "core/build_info.h"
#include "core/check.h"
#include "harness/cli/commands.h"
#include "harness/cli/option_app.h"
#include "reports/trace_analysis/analysis_output.h"

namespace scalescope::cli {
namespace {

struct AnalyzeArgs {
  std::vector<std::string> traces;
  std::string baseline;
  std::string output;
  std::string html;
  std::string step_range;
  std::string name = "job";
  int64_t batch = 0;
  bool quiet = false;
  OptionList list;
};

int run_analyze(const AnalyzeArgs& a) {
  SS_CHECK_INPUT(!a.traces.empty(), "give at least one trace (TRACE...: one per rank)");
  traces::AnalysisReport report;
  report.tool_version = build_info::kScalescopeVersion;
  report.created = fmt::format("{:%Y-%m-%dT%H:%M:%SZ}", fmt::gmtime(std::time(nullptr)));
  report.name = a.name;
  report.batch = a.batch;
  report.step_range = a.step_range;
  // What the traces hold or lack is the user's to fix: named without our source line.
  as_usage_error([&] {
    report.job = traces::read_job(a.traces, a.step_range);
    if (!a.baseline.empty()) report.baseline = traces::read_job({a.baseline}, a.step_range);
    traces::analyze_report(report);
  });
  if (!a.quiet) fmt::print("{}", traces::format_analysis_tables(report));
  if (!a.output.empty()) {
    traces::write_analysis_report(a.output, report);
    fmt::print("analysis written to {}\n", a.output);
  }
  if (!a.html.empty()) {
    traces::write_analysis_html(a.html, report);
    fmt::print("page written to {}\n", a.html);
  }
  return 0;
}

void declare(AnalyzeArgs& a) {
  OptionList& list = a.list;
  list.add("TRACE", a.traces,
           "Traces of the job, one per rank or one holding every rank, or a folder of them: "
           "Kineto's Chrome trace (torch.profiler's export_chrome_trace or TensorBoard handler; "
           ".gz accepted; a PyTorch without Kineto writes its legacy profiler's, also read), an "
           "Nsight Systems SQLite export (nsys export --type sqlite) or scalescope's own "
           "(sweep --trace)")
      .command_line_only();
  list.add("--baseline", a.baseline,
           "A one-rank trace of the same job (same per-rank batch), or its folder: speedup, "
           "efficiency and the efficiency-loss split against it")
      .command_line_only();
  // Checked when settled, before any trace is read: reading large traces takes a while.
  list.add("-o,--output", a.output, "Write the analysis as JSON (analysis-report.schema.json)",
           writable_file())
      .command_line_only();
  list.add("--html", a.html, "Write the analysis as an HTML page", writable_file())
      .command_line_only();
  list.add("--step-range", a.step_range,
           "Name of the range that marks a step (an NVTX range, a record_function): ranges with "
           "that name, or that name followed by a non-word character ('train_step' takes "
           "'train_step 3'). Default: ProfilerStep#N, or scalescope's own steps")
      .command_line_only()
      .shown_default("ProfilerStep#N");
  list.add("--name", a.name, "The job's name in tables and reports; compare matches jobs by it",
           [](const std::string& v) { return v.empty() ? std::string("must not be empty") : ""; })
      .command_line_only();
  list.add("--batch", a.batch,
           "Samples per rank and step, for throughput (default: unknown; samples/s then counts "
           "steps)",
           at_least<int64_t>(0, "must be 0 (unknown) or a positive number of samples"))
      .command_line_only();
  list.add("-q,--quiet", a.quiet, "No tables (with -o or --html)").command_line_only();
}

}  // namespace

void add_analyze_command(CLI::App& app, Action& action) {
  auto a = std::make_shared<AnalyzeArgs>();
  declare(*a);
  CLI::App* cmd = app.add_subcommand(
      "analyze",
      "The scaling diagnosis of your own training job from its traces (Kineto, Nsight Systems "
      "SQLite, scalescope): per rank and step, across ranks, and against a one-rank baseline");
  add_options(*cmd, a->list);
  cmd->callback([&action, a, cmd] {
    action = [a, cmd] {
      settle_options(*cmd, a->list);
      return run_analyze(*a);
    };
  });
}

}  // namespace scalescope::cli
