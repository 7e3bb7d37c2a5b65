// `scalescope sweep`: the main job. `scalescope report FILE`: the tables of a finished sweep.
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>

#include "core/check.h"
#include "core/fs.h"
#include "harness/cli/commands.h"
#include "harness/cli/data_options.h"
#include "harness/cli/training_options.h"
#include "harness/collectives/cluster.h"
#include "harness/sweep/sweep.h"
#include "harness/telemetry/environment.h"
#include "reports/html.h"
#include "reports/table.h"

namespace scalescope::cli {
namespace {

struct SweepArgs {
  SweepOptions options;
  TrainingFlags flags;
  std::string models;   // "cifar-cnn,cnn:width=1,2,4"
  std::string batches;  // "32,64"
  std::string global_batches;
  std::string config;
  std::string resume;
  std::string html;  // also write the report as a self-contained HTML page here
  std::string profile_steps;
  bool quiet = false;
};

std::vector<int64_t> parse_batches(const std::string& text, const char* flag) {
  return parse_positive_list(text, std::numeric_limits<int64_t>::max(),
                             fmt::format("{} {}", flag, text), "a positive batch size",
                             "a list like 32,64,128");
}

void register_options(CLI::App& cmd, SweepArgs& a) {
  SweepOptions& o = a.options;
  cmd.add_option("--config", a.config,
                 "JSON file of sweep options (keys: the long flag names with _ for -); flags "
                 "given here override it");
  cmd.add_option("--models", a.models,
                 "Models, comma-separated; 'cnn:width=1,2,4' is three sizes (see `scalescope "
                 "models`; default cifar-cnn,mlp:scale=0.1)");
  cmd.add_option("--devices", o.devices,
                 "Device counts: 1,2,4,8 (GPUs if present, else CPU), cpu:1,2 or cuda:1,2,4 "
                 "(default cpu:1,2)");
  cmd.add_option("--batch", a.batches, "Per-device batch sizes (weak scaling), e.g. 32,64,128")
      ->capture_default_str();
  cmd.add_option("--global-batch", a.global_batches,
                 "Global batch sizes (strong scaling: split over the devices) instead of --batch");
  cmd.add_option("--threads", o.threads,
                 "CPU threads per device (0: usable cores / the largest device count)")
      ->capture_default_str();
  cmd.add_flag("--oversubscribe", o.oversubscribe,
               "Allow more CPU threads than cores (timings then do not measure scaling)");
  cmd.add_option("--repeats", o.repeats, "Independent runs per point")->capture_default_str();
  cmd.add_option("--steps", o.steps, "Measured steps per run, after the warm-up")
      ->capture_default_str();
  cmd.add_option("--max-warmup-steps", o.max_warmup_steps,
                 "Warm-up runs until the step time settles, at most this many steps")
      ->capture_default_str();
  cmd.add_option("--steady-window", o.steady.window,
                 "Steps per window when deciding the step time has settled")
      ->capture_default_str();
  cmd.add_option("--steady-tolerance", o.steady.tolerance,
                 "Settled: two windows' median step times within this fraction")
      ->capture_default_str();
  add_data_options(cmd, o.train.data);
  add_training_options(cmd, o.train, a.flags);
  cmd.add_option("-o,--output", o.output, "Report file (JSON), rewritten after every point")
      ->capture_default_str();
  cmd.add_option("--resume", a.resume,
                 "Continue the sweep of this report: its options, its finished points kept");
  cmd.add_option("--html", a.html,
                 "Also write the report as one self-contained HTML page (charts, verdicts, "
                 "environment) at the end of the sweep");
  cmd.add_option("--trace", o.trace_prefix,
                 "Write each point's first repeat as a Chrome/Perfetto trace named PREFIX + the "
                 "point (e.g. --trace traces/ or --trace run1-)");
  cmd.add_option("--profile-steps", a.profile_steps,
                 "Measured steps A:B of every run inside a profiler capture range "
                 "(cudaProfilerStart/Stop and an NVTX range 'profile'; see `scalescope profile`)");
  cmd.add_flag("-q,--quiet", a.quiet, "No progress, only the tables");
}

// Applies what the flags say on top of what the options hold already.
void apply_flags(SweepArgs& a) {
  SweepOptions& o = a.options;
  if (!a.models.empty()) o.models = split_model_list(a.models);
  SS_CHECK(a.batches.empty() || a.global_batches.empty(),
           "give --batch (weak scaling) or --global-batch (strong scaling), not both");
  if (!a.batches.empty()) {
    o.mode = ScalingMode::kWeak;
    o.batches = parse_batches(a.batches, "--batch");
  }
  if (!a.global_batches.empty()) {
    o.mode = ScalingMode::kStrong;
    o.batches = parse_batches(a.global_batches, "--global-batch");
  }
  apply_training_flags(a.flags, o.train);
  if (!a.profile_steps.empty()) {
    std::tie(o.train.profile_first, o.train.profile_last) = parse_profile_steps(a.profile_steps);
  }
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
      mine.dump(), std::chrono::milliseconds(timeout_ms), fmt::format("sharing {}", path));
  const nlohmann::json first = nlohmann::json::parse(all.front());
  if (first.contains("error")) throw_error(first.at("error").get<std::string>());
  return first.at("text").get<std::string>();
}

nlohmann::json parse_json_text(const std::string& text, const std::string& path, const char* what) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw_error(fmt::format("{} {} is not valid JSON: {}", what, path, e.what()));
  }
}

