// `scalescope sweep`: the main job. `scalescope report FILE`: the tables of a finished sweep.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "core/check.h"
#include "core/fs.h"
#include "core/interrupt.h"
#include "harness/cli/commands.h"
#include "harness/cli/launch.h"
#include "harness/cli/option_app.h"
#include "harness/sweep/sweep.h"
#include "harness/telemetry/environment.h"
#include "reports/html/page.h"
#include "reports/json_reader.h"
#include "reports/writers/table.h"

namespace scalescope::cli {
namespace {

struct SweepArgs {
  SweepOptions options;
  LaunchOptions launch;
  std::string resume;
  std::string html;  // also write the report as a self-contained HTML page here
  bool quiet = false;
};

// The sweep's declarations and those of this command alone.
void add_sweep_command_options(OptionList& list, SweepArgs& a) {
  add_sweep_options(list, a.options);
  add_launch_options(list, a.launch);
  list.add("--resume", a.resume,
           "Continue the sweep of this report: its options, its finished points kept")
      .command_line_only();
  list.add("--html", a.html,
           "Also write the report as one self-contained HTML page (charts, verdicts, "
           "environment) at the end of the sweep")
      .command_line_only();
  list.add("-q,--quiet", a.quiet, "No progress, only the tables").command_line_only();
}

std::string clock_text(double seconds) {
  const auto s = static_cast<long>(seconds + 0.5);
  return s >= 3600 ? fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
                   : fmt::format("{}:{:02}", s / 60, s % 60);
}

// A file rank 0 reads (the others' nodes may not have it), its text given to every
// process; an error reading it is every process's error.
std::string read_on_rank0(Cluster& cluster, const std::string& path, int64_t timeout_ms) {
  nlohmann::json mine = nullptr;
  if (cluster.rank() == 0) {
    try {
      mine = {{"text", read_file(path)}};
    } catch (const Error& e) {
      mine = {{"error", e.message()}};
    }
  }
  const std::vector<std::string> all = cluster.exchange(
      dump_json(mine), std::chrono::milliseconds(timeout_ms), fmt::format("sharing {}", path));
  const nlohmann::json first = nlohmann::json::parse(all.front());
  if (first.contains("error")) throw_usage_error(first.at("error").get<std::string>());
  return first.at("text").get<std::string>();
}

nlohmann::json parse_json_text(const std::string& text, const std::string& path, const char* what) {
  return parse_json(text, fmt::format("{} {}", what, path));
}

// Whether the report is written where --resume read it: that file is continued, not replaced.
bool continues_in_place(const std::string& output, const std::string& resume) {
  std::error_code ec;
  return !resume.empty() && std::filesystem::equivalent(output, resume, ec);
}

// The command line's options, joined to the processes of the launch. Precedence: defaults
// < --resume's report (its "config" block) or --config's file < flags, by CLI11.
struct Parsed {
  SweepArgs args;
  Launch launch;
  std::unique_ptr<SweepReport> resume;
  OptionSources names;
};

void parse_sweep(const CLI::App& cmd, const SweepArgs& given, const OptionList& given_list,
                 Parsed& p) {
  (void)settle_options(cmd, given_list);  // the flags alone, checked before joining
  SS_CHECK_INPUT(cmd.get_config_ptr()->count() == 0 || given.resume.empty(),
                 "--resume continues a report with its own options; do not give --config too");
  p.launch = join_launch(given.launch, given.options.train.collective_timeout_ms);
  nlohmann::json config;
  if (!given.resume.empty()) {
    // Rank 0 wrote the report; the other processes' nodes may not have it.
    const std::string text =
        read_on_rank0(*p.launch.cluster, given.resume, given.options.train.collective_timeout_ms);
    as_usage_error([&] {
      p.resume = std::make_unique<SweepReport>(
          sweep_report_from_json(parse_json_text(text, given.resume, "report"), given.resume));
    });
    config = p.resume->config;
    config["output"] = given.resume;
  }
  OptionList list;
  add_sweep_command_options(list, p.args);
  p.names = parse_with_config(list, command_arguments(), p.resume ? &config : nullptr,
                              given.resume + " (its config)");
}

// The progress line on standard error (rewritten in place on a terminal).
SweepProgress progress_printer() {
  const bool tty = isatty(STDERR_FILENO) == 1;
  SweepProgress progress;
  progress.on_run = [tty](const SweepPoint& p, int repeat, int done, int total, double elapsed) {
    const std::string left =
        done > 0 ? "~" + clock_text(elapsed / done * (total - done)) + " left" : "";
    const int width = 24;
    const int filled = total > 0 ? done * width / total : width;
    const std::string bar = std::string(static_cast<size_t>(filled), '#') +
                            std::string(static_cast<size_t>(width - filled), '.');
    const std::string line =
        fmt::format("[{}] {:>3}/{} runs  {} (repeat {})  {} elapsed {}", bar, done, total,
                    p.label(), repeat + 1, clock_text(elapsed), left);
    if (tty) {
      fmt::print(stderr, "\r\033[K{}", line);
    } else {
      fmt::print(stderr, "{}\n", line);
    }
    std::fflush(stderr);
  };
  progress.on_point_done = [tty](const SweepPoint& p) {
    if (tty) fmt::print(stderr, "\r\033[K");
    if (p.ok()) {
      const std::optional<TimeToTarget>& t = p.summary.time_to_target;
      const std::string target =
          t ? fmt::format("; {} {:.4g} reached in {} of {} runs{}", t->metric, t->value, t->reached,
                          t->repeats,
                          t->reached > 0 ? fmt::format(", median {:.0f} steps", t->steps) : "")
            : "";
      fmt::print(stderr, "done: {}: {:.0f} samples/s, step {:.2f} ms{}\n", p.label(),
                 p.summary.throughput.value, p.summary.step_ms_median, target);
    } else {
      fmt::print(stderr, "FAILED: {}: {}\n", p.label(), p.error);
    }
    std::fflush(stderr);
  };
  return progress;
}

// The sweep's first line: what it runs on and with which models, and why when it chose.
std::string sweep_choice_line(const SweepOptions& o, const DeviceAxis& axis,
                              const OptionSources& names) {
  const int processes = o.train.cluster != nullptr ? o.train.cluster->size() : 1;
  const std::string devices =
      names.given("devices")
          ? to_string(axis)
          : fmt::format("{} (no {} given, and {})", to_string(axis), names.name("devices"),
                        default_device_axis(processes).reason);
  std::vector<std::string> models;
  for (const std::string& m : o.models) {
    const auto batches = o.model_batches.find(m);
    models.push_back(batches == o.model_batches.end()
                         ? m
                         : fmt::format("{} (batch {})", m, fmt::join(batches->second, ", ")));
  }
  const char* which = names.given("models")            ? ""
                      : axis.kind == DeviceKind::kCuda ? ", the GPU defaults"
                                                       : ", the defaults";
  return fmt::format("sweep on {}; models: {}{}", devices, fmt::join(models, ", "), which);
}

// A sweep whose points all failed measured nothing: a script or CI job must not read it as a
// result. Some failed points (out of memory at the largest batch, say) are a finding, and exit 0.
int sweep_exit_status(const SweepReport& report) {
  const auto ran = std::count_if(report.points.begin(), report.points.end(),
                                 [](const SweepPoint& p) { return p.ok(); });
  if (ran > 0 || report.points.empty()) return 0;
  std::fflush(stdout);  // the tables this points to come first, also through a pipe
  fmt::print(stderr,
             "scalescope: error: none of the sweep's {} points ran (each one's error is in its "
             "table row above and in the report)\n",
             report.points.size());
  return 1;
}

int run_sweep_command(const CLI::App& cmd, const SweepArgs& given, const OptionList& list) {
  Parsed parsed;
  parse_sweep(cmd, given, list, parsed);
  const SweepArgs& args = parsed.args;
  const OptionSources& names = parsed.names;
  const bool lead = parsed.launch.lead;
  SweepOptions o = args.options;
  DeviceAxis axis;
  as_usage_error([&] { axis = resolve_devices(o, names); });  // the models follow from it
  if (!names.given("models") && axis.kind == DeviceKind::kCuda) {
    o.models.clear();
    for (const DefaultModel& m : kGpuDefaultModels) {
      o.models.push_back(m.spec);
      if (!names.given("batch") && !names.given("global_batch"))
        o.model_batches[m.spec] = m.batches;
    }
  }
  drop_repeated_values(o);
  o.command_line = command_line();
  o.train.cluster = parsed.launch.cluster.get();
  check_together(parsed.launch, o.train.collective_timeout_ms, [&] {
    as_usage_error([&] { validate(o, names); });  // every value, before anything runs
    SS_CHECK_INPUT(args.html.empty() || args.html != o.output,
                   "{}: the same file as the JSON report ({}); give the page its own name",
                   names.subject("html", args.html), names.name("output"));
    if (!lead) return;  // the files it writes: found now, not after the sweep has run
    naming(names, "output", o.output, [&] { check_can_write(o.output); });
    if (!args.html.empty()) naming(names, "html", args.html, [&] { check_can_write(args.html); });
    if (!o.trace_prefix.empty()) {
      // As the traces will be named (sweep.cpp), so that the error shows the pattern.
      naming(names, "trace", o.trace_prefix,
             [&] { check_can_write(o.trace_prefix + "<point>.trace.json"); });
    }
  });
  // Resolved again with the launch's processes, which the default axis counts (validated now).
  if (lead && !args.quiet)
    fmt::print("{}\n", sweep_choice_line(o, resolve_devices(o, names), names));
  if (lead && !continues_in_place(o.output, args.resume)) {
    std::string kept;
    naming(names, "output", o.output, [&] { kept = keep_previous(o.output); });
    if (!kept.empty()) fmt::print("the report already in {} is kept as {}\n", o.output, kept);
  }
  std::fflush(stdout);           // before the progress lines on standard error
  install_interrupt_handlers();  // run_sweep stops between steps and keeps finished points
  const SweepProgress progress = !args.quiet && lead ? progress_printer() : SweepProgress{};
  Environment env = capture_environment(o.command_line);
  env.network = parsed.launch.cluster->network();
  const SweepReport report = run_sweep(o, env, progress, parsed.resume.get());
  if (!lead) return 0;
  fmt::print("{}", format_sweep_tables(report));
  fmt::print("\nreport written to {}\n", o.output);
  if (!args.html.empty()) {
    write_sweep_html(args.html, report);
    fmt::print("HTML report written to {}\n", args.html);
  }
  return sweep_exit_status(report);
}

}  // namespace

void add_sweep_command(CLI::App& app, Action& action) {
  // The flags parsed here serve --help, usage errors and joining the launch; the options
  // are parsed again with the config file once the processes have joined (parse_sweep).
  auto args = std::make_shared<SweepArgs>();
  auto list = std::make_shared<OptionList>();
  add_sweep_command_options(*list, *args);
  CLI::App* cmd = app.add_subcommand(
      "sweep",
      "Measure scaling over device counts × batch sizes × models; prints tables and writes a "
      "JSON report");
  add_options(*cmd, *list);
  add_config_option(*cmd, *list);
  cmd->callback([&action, args, list, cmd] {
    action = [args, list, cmd] { return run_sweep_command(*cmd, *args, *list); };
  });
}

void add_report_command(CLI::App& app, Action& action) {
  struct ReportArgs {
    std::string file;
    std::string html;
    OptionList list;
  };
  auto args = std::make_shared<ReportArgs>();
  args->list.add("FILE", args->file, "A report written by `scalescope sweep`").require();
  args->list.add("--html", args->html,
                 "Also write the report as one self-contained HTML page (charts, verdicts, "
                 "environment)",
                 writable_file());
  CLI::App* cmd = app.add_subcommand(
      "report", "Print the tables of a sweep report again; --html writes its HTML page");
  add_options(*cmd, args->list);
  cmd->callback([&action, args, cmd] {
    action = [args, cmd] {
      (void)settle_options(*cmd, args->list);
      SweepReport report;
      as_usage_error([&] { report = read_sweep_report(args->file); });
      fmt::print("{}", format_sweep_tables(report));
      if (!args->html.empty()) {
        write_sweep_html(args->html, report);
        fmt::print("\nHTML report written to {}\n", args->html);
      }
      return 0;
    };
  });
}

}  // namespace scalescope::cli