int run_sweep_command(const std::shared_ptr<SweepArgs>& parsed) {
  // Started by mpirun or srun: the processes join (alone: nothing happens).
  const std::unique_ptr<Cluster> cluster =
      Cluster::join(std::chrono::milliseconds(parsed->options.train.collective_timeout_ms));
  check_launch(parsed->flags, *cluster);
  const bool lead = cluster->rank() == 0;  // prints; every process runs the same sweep
  // Precedence: defaults < --resume's report or --config's file < flags. The flags are
  // parsed again over the file's values, so only those given override it.
  std::shared_ptr<SweepArgs> args = parsed;
  std::unique_ptr<SweepReport> resume;
  if (!parsed->config.empty() || !parsed->resume.empty()) {
    SS_CHECK(parsed->config.empty() || parsed->resume.empty(),
             "--resume continues a report with its own options; do not give --config too");
    args = std::make_shared<SweepArgs>();
    const std::string& path = parsed->resume.empty() ? parsed->config : parsed->resume;
    const std::string text =
        read_on_rank0(*cluster, path, parsed->options.train.collective_timeout_ms);
    if (!parsed->resume.empty()) {
      resume = std::make_unique<SweepReport>(
          sweep_report_from_json(parse_json_text(text, path, "report"), path));
      apply_sweep_config(resume->config, args->options, parsed->resume + " (its config)");
      args->options.output = parsed->resume;
    } else {
      apply_sweep_config(parse_json_text(text, path, "config file"), args->options, parsed->config);
    }
    args->flags = training_flags_from(args->options.train, true);
    CLI::App again;
    register_options(again, *args);
    std::vector<std::string> rest(arguments().begin() + 2, arguments().end());
    std::reverse(rest.begin(), rest.end());  // CLI11 parses a reversed vector
    again.parse(rest);
  }
  apply_flags(*args);
  SweepOptions& o = args->options;
  o.command_line = command_line();
  o.train.cluster = cluster.get();
  validate(o);  // every value, before anything runs
  SS_CHECK(args->html.empty() || args->html != o.output,
           "--html {}: the same file as the JSON report (-o); give the page its own name",
           args->html);
  if (!args->html.empty() && lead) {  // found now, not after the sweep has run
    const std::string dir = std::filesystem::path(args->html).parent_path().string();
    SS_CHECK(access(dir.empty() ? "." : dir.c_str(), W_OK) == 0,
             "--html {}: cannot write in directory '{}' (missing or not writable)", args->html,
             dir.empty() ? "." : dir);
  }

  const bool tty = isatty(STDERR_FILENO) == 1;
  SweepProgress progress;
  if (!args->quiet && lead) {
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
        fmt::print(stderr, "done: {}: {:.0f} samples/s, step {:.2f} ms\n", p.label(),
                   p.summary.throughput.value, p.summary.step_ms_median);
      } else {
        fmt::print(stderr, "FAILED: {}: {}\n", p.label(), p.error);
      }
      std::fflush(stderr);
    };
  }
  const Environment env = capture_environment(o.command_line);
  const SweepReport report = run_sweep(o, env, progress, resume.get());
  if (!lead) return 0;
  fmt::print("{}", format_sweep_tables(report));
  fmt::print("\nreport written to {}\n", o.output);
  if (!args->html.empty()) {
    write_sweep_html(args->html, report);
    fmt::print("HTML report written to {}\n", args->html);
  }
  return 0;
}

}  // namespace

void add_sweep_command(CLI::App& app, Action& action) {
  auto args = std::make_shared<SweepArgs>();
  CLI::App* cmd = app.add_subcommand(
      "sweep",
      "Measure scaling over device counts × batch sizes × models; prints tables and writes a "
      "JSON report");
  register_options(*cmd, *args);
  cmd->callback([&action, args] { action = [args] { return run_sweep_command(args); }; });
}

void add_report_command(CLI::App& app, Action& action) {
  auto file = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "report", "Print the tables of a sweep report again; --html writes its HTML page");
  auto html = std::make_shared<std::string>();
  cmd->add_option("FILE", *file, "A report written by `scalescope sweep`")->required();
  cmd->add_option("--html", *html,
                  "Also write the report as one self-contained HTML page (charts, verdicts, "
                  "environment)");
  cmd->callback([&action, file, html] {
    action = [file, html] {
      const SweepReport report = read_sweep_report(*file);
      fmt::print("{}", format_sweep_tables(report));
      if (!html->empty()) {
        write_sweep_html(*html, report);
        fmt::print("\nHTML report written to {}\n", *html);
      }
      return 0;
    };
  });
}

}  // namespace scalescope::cli
